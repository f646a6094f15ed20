"""BMv2 JSON expressions → Python source.

An expression compiles to a string of Python that reads the packet state ``F`` (and, inside
actions, the action data tuple ``D``), plus the kind of value it yields:

    data    an int; arithmetic has infinite precision, as BMv2's; the JSON itself carries the
            masks p4c inserts, and assignment to a field truncates to the field's width
    bool    a Python bool
    header  an int: the base slot of a header (so stack elements resolve at run time)
    union   a tuple of header base slots
    stack / union_stack   the layout object itself (only as operands of other ops)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .action_locals import LOCALS_INSTANCE
from .errors import ProgramError
from .layout import Layout
from .untrusted import json_int

DATA, BOOL, HEADER, UNION, STACK, USTACK = "data", "bool", "header", "union", "stack", "union_stack"

# Each level of an expression nests parentheses in the generated source, and Python's parser
# stops at 200 of them; p4c's deepest in our programs is about 20.
MAX_EXPRESSION_DEPTH = 64


# Header instances whose fields the target itself writes from outside the program (ports,
# lengths, timestamps, replica ids...): a value read from them may be wider than the field,
# so it keeps every mask. Every other field's slot holds a value that fits its width
# (extracted, or stored through a mask).
TARGET_WRITTEN_HEADERS = frozenset({"standard_metadata", "intrinsic_metadata", "queueing_metadata"})


@dataclass(frozen=True)
class Compiled:
    src: str
    kind: str
    const: Any = None          # layout object for stack/union_stack kinds, or a constant int
    # DATA: the value is known to be >= 0 and below 2**bits (None: not known). A mask that
    # keeps all of those bits changes nothing, and the generated code leaves it out.
    bits: int | None = None


def parse_hexstr(value: str) -> int:
    try:
        return int(value, 16)
    except (TypeError, ValueError):
        raise ProgramError(f"bad hexstr {value!r}") from None


def two_comp_mod(value: int, width: int) -> int:
    """BMv2's two_comp_mod: the signed value of ``value`` in ``width``-bit two's complement."""
    mask = (1 << width) - 1
    v = value & mask
    return v - (1 << width) if v >> (width - 1) else v


def usat_cast(value: int, width: int) -> int:
    top = (1 << width) - 1
    return top if value > top else 0 if value < 0 else value


def sat_cast(value: int, width: int) -> int:
    top = (1 << (width - 1)) - 1
    low = -(1 << (width - 1))
    return top if value > top else low if value < low else value


# Helpers the generated code calls; bound into every generated module's namespace.
RUNTIME_HELPERS: dict[str, Callable] = {
    "_tcm": two_comp_mod,
    "_usat": usat_cast,
    "_sat": sat_cast,
}

# operators fitting their left operand into the width their right gives (wrapped in two's complement,
# saturated unsigned, saturated signed), by the helper that does it
WIDTH_CASTS = {"two_comp_mod": "_tcm", "usat_cast": "_usat", "sat_cast": "_sat"}

_BINARY_DATA = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|",
                "^": "^", "/": "//", "%": "%"}
_COMPARE = {"==": "==", "!=": "!=", ">": ">", "<": "<", ">=": ">=", "<=": "<="}


class ExpressionCompiler:
    """Compiles expressions for one program; ``bind`` puts a Python object into the generated
    module's namespace and returns the name the source can use for it."""

    def __init__(self, layout: Layout, bind: Callable[[Any], str], registers: dict[str, Any]):
        self.layout = layout
        self.bind = bind
        self.registers = registers
        self._depth = 0
        # while an action compiles: its LOCALS_INSTANCE fields kept in locals -> variable name
        self.locals: dict[str, str] = {}

    def local(self, ref: Any) -> str | None:
        """The local variable a ``[header, field]`` reference is kept in, if it is one."""
        if self.locals and isinstance(ref, list) and len(ref) == 2 and ref[0] == LOCALS_INSTANCE:
            return self.locals.get(ref[1])
        return None

    # -- public --------------------------------------------------------------------------
    def data(self, node: dict) -> str:
        return self.value(node).src

    def value(self, node: dict) -> Compiled:
        """``node`` as a DATA value (a condition becomes 1 or 0), with what is known of its bits."""
        c = self.compile(node)
        if c.kind == BOOL:
            if c.src in ("True", "False"):
                return Compiled("1" if c.src == "True" else "0", DATA, int(c.src == "True"), 1)
            return Compiled(f"(1 if {c.src} else 0)", DATA, bits=1)
        if c.kind != DATA:
            raise ProgramError(f"expected a value, got a {c.kind}: {node!r}")
        return c

    def boolean(self, node: dict) -> str:
        c = self.compile(node)
        if c.kind == DATA:
            return f"({c.src} != 0)"
        if c.kind != BOOL:
            raise ProgramError(f"expected a condition, got a {c.kind}: {node!r}")
        return c.src

    def header(self, node: dict) -> str:
        c = self.compile(node)
        if c.kind != HEADER:
            raise ProgramError(f"expected a header, got a {c.kind}: {node!r}")
        return c.src

    def compile(self, node: Any) -> Compiled:
        if self._depth >= MAX_EXPRESSION_DEPTH:
            raise ProgramError(f"an expression is nested deeper than {MAX_EXPRESSION_DEPTH} levels")
        self._depth += 1
        try:
            return self._compile(node)
        finally:
            self._depth -= 1

    def _compile(self, node: Any) -> Compiled:
        if not isinstance(node, dict) or "type" not in node:
            raise ProgramError(f"bad expression node {node!r}")
        t, v = node["type"], node.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" not in v and "type" in v:
                return self.compile(v)     # primitive arguments wrap operands (even fields) once more
            return self._op(v)
        if t == "field":
            local = self.local(v)
            if local is not None:         # set to 0 first, then stored through a mask
                info = self.layout.action_locals[v[1]]
                return Compiled(local, DATA, bits=None if info.signed else info.width)
            slot, info, hdr = self.layout.field_ref(v)
            trusted = info is not None and not info.signed and hdr.name not in TARGET_WRITTEN_HEADERS
            return Compiled(f"F[{slot}]", DATA, bits=info.width if trusted else None)
        if t == "hexstr":
            n = parse_hexstr(v)
            return Compiled(str(n), DATA, n, n.bit_length() if n >= 0 else None)
        if t == "bool":
            return Compiled("True" if v else "False", BOOL)
        if t in ("local", "runtime_data"):
            return Compiled(f"D[{json_int(v, f'{t} index', 0)}]", DATA)
        if t == "header":
            return Compiled(str(self.layout.header(v).base), HEADER)
        if t == "header_stack":
            return Compiled("", STACK, self.layout.stack(v))
        if t == "header_union":
            u = self.layout.union(v)
            return Compiled(repr(tuple(h.base for h in u.headers)), UNION, u)
        if t == "header_union_stack":
            return Compiled("", USTACK, self.layout.union_stack(v))
        if t == "stack_field":
            return Compiled(self._stack_last_field(v[0], v[1]), DATA)
        if t == "register":
            reg = self._register(v[0])
            return Compiled(f"{self.bind(reg)}.read({self.data(v[1])})", DATA)
        raise ProgramError(f"unsupported expression operand type '{t}'")

    # -- helpers -------------------------------------------------------------------------
    def _register(self, name: str):
        try:
            return self.registers[name]
        except KeyError:
            raise ProgramError(f"unknown register array '{name}'") from None

    def _stack_last_field(self, stack_name: str, field_name: str) -> str:
        """Field of the last valid element of a stack (``next - 1``)."""
        st = self.layout.stack(stack_name)
        bases = tuple(h.base for h in st.headers)
        off = 1 + st.headers[0].type.field(field_name).index
        return f"F[{self.bind(bases)}[F[{st.next_slot}] - 1] + {off}]"

    def _op(self, e: dict) -> Compiled:
        if not isinstance(e, dict) or "op" not in e:
            raise ProgramError(f"bad expression {e!r}")
        op, left, right = e["op"], e.get("left"), e.get("right")

        if op in _BINARY_DATA and left is not None:
            return _binary(op, self.value(left), self.value(right))
        if op == "-" and left is None:
            return Compiled(f"(-{self.data(right)})", DATA)
        if op in _COMPARE:
            return self._compare(op, left, right)
        if op in ("and", "or"):
            return Compiled(f"({self.boolean(left)} {op} {self.boolean(right)})", BOOL)
        if op == "not":
            return Compiled(f"(not {self.boolean(right)})", BOOL)
        if op == "~":
            return Compiled(f"(~{self.data(right)})", DATA)
        if op == "valid":
            r = self.compile(right)
            if r.kind == UNION:
                return Compiled(f"any(F[b] for b in {r.src})", BOOL)
            return Compiled(f"(F[{self.header(right)}] == 1)", BOOL)
        if op == "valid_union":
            r = self.compile(right)
            return Compiled(f"any(F[b] for b in {r.src})", BOOL)
        if op == "d2b":
            return Compiled(f"({self.data(right)} != 0)", BOOL)
        if op == "b2d":
            return self.value(right) if self.compile(right).kind == BOOL else \
                Compiled(f"(1 if {self.boolean(right)} else 0)", DATA, bits=1)
        if op in WIDTH_CASTS:
            return Compiled(f"{WIDTH_CASTS[op]}({self.data(left)}, {self.data(right)})", DATA)
        if op == "?":
            cond = self.boolean(e["cond"])
            lc, rc = self.compile(left), self.compile(right)
            kind = lc.kind if lc.kind == rc.kind else DATA
            if kind == DATA:
                lc, rc = self.value(left), self.value(right)
                bits = max(lc.bits, rc.bits) if lc.bits is not None and rc.bits is not None else None
                return Compiled(f"({lc.src} if {cond} else {rc.src})", DATA, bits=bits)
            return Compiled(f"({lc.src} if {cond} else {rc.src})", kind)
        if op in ("dereference_header_stack", "dereference_stack"):
            st = self.compile(left).const
            bases = tuple(h.base for h in st.headers)
            idx = self.compile(right)
            if idx.const is not None:
                return Compiled(str(bases[idx.const]), HEADER)
            return Compiled(f"{self.bind(bases)}[{idx.src}]", HEADER)
        if op == "dereference_union_stack":
            ust = self.compile(left).const
            members = tuple(tuple(h.base for h in u.headers) for u in ust.unions)
            return Compiled(f"{self.bind(members)}[{self.data(right)}]", UNION)
        if op == "access_field":
            base = self.header(left)
            return Compiled(f"F[{_add(base, 1 + json_int(right, 'access_field index', 0))}]", DATA)
        if op == "access_union_header":
            u = self.compile(left)
            return Compiled(f"{u.src}[{json_int(right, 'access_union_header index', 0)}]", HEADER)
        if op == "last_stack_index":
            return Compiled(f"(F[{self._any_stack(right).next_slot}] - 1)", DATA)
        if op == "size_stack":
            return Compiled(f"F[{self._any_stack(right).next_slot}]", DATA)
        raise ProgramError(f"unsupported expression operator '{op}'")

    def _any_stack(self, node: dict):
        c = self.compile(node)
        if c.kind not in (STACK, USTACK):
            raise ProgramError(f"expected a header stack, got {node!r}")
        return c.const

    def _compare(self, op: str, left: dict, right: dict) -> Compiled:
        lc, rc = self.compile(left), self.compile(right)
        if lc.kind == HEADER and rc.kind == HEADER:
            eq = f"_hdr_eq(F, {lc.src}, {rc.src}, {self._header_width(left)})"
            return Compiled(eq if op == "==" else f"(not {eq})", BOOL)
        if lc.kind == BOOL or rc.kind == BOOL:
            return Compiled(f"({self.boolean(left)} {_COMPARE[op]} {self.boolean(right)})", BOOL)
        return Compiled(f"({lc.src} {_COMPARE[op]} {rc.src})", BOOL)

    def _header_width(self, node: dict) -> int:
        """Number of slots to compare for header equality (valid bit and fields)."""
        if node.get("type") == "header":
            return self.layout.header(node["value"]).type.slots
        # stack element: all elements share the stack's type
        v = node.get("value", {})
        st = self.compile(v.get("left")).const
        return st.headers[0].type.slots


def _binary(op: str, a: Compiled, b: Compiled) -> Compiled:
    """``a op b``, with a bound on its bits where one follows from the operands'; ``x & m``
    with ``m`` all ones over at least x's bits is x itself (p4c masks every cast and sum)."""
    x, y = a.bits, b.bits
    if op == "&":
        for v, m in ((a, b), (b, a)):
            all_ones = m.const is not None and m.const >= 0 and m.const & (m.const + 1) == 0
            if all_ones and v.bits is not None and m.const.bit_length() >= v.bits:
                return v
        known = [n for n in (x, y) if n is not None]      # one side >= 0 bounds the result
        return Compiled(f"({a.src} & {b.src})", DATA, bits=min(known) if known else None)
    bits = None
    if x is not None and y is not None:
        if op in ("|", "^"):
            bits = max(x, y)
        elif op == "+":
            bits = max(x, y) + 1
        elif op == "*":
            bits = x + y
        elif op == ">>":
            bits = x
        elif op == "<<" and b.const is not None:
            bits = x + b.const
    return Compiled(f"({a.src} {_BINARY_DATA[op]} {b.src})", DATA, bits=bits)


def _add(base_src: str, offset: int) -> str:
    """``base + offset`` folded when the base is a constant."""
    if base_src.isdigit():
        return str(int(base_src) + offset)
    return f"{base_src} + {offset}"


def header_equal(F: list, a: int, b: int, slots: int) -> bool:
    """BMv2 header comparison: both invalid, or both valid with equal fields."""
    if F[a] != F[b]:
        return False
    if not F[a]:
        return True
    return F[a:a + slots] == F[b:b + slots]


RUNTIME_HELPERS["_hdr_eq"] = header_equal
