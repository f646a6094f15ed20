"""What the C generator's parts share: the C values and lvalues they pass each other, the
program's objects in the order of the C ``ss_objects``, the file's functions and statics as
they are written, and the identifiers made for them (a prefix and one counter)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...pipeline.codegen import error_codes
from ...pipeline.layout import FieldInfo
from ...pipeline.program import Program

MAX_WIDTH = 128
SS_EXIT = -1          # an action's ``exit``: the control ends, not an error

# helpers that fail a packet (pipeline_helpers.h: they set S->err), and the check that stops it
FALLIBLE = ("ss_index(", "ss_udiv(", "ss_umod(", "ss_sdiv(", "ss_smod(")
FAILED = "if (S->err) return S->err;"


class Unsupported(Exception):
    """The native generator cannot do this program; the message names what (the switch runs
    the Python path instead, and says why)."""


@dataclass
class Native:
    """A program's generated C and where its objects are: the index of every table, action
    profile, register, counter and meter array in the C ``ss_objects`` (objects.py uses it)."""

    source: str
    tables: list[str]
    profiles: list[str]
    registers: list[str]
    counters: list[str]            # indirect counter arrays
    meters: list[str]              # indirect meter arrays
    value_sets: list[str] = field(default_factory=list)   # parser value sets
    wide: dict[int, int] = field(default_factory=dict)    # slot -> index in w[]


@dataclass(frozen=True)
class V:
    """A C expression: kind 'data' (128 bits, ``signed`` or not), 'bool', 'header' (an int:
    the base slot), 'stack' (``const``: the layout's stack)."""

    src: str
    kind: str = "data"
    signed: bool = False
    const: Any = None


def const(n: int) -> V:
    if 0 <= n < 1 << 64:
        return V(f"((ss_u128){n:#x}ull)", const=n)
    if 0 <= n < 1 << 128:
        return V(f"((((ss_u128){n >> 64:#x}ull) << 64) | {n & (1 << 64) - 1:#x}ull)", const=n)
    if -(1 << 127) <= n < 0:
        return V(f"(-(ss_i128){const(-n).src})", signed=True, const=n)
    raise Unsupported(f"a constant wider than {MAX_WIDTH} bits")


def mask(width: int) -> str:
    return const((1 << width) - 1).src


def wide(info: FieldInfo) -> bool:
    """Kept in w[] (ss_u128): a field of 65..128 bits, or a variable-length one (its current
    width in the slot after the header's fields)."""
    return info.width is None or info.width > 64


class Lvalue:
    """A writable field: its C lvalue and its FieldInfo."""

    def __init__(self, target: str, info: FieldInfo, cast: str):
        self.target, self.info, self.cast = target, info, cast

    def store(self, v: V | str) -> str:
        src = v.src if isinstance(v, V) else v
        w = self.info.width
        if w is None:
            raise Unsupported("variable-length fields")
        if self.info.signed:
            return f"{self.target} = ({self.cast})ss_tcm((ss_i128)({src}), {w});"
        return f"{self.target} = ({self.cast})((ss_u128)({src}) & {mask(w)});"

    def read(self) -> V:
        """The field's value: 128 bits, sign-extended where the field is signed."""
        if self.info.signed:
            if self.cast == "uint64_t":
                return V(f"((ss_i128)(int64_t){self.target})", signed=True)
            return V(f"((ss_i128){self.target})", signed=True)
        return V(f"((ss_u128){self.target})")


class Context:
    """One program being written as C: the Program (``p``), its JSON and layout, the lines of
    its functions (``out``) and its static arrays (``statics``), the slots kept in w[]
    (``wide``: slot -> index) and the names of its objects in ``ss_objects`` order."""

    def __init__(self, program: Program):
        self.p = program
        self.js = program.json
        self.lay = program.layout
        self.out: list[str] = []
        self.wide: dict[int, int] = {}
        for hdr in self.lay.headers.values():
            for f in hdr.type.fields:
                if wide(f):
                    self.wide[hdr.base + 1 + f.index] = len(self.wide)
        self.tables = list(program.tables)
        self.profiles = list(program.action_profiles)
        self.registers = list(program.registers)
        self.counters = list(program.counters)
        self.meters = list(program.meters)
        self.value_sets = list(program.value_sets)
        self.errors = error_codes(self.js)
        self.hidden = self.lay.hidden
        self.statics: list[str] = []
        self._serial = 0

    def ident(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._serial}"

    def static(self, ctype: str, values: list[str]) -> str:
        """A static const array of ``values``; returns its name."""
        name = self.ident("K")
        self.statics.append(f"static const {ctype} {name}[] = {{{', '.join(values) or '0'}}};")
        return name

    def slot(self, slot: int, info: FieldInfo | None) -> Lvalue:
        """The C lvalue of a constant slot (info None: a valid bit, stack index, hidden register)."""
        if info is not None and wide(info):
            return Lvalue(f"S->w[{self.wide[slot]}]", info, "ss_u128")
        return Lvalue(f"S->s[{slot}]", info or FieldInfo("", 64, False, 0), "uint64_t")

    def dyn_slot(self, base: str, offset: int, info: FieldInfo) -> Lvalue:
        """The lvalue of field ``info`` of the header whose base slot is the C int ``base``."""
        if base.isdigit():
            return self.slot(int(base) + offset, info)
        if wide(info):
            return Lvalue(f"S->w[WIDE_OF[({base}) + {offset}]]", info, "ss_u128")
        return Lvalue(f"S->s[({base}) + {offset}]", info, "uint64_t")
