"""A loaded Program as one C file: every per-program function of native/abi.h.

The C is made from the same Program the Python path runs (its layout, action locals,
calculations, tables...), so the semantics checked against BMv2 are kept; the control flow
is the Python generator's (controlflow.Block, post_dominators and Structurer, written in C
through CSyntax), the header byte layout is header_codec.chunks.

Packet state (``ss_st``): ``s[slot]``, one uint64_t per slot of the Python path's layout (the
same slot numbers), holds every field of up to 64 bits, valid bits, stack indexes and hidden
registers; fields of 65..128 bits live in ``w[]`` (ss_u128), at the index ``WIDE_OF[slot]``
gives (``s[slot]`` unused). Signed fields are held as their value sign-extended (the Python
path holds the negative int): ``(int64_t)s[slot]``, ``(ss_i128)w[i]``. Temporaries that are
action locals in the Python path (action_locals.py) are C locals here too.

Expressions are computed in 128 bits: unsigned (ss_u128) unless an operand is signed
(ss_i128), which is the Python path's infinite precision wherever p4c masks a result to its
width (it masks every arithmetic result and cast: the JSON carries the masks); stores mask to
the field's width, or take the two's complement value of a signed field (two_comp_mod).

Variable-length fields of up to 128 bits are kept in w[] too, their current width in the
slot after the header's fields (the Python path's layout).

Refused (Unsupported, naming what), the switch then runs the Python path: fields or
constants wider than 128 bits, variable-length fields that may be; header union stacks (and
comparing or choosing whole unions); calculations over the payload; the hash algorithms xxh64,
toeplitz, round_robin(_consistent) and custom CRCs other than the four defaults; registers
wider than 64 bits; register reads inside expressions; deparser primitives; union-stack
assignment (assign_union_stack). Anything else the
generator trips on is Unsupported too, with its cause. ``log_msg`` does nothing on the
native path (the Python path logs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..pipeline import header_codec
from ..pipeline.codegen import lookahead_args, by_action, error_codes
from ..pipeline.controlflow import Block, Structurer, post_dominators
from ..pipeline.errors import ProgramError
from ..pipeline.expressions import parse_hexstr
from ..pipeline.layout import FieldInfo, HeaderInstance, HeaderType
from ..pipeline.primitives import DROP_PORT, MIRROR_SESSION_VALID, Arithmetic, call_primitive, header_type_of, is_jump
from ..pipeline.program import Program
from ..pipeline.untrusted import json_int

MAX_WIDTH = 128
SS_EXIT = -1          # an action's ``exit``: the control ends, not an error

# hashes.py algorithm name -> objects.h enum ss_algo (crc16/32_custom: their default parameters,
# the only ones a program can have: no extern sets others)
ALGORITHM_IDS = {"crc16": 0, "crc16_custom": 0, "crc32": 1, "crc32_custom": 1, "crcCCITT": 2,
                 "csum16": 3, "cksum16": 3, "identity": 4, "xor16": 5, "xor32": 6,
                 "crc8_custom": 7, "crc64_custom": 8, "hash_ex": 9}

# abi.h enum ss_meta, in its order: intrinsic name (program.INTRINSICS) or hidden register
META = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "parser_error",
        "checksum_error", "mcast_grp", "egress_rid", "priority", "ingress_global_timestamp",
        "egress_global_timestamp", "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth", "qid",
        "@clone_session", "@clone_field_list", "@resubmit_field_list", "@recirculate_field_list",
        "@packet_length", "@truncate_length", "@learn_id", "@ingress_length")


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


def _const(n: int) -> V:
    if 0 <= n < 1 << 64:
        return V(f"((ss_u128){n:#x}ull)", const=n)
    if 0 <= n < 1 << 128:
        return V(f"((((ss_u128){n >> 64:#x}ull) << 64) | {n & (1 << 64) - 1:#x}ull)", const=n)
    if -(1 << 127) <= n < 0:
        return V(f"(-(ss_i128){_const(-n).src})", signed=True, const=n)
    raise Unsupported(f"a constant wider than {MAX_WIDTH} bits")


def _mask(width: int) -> str:
    return _const((1 << width) - 1).src


class CSyntax:
    """controlflow.Structurer's branches in C; past its nesting bound the rest of a control
    goes on in the control's goto form (``goto N<i>;``)."""

    def __init__(self, label):
        self.label = label
        self.used_fallback = False

    def if_(self, cond): return f"if ({cond}) {{"
    def if_not(self, cond): return f"if (!({cond})) {{"
    def else_(self): return "else {"
    def select(self, selector): return f"_i = {selector};"
    def case(self, first, values):
        test = " || ".join(f"_i == {v}" for v in values)
        return f"{'if' if first else 'else if'} ({test}) {{"
    def end(self): return "}"
    def empty(self): return ";"
    def leave(self): return None

    def fallback(self, node):
        self.used_fallback = True
        return f"goto {self.label(node)};"


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
        return f"{self.target} = ({self.cast})((ss_u128)({src}) & {_mask(w)});"


def _wide(info: FieldInfo) -> bool:
    """Kept in w[] (ss_u128): a field of 65..128 bits, or a variable-length one (its current
    width in the slot after the header's fields)."""
    return info.width is None or info.width > 64


class CGenerator(Arithmetic):
    def __init__(self, program: Program):
        self.p = program
        self.js = program.json
        self.lay = program.layout
        self.out: list[str] = []
        self.wide: dict[int, int] = {}
        self._check_program()
        for hdr in self.lay.headers.values():
            for f in hdr.type.fields:
                if _wide(f):
                    self.wide[hdr.base + 1 + f.index] = len(self.wide)
        self.tables = list(program.tables)
        self.profiles = list(program.action_profiles)
        self.registers = list(program.registers)
        self.counters = list(program.counters)
        self.meters = list(program.meters)
        self.value_sets = list(program.value_sets)
        self.errors = error_codes(self.js)
        self.algos = {c["name"]: c["algo"] for c in self.js.get("calculations", [])}
        for pipe in self.js.get("pipelines", []):
            for ap in pipe.get("action_profiles", []):
                if ap.get("selector"):
                    self.algos[f"{ap['name']}$selector"] = ap["selector"]["algo"]
        self.locals: dict[str, tuple[str, FieldInfo]] = {}
        self.statics: list[str] = []
        self._serial = 0
        self.calc_fn: dict[str, str] = {}
        self.action_fn: dict[int, str | None] = {}
        self.hidden = self.lay.hidden
        self.egress_spec = self.lay.intrinsic("standard_metadata.egress_spec")
        self.mcast_grp = self.lay.intrinsic("intrinsic_metadata.mcast_grp")

    # -- checks -------------------------------------------------------------------------
    def _check_program(self) -> None:
        for t in self.lay.header_types.values():
            if t.varbit is not None and any(h.type is t for h in self.lay.headers.values()):
                most = (t.max_length or 0) * 8 - t.fixed_bits
                if not t.max_length or most > MAX_WIDTH:
                    raise Unsupported(f"variable-length field in header type '{t.name}' of up to "
                                      f"{most if t.max_length else 'unbounded'} bits (at most {MAX_WIDTH})")
            for f in t.fields:
                if f.width is not None and f.width > MAX_WIDTH:
                    raise Unsupported(f"field '{t.name}.{f.name}' is {f.width} bits (at most {MAX_WIDTH})")
        if self.lay.union_stacks:
            raise Unsupported("header union stacks")
        for r in self.p.registers.values():
            if r.bitwidth > 64:
                raise Unsupported(f"register array '{r.name}' is {r.bitwidth} bits wide (at most 64)")
        for dep in self.js.get("deparsers", []):
            if dep.get("primitives"):
                raise Unsupported("deparser primitives")
        for f, info in self.lay.action_locals.items():
            if info.width is None or info.width > MAX_WIDTH:
                raise Unsupported(f"temporary '{f}' wider than {MAX_WIDTH} bits")

    def _ident(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._serial}"

    def static(self, ctype: str, values: list[str]) -> str:
        name = self._ident("K")
        self.statics.append(f"static const {ctype} {name}[] = {{{', '.join(values) or '0'}}};")
        return name

    # -- slots --------------------------------------------------------------------------
    def slot(self, slot: int, info: FieldInfo | None) -> Lvalue:
        """The C lvalue of a constant slot (info None: a valid bit, stack index, hidden register)."""
        if info is not None and _wide(info):
            return Lvalue(f"S->w[{self.wide[slot]}]", info, "ss_u128")
        return Lvalue(f"S->s[{slot}]", info or FieldInfo("", 64, False, 0), "uint64_t")

    def dyn_slot(self, base: str, offset: int, info: FieldInfo) -> Lvalue:
        """The lvalue of field ``info`` of the header whose base slot is the C int ``base``."""
        if base.isdigit():
            return self.slot(int(base) + offset, info)
        if _wide(info):
            return Lvalue(f"S->w[WIDE_OF[({base}) + {offset}]]", info, "ss_u128")
        return Lvalue(f"S->s[({base}) + {offset}]", info, "uint64_t")

    def read(self, lv: Lvalue) -> V:
        info = lv.info
        if info.signed:
            if lv.cast == "uint64_t":
                return V(f"((ss_i128)(int64_t){lv.target})", signed=True)
            return V(f"((ss_i128){lv.target})", signed=True)
        return V(f"((ss_u128){lv.target})")

    def field_lvalue(self, ref) -> Lvalue:
        if isinstance(ref, list) and len(ref) == 2 and ref[0] in ("scalars",) and self.locals.get(ref[1]):
            name, info = self.locals[ref[1]]
            return Lvalue(name, info, "ss_i128" if info.signed else "ss_u128")
        slot, info, _ = self.lay.field_ref(ref)
        return self.slot(slot, info)

    # -- expressions --------------------------------------------------------------------
    def value(self, node: dict) -> V:
        c = self.compile(node)
        if c.kind == "bool":
            return V(f"((ss_u128)({c.src}))")
        if c.kind != "data":
            raise ProgramError(f"expected a value, got a {c.kind}")
        return c

    def boolean(self, node: dict) -> str:
        c = self.compile(node)
        if c.kind == "data":
            return f"({c.src} != 0)"
        if c.kind != "bool":
            raise ProgramError(f"expected a condition, got a {c.kind}")
        return c.src

    def header(self, node: dict) -> str:
        c = self.compile(node)
        if c.kind != "header":
            raise ProgramError(f"expected a header, got a {c.kind}")
        return c.src

    def compile(self, node: Any) -> V:
        if not isinstance(node, dict) or "type" not in node:
            raise ProgramError(f"bad expression node {node!r}")
        t, v = node["type"], node.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" not in v and "type" in v:
                return self.compile(v)
            return self._op(v)
        if t == "field":
            if isinstance(v, list) and len(v) == 2 and v[1] == "$valid$":
                return V(f"((ss_u128)S->s[{self.lay.header(v[0]).base}])")
            return self.read(self.field_lvalue(v))
        if t == "hexstr":
            return _const(parse_hexstr(v))
        if t == "bool":
            return V("1" if v else "0", "bool")
        if t in ("local", "runtime_data"):
            return V(f"D[{json_int(v, f'{t} index', 0)}]")
        if t == "header":
            return V(str(self.lay.header(v).base), "header")
        if t == "header_stack":
            return V("", "stack", const=self.lay.stack(v))
        if t == "stack_field":
            st = self.lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return self.read(self.dyn_slot(self._stack_last(st), 1 + info.index, info))
        if t == "header_union":
            return V("", "union", const=self.lay.union(v))
        if t == "header_union_stack":
            raise Unsupported("header union stacks")
        if t == "register":
            raise Unsupported("a register read inside an expression")
        raise ProgramError(f"unsupported expression operand type '{t}'")

    def _stack_index(self, st, idx: str) -> str:
        bases = self.static("int32_t", [str(h.base) for h in st.headers])
        return f"ss_index(S, {bases}, {len(st.headers)}, {idx})"

    def _stack_last(self, st) -> str:
        return self._stack_index(st, f"((ss_i128)S->s[{st.next_slot}] - 1)")

    def _op(self, e: dict) -> V:
        if not isinstance(e, dict) or "op" not in e:
            raise ProgramError(f"bad expression {e!r}")
        op, left, right = e["op"], e.get("left"), e.get("right")
        if op in ("+", "-", "*", "<<", ">>", "&", "|", "^", "/", "%") and left is not None:
            return self._binary_value(op, self.value(left), self.value(right))
        if op == "-":
            return V(f"(-(ss_i128){self.value(right).src})", signed=True)
        if op in ("==", "!=", ">", "<", ">=", "<="):
            return self._compare(op, left, right)
        if op == "and":
            return V(f"({self.boolean(left)} && {self.boolean(right)})", "bool")
        if op == "or":
            return V(f"({self.boolean(left)} || {self.boolean(right)})", "bool")
        if op == "not":
            return V(f"(!{self.boolean(right)})", "bool")
        if op == "~":
            return V(f"(~(ss_i128){self.value(right).src})", signed=True)
        if op in ("valid", "valid_union"):
            r = self.compile(right)
            if r.kind == "union":            # any member valid
                return V("(" + " || ".join(f"S->s[{h.base}]" for h in r.const.headers) + ")", "bool")
            return V(f"(S->s[{self.header(right)}] == 1)", "bool")
        if op == "d2b":
            return V(f"({self.value(right).src} != 0)", "bool")
        if op == "b2d":
            return V(f"((ss_u128)({self.boolean(right)}))")
        if op == "two_comp_mod":
            return V(f"ss_tcm((ss_i128){self.value(left).src}, (int){self.value(right).src})", signed=True)
        if op == "usat_cast":
            return V(f"ss_usat((ss_i128){self.value(left).src}, (int){self.value(right).src})")
        if op == "sat_cast":
            return V(f"ss_sat((ss_i128){self.value(left).src}, (int){self.value(right).src})", signed=True)
        if op == "?":
            cond = self.boolean(e["cond"])
            lc, rc = self.compile(left), self.compile(right)
            if "union" in (lc.kind, rc.kind):
                raise Unsupported("a conditional header union")
            if lc.kind == rc.kind == "header":
                return V(f"({cond} ? {lc.src} : {rc.src})", "header")
            lv, rv = self.value(left), self.value(right)
            signed = lv.signed or rv.signed
            ty = "ss_i128" if signed else "ss_u128"
            return V(f"({cond} ? ({ty}){lv.src} : ({ty}){rv.src})", signed=signed)
        if op in ("dereference_header_stack", "dereference_stack"):
            st = self.compile(left).const
            idx = self.compile(right)
            if isinstance(idx.const, int) and 0 <= idx.const < len(st.headers):
                return V(str(st.headers[idx.const].base), "header")
            return V(self._stack_index(st, idx.src), "header")
        if op == "access_field":
            base = self.header(left)
            htype = self.header_type_of(left)
            info = htype.fields[json_int(right, "access_field index", 0, len(htype.fields) - 1)]
            return self.read(self.dyn_slot(base, 1 + info.index, info))
        if op == "last_stack_index":
            return V(f"((ss_i128)S->s[{self._any_stack(right).next_slot}] - 1)", signed=True)
        if op == "size_stack":
            return V(f"((ss_u128)S->s[{self._any_stack(right).next_slot}])")
        if op == "access_union_header":
            u = self._union(left)
            return V(str(u.headers[json_int(right, "access_union_header index", 0, len(u.headers) - 1)].base), "header")
        if op == "dereference_union_stack":
            raise Unsupported("header union stacks")
        raise ProgramError(f"unsupported expression operator '{op}'")

    def _union(self, node):
        c = self.compile(node)
        if c.kind != "union":
            raise ProgramError(f"expected a header union, got {node!r}")
        return c.const

    def _any_stack(self, node):
        c = self.compile(node)
        if c.kind != "stack":
            raise Unsupported("union stacks") if node.get("type") == "header_union_stack" else \
                ProgramError(f"expected a header stack, got {node!r}")
        return c.const

    def _binary_value(self, op: str, a: V, b: V) -> V:
        if op == "&":
            signed = a.signed and b.signed
        else:
            signed = a.signed or b.signed
        ty = "ss_i128" if signed else "ss_u128"
        if op in ("+", "-", "*", "&", "|", "^"):
            return V(f"(({ty}){a.src} {op} ({ty}){b.src})", signed=signed)
        if op == "<<":
            return V(f"(({ty})ss_shl((ss_u128){a.src}, (ss_u128){b.src}))", signed=a.signed)
        if op == ">>":
            if a.signed:
                return V(f"ss_sar((ss_i128){a.src}, (ss_u128){b.src})", signed=True)
            return V(f"ss_shr((ss_u128){a.src}, (ss_u128){b.src})")
        fn = {"/": "div", "%": "mod"}[op]
        if signed:
            return V(f"ss_s{fn}(S, (ss_i128){a.src}, (ss_i128){b.src})", signed=True)
        return V(f"ss_u{fn}(S, (ss_u128){a.src}, (ss_u128){b.src})")

    def _compare(self, op: str, left, right) -> V:
        lc, rc = self.compile(left), self.compile(right)
        if "union" in (lc.kind, rc.kind):
            raise Unsupported("comparing header unions")
        if lc.kind == "header" and rc.kind == "header":
            htype = self.header_type_of(left)
            eq = self._header_equal(lc.src, rc.src, htype)
            return V(eq if op == "==" else f"(!{eq})", "bool")
        if lc.kind == "bool" or rc.kind == "bool":
            return V(f"({self.boolean(left)} {op} {self.boolean(right)})", "bool")
        a, b = self.value(left), self.value(right)
        ty = "ss_i128" if a.signed or b.signed else "ss_u128"
        return V(f"(({ty}){a.src} {op} ({ty}){b.src})", "bool")

    def _header_equal(self, a: str, b: str, htype: HeaderType) -> str:
        """BMv2 header comparison: both invalid, or both valid with equal fields."""
        parts = [f"{x.target} == {y.target}" for x, y in zip(self._field_slots(a, htype), self._field_slots(b, htype))]
        fields = " && ".join(parts) or "1"
        return f"(S->s[{a}] == S->s[{b}] && (!S->s[{a}] || ({fields})))"

    def header_type_of(self, node: dict) -> HeaderType:
        return header_type_of(self.lay, node, lambda n: self.compile(n).const, self._union)

    def lvalue(self, p: dict) -> Lvalue:
        t, v = p["type"], p.get("value")
        if t == "field":
            if isinstance(v, list) and len(v) == 2 and v[1] == "$valid$":
                raise ProgramError(f"'{v[0]}.$valid$' is read-only")
            return self.field_lvalue(v)
        if t == "expression":
            e = v["value"] if v.get("type") == "expression" else v
            if e.get("op") != "access_field":
                raise ProgramError("expression is not assignable")
            base = self.header(e["left"])
            htype = self.header_type_of(e["left"])
            info = htype.fields[int(e["right"])]
            return self.dyn_slot(base, 1 + info.index, info)
        if t == "stack_field":
            st = self.lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return self.dyn_slot(self._stack_last(st), 1 + info.index, info)
        raise ProgramError(f"cannot assign to a '{t}'")

    # -- primitives ---------------------------------------------------------------------
    def primitive(self, prim: dict) -> list[str]:
        """The primitive's statements; where they can fail (a stack index, a division), the
        packet stops after them, as the Python path's exception stops it (the stateful ones
        check before they change anything)."""
        lines = call_primitive(self, prim, lambda op: Unsupported(f"primitive '{op}'"))
        if any(h in ln for ln in lines for h in FALLIBLE):
            lines = lines + [FAILED]
        return lines

    def p_assign(self, dst, src):
        if dst["type"] == "header":
            return self.p_assign_header(dst, src)
        if dst["type"] in ("header_union", "header_stack", "header_union_stack"):
            raise Unsupported(f"assigning a {dst['type']}")
        return [self.lvalue(dst).store(self.value(src))]

    p_modify_field = p_assign

    def p_assign_VL(self, dst, src):
        if dst["type"] != "field" or src["type"] != "field":
            raise ProgramError("assign_VL needs two field references")
        d_slot, d_info, d_hdr = self.lay.field_ref(dst["value"])
        s_slot, s_info, s_hdr = self.lay.field_ref(src["value"])
        return [f"{self.slot(d_slot, d_info).target} = {self.slot(s_slot, s_info).target};",
                f"S->s[{d_hdr.varbit_len_slot}] = S->s[{s_hdr.varbit_len_slot}];"]

    def _field_slots(self, base: str, htype: HeaderType) -> list[Lvalue]:
        """Every slot of a header after its valid bit: its fields, and a varbit's width."""
        out = [self.dyn_slot(base, 1 + f.index, f) for f in htype.fields]
        if htype.varbit is not None:
            out.append(self.dyn_slot(base, 1 + len(htype.fields), FieldInfo("", 64, False, 0)))
        return out

    def p_assign_header(self, dst, src):
        db, sb = self.header(dst), self.header(src)
        htype = self.header_type_of(dst)
        copies = [f"{d.target} = {s.target};" for d, s in zip(self._field_slots(db, htype), self._field_slots(sb, htype))]
        return [f"if (!S->s[{sb}]) S->s[{db}] = 0;",
                f"else {{ S->s[{db}] = S->s[{sb}]; {' '.join(copies)} }}"]

    p_copy_header = p_assign_header

    def p_assign_header_stack(self, dst, src):
        ds, ss = self.lay.stack(dst["value"]), self.lay.stack(src["value"])
        lines = [f"S->s[{ds.next_slot}] = S->s[{ss.next_slot}];"]
        for a, b in zip(ds.headers, ss.headers):
            lines += self.p_assign_header({"type": "header", "value": a.name}, {"type": "header", "value": b.name})
        return lines

    def _stack_shift(self, stack, num, direction: str):
        c = self.compile(stack)
        if c.kind != "stack":
            raise Unsupported(f"{direction} on a union stack")
        st = c.const
        bases = self.static("int32_t", [str(h.base) for h in st.headers])
        return [f"ss_stack_{direction}(S, {bases}, {len(st.headers)}, {st.headers[0].type.slots}, "
                f"{st.next_slot}, (ss_i128){self.value(num).src});"]

    def p_push(self, stack, num): return self._stack_shift(stack, num, "push")
    def p_pop(self, stack, num): return self._stack_shift(stack, num, "pop")

    def p_add_header(self, hdr):
        base = self.header(hdr)
        htype = self.header_type_of(hdr)
        zero = [f"{lv.target} = 0;" for lv in self._field_slots(base, htype)]
        return [f"if (!S->s[{base}]) {{ {' '.join(zero)} {' '.join(self._set_valid(base))} "
                f"S->s[{self.hidden['packet_length']}] += {htype.fixed_bits // 8}; }}"]

    def p_add_header_fast(self, hdr):
        return self._set_valid(self.header(hdr))

    def _set_valid(self, base: str) -> list[str]:
        """Mark a header valid; a union member invalidates its siblings (stack elements are no
        union's: union stacks are refused)."""
        siblings = self.p.union_siblings.get(int(base), ()) if base.isdigit() else ()
        return [f"S->s[{base}] = 1;", *(f"S->s[{sib}] = 0;" for sib in siblings)]

    def p_assign_union(self, dst, src):
        d, s = self._union(dst), self._union(src)
        lines = []
        for a, b in zip(d.headers, s.headers):
            lines += self.p_assign_header({"type": "header", "value": a.name}, {"type": "header", "value": b.name})
        return lines

    def p_remove_header(self, hdr):
        base = self.header(hdr)
        nbytes = self.header_type_of(hdr).fixed_bits // 8
        return [f"if (S->s[{base}]) {{ S->s[{self.hidden['packet_length']}] -= {nbytes}; S->s[{base}] = 0; }}"]

    def p_mark_to_drop(self, std=None):
        lines = [f"S->s[{self.egress_spec}] = {DROP_PORT};"]
        if self.mcast_grp is not None:
            lines.append(f"S->s[{self.mcast_grp}] = 0;")
        return lines

    p_drop = p_mark_to_drop

    def p_exit(self): return [f"return {SS_EXIT};"]
    def p_no_op(self): return [";"]

    def p_assert(self, cond): return [f"if (!{self.boolean(cond)}) return SS_ERR_ABORT;"]
    p_assume = p_assert

    def p_log_msg(self, fmt, values):
        for v in values.get("value", []):
            self.value(v)             # checked, not printed: the native path does not log
        return [";"]

    def _clone(self, session, field_list):
        return [f"S->s[{self.hidden['clone_session']}] = (uint64_t)(({self.value(session).src} & 0xffff) "
                f"| {MIRROR_SESSION_VALID});",
                f"S->s[{self.hidden['clone_field_list']}] = (uint64_t)({self.value(field_list).src} & 0xffff);"]

    p_clone_ingress_pkt_to_egress = _clone
    p_clone_egress_pkt_to_egress = _clone

    def p_resubmit(self, fl):
        return [f"S->s[{self.hidden['resubmit_field_list']}] = (uint64_t)({self.value(fl).src} & 0xffff);"]

    def p_recirculate(self, fl):
        return [f"S->s[{self.hidden['recirculate_field_list']}] = (uint64_t)({self.value(fl).src} & 0xffff);"]

    def p_truncate(self, length):
        t = self.hidden["truncate_length"]
        return [f"{{ ss_u128 _t = {self.value(length).src}; if (_t < S->s[{t}]) S->s[{t}] = (uint64_t)_t; }}"]

    def p_generate_digest(self, receiver, learn_id):
        return [f"S->s[{self.hidden['learn_id']}] = (uint64_t)({self.value(learn_id).src} & 0xffff);"]

    def p_modify_field_with_hash_based_offset(self, dst, base, calc, size):
        name = calc.get("value")
        if name not in self.p.calculations:
            raise ProgramError(f"unknown calculation '{name}'")
        return [f"{{ ss_u128 _sz = {self.value(size).src}; if (!_sz) _sz = 1;",
                "  " + self.lvalue(dst).store(f"((ss_u128){self.calculation(name)}(o, S) % _sz) + "
                                              f"{self.value(base).src}"),
                "}"]

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        return [f"{{ ss_u128 _lo = {self.value(lo).src}, _hi = {self.value(hi).src};",
                "  if (_lo <= _hi) " + self.lvalue(dst).store("ss_random(o, (uint64_t)_lo, (uint64_t)_hi)"),
                "}"]

    def _index_of(self, names: list[str], p: dict, what: str) -> int:
        try:
            return names.index(p.get("value"))
        except ValueError:
            raise ProgramError(f"unknown {what} '{p.get('value')}'") from None

    def p_count(self, counter, index):
        c = self._index_of(self.counters, counter, "counter array")
        il = self.hidden["ingress_length"]
        return [f"{{ ss_u128 _cx = {self.value(index).src}; ss_counter_array *_c = &o->counters[{c}];",
                f"  {FAILED}",
                f"  if (_cx < _c->size) {{ _c->packets[(uint32_t)_cx]++; _c->bytes[(uint32_t)_cx] += S->s[{il}]; }} }}"]

    def p_execute_meter(self, meter, index, dst):
        m = self._index_of(self.meters, meter, "meter array")
        il = self.hidden["ingress_length"]
        return [f"{{ ss_u128 _mx = {self.value(index).src}; ss_meter_array *_m = &o->meters[{m}];",
                f"  {FAILED}",
                "  if (_mx < _m->size) " + self.lvalue(dst).store(
                    f"ss_meter_execute(&_m->m[(uint32_t)_mx], S->s[{il}])"),
                "}"]

    def p_register_read(self, dst, reg, index):
        r = self._index_of(self.registers, reg, "register array")
        return [f"{{ ss_u128 _rx = {self.value(index).src}; ss_register *_r = &o->registers[{r}];",
                "  if (_rx < _r->size) " + self.lvalue(dst).store("_r->v[(uint32_t)_rx]"),
                "}"]

    def p_register_write(self, reg, index, value):
        r = self._index_of(self.registers, reg, "register array")
        return [f"{{ ss_u128 _rx = {self.value(index).src}, _rv = {self.value(value).src};",
                f"  ss_register *_r = &o->registers[{r}]; {FAILED}",
                "  if (_rx < _r->size) _r->v[(uint32_t)_rx] = (uint64_t)_rv & _r->mask; }"]

    def _accumulate(self, dst, v, op):
        d = self.lvalue(dst)
        return [d.store(self._binary_value(op, self.read(d), self.value(v)))]

    def _binary(self, d, a, b, op):
        return [self.lvalue(d).store(self._binary_value(op, self.value(a), self.value(b)))]

    # -- calculations -------------------------------------------------------------------
    def calculation(self, name: str) -> str:
        """The C function computing calculation ``name`` for the packet (made once)."""
        fn = self.calc_fn.get(name)
        if fn is not None:
            return fn
        algo = self.algos.get(name)
        if algo not in ALGORITHM_IDS:
            raise Unsupported(f"hash algorithm '{algo}' (calculation '{name}')")
        spec = next(c for c in self.p.calculation_specs if c["name"] == name)
        fn = self.calc_fn[name] = self._ident("CALC")
        body = ["ss_bits b; b.nbits = 0; b.overflow = 0;"]
        for item in spec["input"]:
            t, v = item.get("type"), item.get("value")
            if t == "field":
                slot, info, hdr = self.lay.field_ref(v)
                if info is not None and info.width is None:        # at its current width, if valid
                    body.append(f"if (S->s[{hdr.base}]) ss_bits_put(&b, {self.slot(slot, info).target}, "
                                f"(uint32_t)S->s[{hdr.varbit_len_slot}]);")
                    continue
                width = 1 if info is None else info.width
                put = f"ss_bits_put(&b, (ss_u128){self.read(self.slot(slot, info)).src if info else f'S->s[{slot}]'}, {width});"
                body.append(put if hdr.metadata else f"if (S->s[{hdr.base}]) {put}")
            elif t == "hexstr":
                width = json_int(item["bitwidth"], "bitwidth of a constant", 0, MAX_WIDTH)
                body.append(f"ss_bits_put(&b, {_const(parse_hexstr(v) & ((1 << width) - 1)).src}, {width});")
            elif t == "header":
                hdr = self.lay.header(v)
                puts = [f"ss_bits_put(&b, (ss_u128){self.read(self.slot(hdr.base + 1 + f.index, f)).src}, "
                        f"{f.width if f.width is not None else f'(uint32_t)S->s[{hdr.varbit_len_slot}]'});"
                        for f in hdr.type.fields]
                body.append(f"if (S->s[{hdr.base}]) {{ {' '.join(puts)} }}")
            elif t == "payload":
                raise Unsupported(f"calculation '{name}' over the payload")
            else:
                raise ProgramError(f"calculation '{name}': unsupported input type '{t}'")
        body.append("if (b.nbits % 8) ss_bits_put(&b, 0, 8 - b.nbits % 8);")
        body.append("if (b.overflow) S->err = SS_ERR_TOO_LONG;      /* an input over 2 KiB: the packet fails */")
        body.append(f"return ss_hash({ALGORITHM_IDS[algo]}, b.buf, b.nbits / 8);")
        self.out.append(f"static uint64_t {fn}(ss_objects *o, ss_st *S) {{  /* calculation */")
        self.out += ["    " + ln for ln in body] + ["}", ""]
        return fn

    # -- actions ------------------------------------------------------------------------
    def actions(self) -> None:
        for a in self.js.get("actions", []):
            aid = json_int(a["id"], "action id")
            prims = a.get("primitives", [])
            if not prims:
                self.action_fn[aid] = None
                continue
            fn = self.action_fn[aid] = self._ident("A")
            fields = self.p.action_locals.get(aid, ())
            self.locals = {}
            decls = []
            for i, f in enumerate(fields):
                info = self.lay.action_locals[f]
                self.locals[f] = (f"lv{i}", info)
                decls.append(f"{'ss_i128' if info.signed else 'ss_u128'} lv{i} = 0;")
            body: list[str] = []
            try:
                if any(is_jump(p) for p in prims):
                    for i, pr in enumerate(prims):
                        body.append(f"J{i}:;")
                        if is_jump(pr):
                            params = pr["parameters"]
                            if pr["op"] == "_jump":
                                body.append(f"goto J{int(self.compile(params[0]).const)};")
                            else:
                                target = int(self.compile(params[1]).const)
                                body.append(f"if ({self.value(params[0]).src} == 0) goto J{target};")
                        else:
                            body += self.primitive(pr)
                    body.append(f"J{len(prims)}:;")
                else:
                    for pr in prims:
                        body += self.primitive(pr)
            finally:
                self.locals = {}
            self.out.append(f"static int {fn}(ss_objects *o, ss_st *S, const ss_u128 *D) {{  /* action {aid} */")
            self.out += ["    " + ln for ln in decls + body] + ["    return SS_OK;", "}", ""]

    def call_action(self, aid: int, data: str) -> list[str]:
        fn = self.action_fn.get(aid, "missing")
        if fn == "missing":
            raise ProgramError(f"unknown action id {aid}")
        if fn is None:
            return []
        return [f"if ((r = {fn}(o, S, {data})) != 0) goto out;"]

    # -- parser -------------------------------------------------------------------------
    def parser(self) -> None:
        parsers = self.js.get("parsers", [])
        if not parsers:
            raise ProgramError("the program has no parser")
        parser = next((p for p in parsers if p["name"] == "parser"), parsers[0])
        states = {s["name"]: s for s in parser.get("parse_states", [])}
        labels = {name: self._ident("PS") for name in states}

        def goto(name):
            if name is None:
                return "goto accept;"
            if name not in labels:
                raise ProgramError(f"parser refers to unknown state '{name}'")
            return f"goto {labels[name]};"

        perr = self.lay.intrinsic("standard_metadata.parser_error")
        lines = ["ss_st *S = (ss_st *)st;", "uint32_t off = 0; int err = 0; ss_u128 _k = 0, _v = 0; int32_t _b = 0;",
                 "(void)_k; (void)_v; (void)_b;", goto(parser.get("init_state"))]
        for name, s in states.items():
            lines.append(f"{labels[name]}:;")
            for op in s.get("parser_ops", []):
                lines += self._parser_op(op)
            lines += self._transition(s, goto)
        lines += ["accept:", "*consumed = off;", "return S->err;",
                  "fail:", f"S->s[{perr}] = (uint64_t)err;" if perr is not None else ";",
                  "*consumed = off;", "return S->err;"]
        self.out.append("int ss_parse(ss_objects *o, void *st, const uint8_t *pkt, uint32_t len, uint32_t *consumed) {")
        self.out += ["    " + ln for ln in lines] + ["}", ""]

    def _fail(self, code: str) -> str:
        return f"{{ err = {code}; goto fail; }}"

    def _too_short(self, n: str) -> str:
        return f"if (len - off < (uint32_t)({n})) {self._fail(str(self.errors['PacketTooShort']))}"

    def _parser_op(self, op: dict) -> list[str]:
        kind, params = op.get("op"), op.get("parameters", [])
        if kind == "extract":
            return self._extract(params[0])
        if kind == "extract_VL":
            return self._extract(params[0], self.value(params[1]).src)
        if kind == "set":
            dst, src = self.lvalue(params[0]), params[1]
            if src.get("type") == "lookahead":
                off, width = lookahead_args(src["value"])
                nbytes = (off + width + 7) // 8
                return [self._too_short(str(nbytes)),
                        f"_v = ss_peek(pkt, len, off, {off}, {width});", dst.store("_v")]
            return [dst.store(self.value(src))]
        if kind == "verify":
            return [f"if (!{self.boolean(params[0])}) {self._fail(f'(int){self.value(params[1]).src}')}"]
        if kind in ("shift", "advance"):
            amount = self.value(params[0]).src
            if kind == "shift":
                return [self._too_short(f"{amount}"), f"off += (uint32_t){amount};"]
            return [f"{{ ss_u128 _bits = {amount};",
                    f"  if (_bits % 8) {self._fail(str(self.errors['ParserInvalidArgument']))}",
                    f"  if ((ss_u128)(len - off) < _bits / 8) {self._fail(str(self.errors['PacketTooShort']))}",
                    "  off += (uint32_t)(_bits / 8); }"]
        if kind == "primitive":
            return self.primitive(params[0])
        raise ProgramError(f"unsupported parser operation '{kind}'")

    def _extract(self, target: dict, vl_bits: str | None = None) -> list[str]:
        t, v = target.get("type"), target.get("value")
        if t == "regular":
            hdr = self.lay.header(v)
            return self._extract_into(str(hdr.base), hdr.type, vl_bits) + self._set_valid(str(hdr.base))
        if t == "stack":
            st = self.lay.stack(v)
            bases = self.static("int32_t", [str(h.base) for h in st.headers])
            return [f"if (S->s[{st.next_slot}] >= {len(st.headers)}) {self._fail(str(self.errors['StackOutOfBounds']))}",
                    f"_b = {bases}[S->s[{st.next_slot}]];",
                    *self._extract_into("_b", st.headers[0].type, vl_bits),
                    "S->s[_b] = 1;", f"S->s[{st.next_slot}] += 1;"]
        raise Unsupported(f"extract into a '{t}'")

    def _extract_into(self, base: str, htype: HeaderType, vl_bits: str | None = None) -> list[str]:
        if htype.varbit is not None:
            if vl_bits is None:
                raise ProgramError(f"header type '{htype.name}' has a varbit field: extract_VL needed")
            return self._extract_varbit(base, htype, vl_bits)
        if htype.fixed_bits % 8:
            raise ProgramError(f"header type '{htype.name}' is not a whole number of bytes")
        nbytes = htype.fixed_bits // 8
        lines = [self._too_short(str(nbytes))]
        at = 0
        for c in header_codec.chunks(htype):
            n = c.bits // 8
            if n > 16:
                raise Unsupported(f"header type '{htype.name}': {n} bytes without a byte boundary between fields")
            narrow = n <= 8 and not any(_wide(f) for f in c.fields)
            load = f"ss_load_be64(pkt + off + {at}, {n})" if narrow else f"ss_load_be(pkt + off + {at}, {n})"
            shift = c.bits
            for f in c.fields:
                shift -= f.width
                val = f"(_x >> {shift})" if shift else "_x"
                lines.append("{ " + ("uint64_t" if narrow else "ss_u128") + " _x = " + load + "; "
                             + self.dyn_slot(base, 1 + f.index, f).store(val) + " }")
            at += n
        lines.append(f"off += {nbytes};")
        return lines

    def _extract_varbit(self, base: str, htype: HeaderType, vl_bits: str) -> list[str]:
        """codegen.extract_varbit: the varbit field ``vl_bits`` long, checked in its order."""
        max_bytes = htype.max_length or 0
        lines = [f"{{ ss_u128 _nb = {vl_bits};",
                 f"  if (_nb % 8) {self._fail(str(self.errors['ParserInvalidArgument']))}",
                 f"  ss_u128 _nbytes = {htype.fixed_bits // 8} + _nb / 8;",
                 f"  if ((ss_u128)(len - off) < _nbytes) {self._fail(str(self.errors['PacketTooShort']))}",
                 f"  if ({max_bytes} < _nbytes) {self._fail(str(self.errors['HeaderTooShort']))}",
                 "  uint32_t _pos = 0;"]
        for f in htype.fields:
            width = "(uint32_t)_nb" if f.width is None else str(f.width)
            lines.append("  " + self.dyn_slot(base, 1 + f.index, f).target
                         + f" = ({self.dyn_slot(base, 1 + f.index, f).cast})ss_get_bits(pkt + off, _pos, {width});"
                         + f" _pos += {width};")
        lines += [f"  {self.dyn_slot(base, len(htype.fields) + 1, FieldInfo('', 64, False, 0)).target} = (uint64_t)_nb;",
                  "  off += (uint32_t)_nbytes; }"]
        return lines

    def _transition(self, s: dict, goto) -> list[str]:
        transitions = s.get("transitions", [])
        default, cases = "goto accept;", []
        for t in transitions:
            if "type" not in t:
                t = dict(t, type="default" if t.get("value") == "default" else "hexstr")
            if t["type"] == "default":
                default = goto(t.get("next_state"))
            elif t["type"] == "hexstr":
                cases.append((t, goto(t.get("next_state"))))
            elif t["type"] == "parse_vset":
                if t["value"] not in self.value_sets:
                    raise ProgramError(f"unknown parse value set '{t['value']}'")
                cases.append((t, goto(t.get("next_state"))))
            else:
                raise ProgramError(f"unsupported transition type '{t['type']}'")
        if not cases:
            return [default]
        parts, total = [], 0
        for k in s.get("transition_key", []):
            src, width = self._key_part(k)
            parts.append((src, width))
            total += (width + 7) // 8 * 8
        if total > MAX_WIDTH:
            raise Unsupported(f"a transition key of {total} bits")
        key = parts[0][0]
        for src, width in parts[1:]:
            key = f"(ss_shl({key}, {(width + 7) // 8 * 8}) | {src})"
        lines = [f"_k = {key};"]
        for t, nxt in cases:
            if t["type"] == "parse_vset":
                vs = self.value_sets.index(t["value"])
                m = parse_hexstr(t["mask"]) if t.get("mask") else 0
                lines.append(f"if (ss_value_set_contains(&o->value_sets[{vs}], _k, {_const(m).src}, "
                             f"{int(bool(t.get('mask')))})) {nxt}")
                continue
            value = parse_hexstr(t["value"])
            if t.get("mask"):
                m = parse_hexstr(t["mask"])
                lines.append(f"if ((_k & {_const(m).src}) == {_const(value & m).src}) {nxt}")
            else:
                lines.append(f"if (_k == {_const(value).src}) {nxt}")
        return lines + [default]

    def _key_part(self, k: dict) -> tuple[str, int]:
        t, v = k.get("type"), k.get("value")
        if t == "field":
            slot, info, _ = self.lay.field_ref(v)
            width = 1 if info is None else info.width
            src = f"((ss_u128)S->s[{slot}])" if info is None else self.read(self.slot(slot, info)).src
            return f"((ss_u128){src} & {_mask(width)})", width
        if t == "stack_field":
            st = self.lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            src = self.read(self.dyn_slot(self._stack_last(st), 1 + info.index, info)).src
            return f"((ss_u128){src} & {_mask(info.width)})", info.width
        if t == "lookahead":
            off, width = lookahead_args(v)
            if width > MAX_WIDTH:
                raise Unsupported(f"a lookahead of {width} bits")
            return f"ss_peek(pkt, len, off, {off}, {width})", width
        if t == "expression":
            return f"((ss_u128){self.value(v).src} & {_mask(32)})", 32
        if t == "union_stack_field":
            raise Unsupported("union stacks")
        raise ProgramError(f"unsupported transition key type '{t}'")

    # -- deparser and checksums ---------------------------------------------------------
    def deparser(self) -> None:
        deparsers = self.js.get("deparsers", [])
        if not deparsers:
            raise ProgramError("the program has no deparser")
        dep = next((d for d in deparsers if d["name"] == "deparser"), deparsers[0])
        lines = ["const ss_st *S = (const ss_st *)st;", "uint32_t at = 0;"]
        for name in dep.get("order", []):
            hdr = self.lay.header(name)
            lines += self._emit_header(hdr)
        lines += ["*written = at;", "return SS_OK;"]
        self.out.append("int ss_deparse(ss_objects *o, const void *st, uint8_t *out, uint32_t cap, uint32_t *written) {")
        self.out += ["    " + ln for ln in lines] + ["}", ""]

    def _emit_header(self, hdr: HeaderInstance) -> list[str]:
        t = hdr.type
        if t.varbit is not None:              # codegen.pack_header: the varbit at its current width
            body = [f"uint32_t _vw = (uint32_t)S->s[{hdr.varbit_len_slot}], _n = ({t.fixed_bits} + _vw) / 8, _pos = 0;",
                    "if (cap - at < _n) return SS_ERR_TOO_LONG;", "memset(out + at, 0, _n);"]
            for f in t.fields:
                width = "_vw" if f.width is None else str(f.width)
                body.append(f"ss_put_bits(out + at, _pos, (ss_u128){self.slot(hdr.base + 1 + f.index, f).target}, "
                            f"{width}); _pos += {width};")
            body.append("at += _n;")
            return [f"if (S->s[{hdr.base}]) {{"] + ["    " + b for b in body] + ["}"]
        n = t.fixed_bits // 8
        body = [f"if (cap - at < {n}) return SS_ERR_TOO_LONG;"]
        at = 0
        for c in header_codec.chunks(t):
            size = c.bits // 8
            if size > 16:
                raise Unsupported(f"header type '{t.name}': {size} bytes without a byte boundary between fields")
            terms, shift = [], c.bits
            narrow = size <= 8 and not any(_wide(f) for f in c.fields)    # 64-bit arithmetic will do
            for f in c.fields:
                shift -= f.width
                src = self.slot(hdr.base + 1 + f.index, f).target
                if narrow:
                    terms.append(f"(({src} & {(1 << f.width) - 1:#x}ull) << {shift})")
                else:
                    terms.append(f"(((ss_u128){src} & {_mask(f.width)}) << {shift})")
            body.append(f"ss_store_be(out + at + {at}, {size}, {' | '.join(terms)});")
            at += size
        body.append(f"at += {n};")
        return [f"if (S->s[{hdr.base}]) {{"] + ["    " + b for b in body] + ["}"]

    def checksums(self) -> None:
        verify, update = [], []
        for ck in self.js.get("checksums", []):
            if ck.get("type", "generic") != "generic":
                raise Unsupported(f"checksum type '{ck.get('type')}'")
            slot, info, hdr = self.lay.field_ref(ck["target"])
            cond = self.boolean(ck["if_cond"]) if ck.get("if_cond") else "1"
            calc = self.calculation(ck["calculation"])
            lv = self.slot(slot, info)
            if ck.get("verify", True):
                verify.append(f"if (S->s[{hdr.base}] && {cond} && (ss_u128){calc}(o, S) != {self.read(lv).src}) *ok = 0;")
            if ck.get("update", True):
                update.append(f"if ({cond}) {lv.store(f'{calc}(o, S)')}")
        self.out += ["int ss_verify_checksums(ss_objects *o, void *st, int *ok) {",
                     "    ss_st *S = (ss_st *)st;", "    *ok = 1;", *("    " + ln for ln in verify),
                     "    return S->err;", "}", "",
                     "int ss_update_checksums(ss_objects *o, void *st) {",
                     "    ss_st *S = (ss_st *)st;", *("    " + ln for ln in update), "    return S->err;", "}", ""]

    # -- controls -----------------------------------------------------------------------
    def pipeline(self, pipe: dict) -> str:
        labels: dict[str, str] = {}
        blocks: dict[str, Block] = {}
        for t in pipe.get("tables", []):
            blocks[t["name"]] = self._table_block(t)
        for c in pipe.get("conditionals", []):
            blocks[c["name"]] = Block([], [c.get("true_next"), c.get("false_next")], cond=self.boolean(c["expression"]))
        for a in pipe.get("action_calls", []):
            blocks[a["name"]] = Block(self.call_action(json_int(a["action_id"], "action id"), "NODATA"),
                                      [a.get("next_node")])
        for name in blocks:
            labels[name] = self._ident("N")
        for b in blocks.values():
            for s in b.succs:
                if s is not None and s not in blocks:
                    raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{s}'")
        init = pipe.get("init_table")
        if init is not None and init not in blocks:
            raise ProgramError(f"pipeline '{pipe['name']}' refers to unknown node '{init}'")

        def label(n):
            return "out" if n is None else labels[n]

        syntax = CSyntax(label)
        body = None
        ipdom = post_dominators(init, blocks)
        if ipdom is not None:
            body = Structurer(blocks, ipdom, syntax.fallback, budget=4 * len(blocks) + 64, syntax=syntax).emit(init)
        lines = ["ss_entry *e = NULL; int a = -1, r = 0, _i = 0; (void)e; (void)a; (void)_i;"]
        if body is not None:
            lines += body + ["goto out;"]
        else:
            syntax.used_fallback = True
            lines.append(f"goto {label(init)};")
        if syntax.used_fallback:          # the control as a graph of labelled nodes
            for name, b in blocks.items():
                lines.append(f"{labels[name]}:;")
                lines += b.lines
                if b.cond is not None:
                    lines.append(f"if ({b.cond}) goto {label(b.succs[0])}; else goto {label(b.succs[1])};")
                elif b.selector is not None:
                    lines.append(f"_i = {b.selector};")
                    for vs, s in zip(b.cases, b.succs):
                        lines.append(f"if ({' || '.join(f'_i == {v}' for v in vs)}) goto {label(s)};")
                    lines.append(f"goto {label(b.succs[-1])};")
                else:
                    lines.append(f"goto {label(b.succs[0])};")
        lines += ["out:", f"if (r == {SS_EXIT}) r = SS_OK;", "if (!r) r = S->err;", "return r;"]
        fn = self._ident("PIPE")
        self.out.append(f"static int {fn}(ss_objects *o, ss_st *S) {{")
        self.out += ["    " + ln for ln in lines] + ["}", ""]
        return fn

    def _run_table_action(self, tix: int, t: dict) -> str:
        """A function running table ``tix``'s action ``a`` with data ``D``: its id picks it."""
        fn = self._ident("RUN")
        lines = [f"static int {fn}(ss_objects *o, ss_st *S, int a, const ss_u128 *D) {{", "    switch (a) {"]
        for aid in sorted({json_int(x, "action id") for x in t.get("action_ids", [])}):
            target = self.action_fn.get(aid)
            if target:
                lines.append(f"    case {aid}: return {target}(o, S, D);")
        lines += ["    default: return SS_OK;", "    }", "}", ""]
        self.out += lines
        return fn

    def _table_block(self, t: dict) -> Block:
        table = self.p.tables[t["name"]]
        tix = self.tables.index(t["name"])
        next_tables = t.get("next_tables", {})
        hit_miss = "__HIT__" in next_tables or "__MISS__" in next_tables
        default_next = t.get("base_default_next")
        action_next: dict[int, str | None] = {}
        for aid, aname in zip(t.get("action_ids", []), t.get("actions", [])):
            action_next[json_int(aid, "action id")] = next_tables.get(aname, default_next)
        run = self._run_table_action(tix, t)
        tb = f"o->tables[{tix}]"
        miss = [f"a = {tb}.default_action;",
                f"if (a >= 0 && (r = {run}(o, S, a, {tb}.default_data)) != 0) goto out;"]
        keys = t.get("key", [])
        if not keys:
            a = table.default_action
            if table.default_const and a is not None:
                data = self.static("ss_u128", [_const(d & ((1 << 128) - 1)).src for d in table.default_data])
                nxt = next_tables.get("__MISS__") if hit_miss else action_next.get(a.id, default_next)
                return Block([f"a = {a.id};", *self.call_action(a.id, data)], [nxt])
            if hit_miss:
                return Block(miss, [next_tables.get("__MISS__")])
            return by_action(miss, action_next, default_next, "a")
        parts = [self._key_source(k) for k in keys]
        lines = [f"{{ ss_u128 _key[{len(parts)}] = {{{', '.join(parts)}}};",
                 f"  e = ss_table_lookup(&{tb}, _key); }}",
                 "if (!e) {", *["    " + ln for ln in miss], "} else {"]
        il = self.hidden["ingress_length"]
        hit = []
        if t.get("with_counters"):
            hit += ["e->packets += 1;", f"e->bytes += S->s[{il}];"]
        if t.get("direct_meters"):
            meter = self.p.meters[t["direct_meters"]]
            target = self.lvalue({"type": "field", "value": meter.result_target})
            hit.append(target.store(f"ss_meter_execute(&e->meter, S->s[{il}])"))
        if t.get("type", "simple") == "simple":
            hit += ["a = e->action;", f"if ((r = {run}(o, S, a, e->data)) != 0) goto out;"]
        else:
            profile = table.profile
            pix = self.profiles.index(profile.name)
            pick = "0"
            if profile.selector is not None:
                pick = f"(e->group >= 0 ? (uint32_t){self.calculation(profile.selector.name)}(o, S) : 0)"
            hit += [f"{{ int _found; ss_member *_m = ss_profile_member(&o->profiles[{pix}], e, {pick}, &_found);",
                    "  if (!_m) a = -1;",
                    f"  else {{ a = _m->action; if ((r = {run}(o, S, a, _m->data)) != 0) goto out; }} }}"]
        lines += ["    " + ln for ln in hit] + ["}"]
        if hit_miss:
            return Block(lines, [next_tables.get("__HIT__"), next_tables.get("__MISS__")], cond="e != NULL")
        return by_action(lines, action_next, default_next, "a")

    def _key_source(self, k: dict) -> str:
        mt, target = k.get("match_type"), k.get("target")
        if mt == "valid":
            return f"(ss_u128)S->s[{self.lay.header(target).base}]"
        slot, info, _ = self.lay.field_ref(target)
        if info is None:
            src = f"(ss_u128)S->s[{slot}]"
        else:
            src = f"((ss_u128){self.read(self.slot(slot, info)).src} & {_mask(info.width)})"
        if k.get("mask"):
            src = f"({src} & {_const(parse_hexstr(k['mask'])).src})"
        return src

    # -- the whole file -----------------------------------------------------------------
    def generate(self) -> Native:
        self.actions()
        self.parser()
        self.checksums()
        self.deparser()
        pipes = {pipe["name"]: self.pipeline(pipe) for pipe in self.js.get("pipelines", [])}
        body = self.out
        self.out = []
        head = self._prelude()
        statics = list(self.statics)
        self._statics_done = len(statics)       # the rest: those the functions below add
        tail = self._program_functions(pipes)
        source = "\n".join(head + statics + [""] + body + tail) + "\n"
        return Native(source, self.tables, self.profiles, self.registers, self.counters, self.meters,
                      self.value_sets, dict(self.wide))

    def _prelude(self) -> list[str]:
        size = self.lay.size
        wide_of = ["-1"] * size
        for s, i in self.wide.items():
            wide_of[s] = str(i)
        template = [str(v) if isinstance(v, int) else "0" for v in self.lay.template]
        return ["/* generated by softswitch/native/codegen.py: do not edit */",
                '#include "objects.h"', '#include "pipeline_support.h"', "",
                f"#define NSLOTS {size}", f"#define NWIDE {max(1, len(self.wide))}",
                "typedef struct ss_st { uint64_t s[NSLOTS]; ss_u128 w[NWIDE]; int err; } ss_st;",
                f"static const int16_t WIDE_OF[NSLOTS] = {{{', '.join(wide_of)}}};",
                f"static const uint64_t TEMPLATE[NSLOTS] = {{{', '.join(template)}}};",
                "static const ss_u128 NODATA[1] = {0};",
                '#include "pipeline_helpers.h"', ""]

    def _program_functions(self, pipes: dict[str, str]) -> list[str]:
        meta_slots, meta_masks = [], []
        for m in META:
            if m.startswith("@"):
                slot = self.hidden[m[1:]]
                mask = (1 << 64) - 1
            else:
                from ..pipeline.program import INTRINSICS
                slot = self.lay.intrinsic(INTRINSICS[m])
                mask = self.lay.intrinsic_mask(INTRINSICS[m]) if slot is not None else 0
                if slot is not None and slot in self.wide:
                    raise Unsupported(f"intrinsic '{m}' wider than 64 bits")
            meta_slots.append("-1" if slot is None else str(slot))
            meta_masks.append(f"{min(mask, (1 << 64) - 1):#x}ull")
        lines = [f"static const int32_t META_SLOT[SS_META_COUNT] = {{{', '.join(meta_slots)}}};",
                 f"static const uint64_t META_MASK[SS_META_COUNT] = {{{', '.join(meta_masks)}}};",
                 "size_t ss_state_size(void) { return sizeof(ss_st); }",
                 "void ss_state_init(void *st) { ss_st *S = st; memcpy(S->s, TEMPLATE, sizeof TEMPLATE); "
                 "memset(S->w, 0, sizeof S->w); S->err = 0; }",
                 "int ss_has(int m) { return m >= 0 && m < SS_META_COUNT && META_SLOT[m] >= 0; }",
                 "uint64_t ss_get(const void *st, int m) { return ss_has(m) ? ((const ss_st *)st)->s[META_SLOT[m]] : 0; }",
                 "void ss_set(void *st, int m, uint64_t v) { if (ss_has(m)) ((ss_st *)st)->s[META_SLOT[m]] = v; }",
                 "uint64_t ss_meta_mask(int m) { return ss_has(m) ? META_MASK[m] : 0; }"]
        for name in ("ingress", "egress"):
            fn = pipes.get(name)
            call = f"return {fn}(o, (ss_st *)st);" if fn else "return ((ss_st *)st)->err;"
            lines.append(f"int ss_{name}(ss_objects *o, void *st) {{ {call} }}")
        meta = self.lay.metadata_slots
        lines += ["void ss_clear_metadata(void *st) {", "    ss_st *S = st;"]
        lines += [f"    {self.slot(s, None).target} = 0;" if s not in self.wide else f"    S->w[{self.wide[s]}] = 0;"
                  for s in meta]
        lines += ["}"]
        lines += ["void ss_copy_field_list(int id, const void *src, void *dst) {",
                  "    const ss_st *A = src; ss_st *B = dst;", "    switch (id) {"]
        for fl_id, slots in self.p.field_lists.items():
            copies = []
            for s in slots:
                if s in self.wide:
                    copies.append(f"B->w[{self.wide[s]}] = A->w[{self.wide[s]}];")
                else:
                    copies.append(f"B->s[{s}] = A->s[{s}];")
            lines.append(f"    case {json_int(fl_id, 'field list id')}: {' '.join(copies)} break;")
        lines += ["    default: break;", "    }", "}", ""]
        lines += self._objects_new()
        lines += ["/* tests and the Python side: a slot's raw bits (signed: sign-extended), 128 bits as two words */",
                  "int ss_slot_count(void) { return NSLOTS; }",
                  "void ss_slot_read(const void *st, int slot, uint64_t *pair) {",
                  "    const ss_st *S = st; ss_u128 v = WIDE_OF[slot] >= 0 ? S->w[WIDE_OF[slot]] : (ss_u128)S->s[slot];",
                  "    pair[0] = (uint64_t)v; pair[1] = (uint64_t)(v >> 64); }",
                  "void ss_slot_write(void *st, int slot, const uint64_t *pair) {",
                  "    ss_st *S = st; if (WIDE_OF[slot] >= 0) S->w[WIDE_OF[slot]] = ((ss_u128)pair[1] << 64) | pair[0];",
                  "    else S->s[slot] = pair[0]; }",
                  "int ss_state_error(const void *st) { return ((const ss_st *)st)->err; }", ""]
        return lines

    def _objects_new(self) -> list[str]:
        lines = []
        inits = []
        for i, name in enumerate(self.tables):
            t = self.p.tables[name]
            kinds = self.static("uint8_t", [str(_KIND[k.match_type]) for k in t.key])
            widths = self.static("uint16_t", [str(k.width) for k in t.key])
            for k in t.key:
                if k.width > MAX_WIDTH:
                    raise Unsupported(f"table '{name}': a key field of {k.width} bits")
            kind = _KIND.get(t.kind, 2)
            if kind == _KIND["lpm"] and t._lpm_index is None:
                kind = 2
            by_bytes = int(t.meter_array.by_bytes) if t.meter_array is not None else 0
            inits.append(f"{{ ss_table_desc d = {{{len(t.key)}, {kinds}, {widths}, {kind}, {t._lpm_index or 0}, "
                         f"{t.max_size}u, {by_bytes}}}; ss_table_init(&o->tables[{i}], &d); }}")
        for i, name in enumerate(self.registers):
            r = self.p.registers[name]
            inits.append(f"ss_register_init(&o->registers[{i}], {r.size}u, {r.bitwidth}u);")
        for i, name in enumerate(self.counters):
            inits.append(f"ss_counters_init(&o->counters[{i}], {self.p.counters[name].size}u);")
        for i, name in enumerate(self.meters):
            m = self.p.meters[name]
            inits.append(f"ss_meters_init(&o->meters[{i}], {m.size}u, {int(m.by_bytes)});")
        lines.append("ss_objects *ss_objects_new(void) {")
        lines.append(f"    ss_objects *o = ss_objects_alloc({len(self.tables)}, {len(self.profiles)}, "
                     f"{len(self.registers)}, {len(self.counters)}, {len(self.meters)}, {len(self.value_sets)});")
        lines += ["    " + ln for ln in inits] + ["    return o;", "}", ""]
        # the statics these need were added after the prelude was planned: emit them here
        return [*self.statics_tail(), *lines]

    def statics_tail(self) -> list[str]:
        done = getattr(self, "_statics_done", 0)
        self._statics_done = len(self.statics)
        return self.statics[done:]


_KIND = {"exact": 0, "lpm": 1, "ternary": 2, "range": 3, "optional": 4, "valid": 5}


def generate(program: Program) -> Native:
    """The program's C (Unsupported names what the native path cannot do yet)."""
    if not program.fuse:
        raise Unsupported("a program loaded unfused (the reference node loop)")
    try:
        return CGenerator(program).generate()
    except Unsupported:
        raise
    except (ProgramError, KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # the Program loaded, so the Python path runs it: say what the generator tripped on
        raise Unsupported(f"the native generator failed on it ({type(e).__name__}: {e})") from e
