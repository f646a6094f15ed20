"""Expressions in C: every value 128 bits, unsigned (ss_u128) unless an operand is signed
(ss_i128); conditions as C ints; a header as its base slot (a C int, constant or computed);
and the lvalues a primitive or a parser operation writes."""
from __future__ import annotations

from typing import Any

from ...pipeline.errors import ProgramError
from ...pipeline.expressions import parse_hexstr
from ...pipeline.layout import FieldInfo, HeaderType
from ...pipeline.primitives import header_type_of
from ...pipeline.untrusted import json_int
from .context import Context, Lvalue, Unsupported, V, const


class Expressions:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        # while an action is written: its temporaries (action_locals.py) -> (C local, FieldInfo)
        self.locals: dict[str, tuple[str, FieldInfo]] = {}

    # -- operands -----------------------------------------------------------------------
    def field_lvalue(self, ref) -> Lvalue:
        if isinstance(ref, list) and len(ref) == 2 and ref[0] in ("scalars",) and self.locals.get(ref[1]):
            name, info = self.locals[ref[1]]
            return Lvalue(name, info, "ss_i128" if info.signed else "ss_u128")
        slot, info, _ = self.ctx.lay.field_ref(ref)
        return self.ctx.slot(slot, info)

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
            return self.ctx.dyn_slot(base, 1 + info.index, info)
        if t == "stack_field":
            st = self.ctx.lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return self.ctx.dyn_slot(self.stack_last(st), 1 + info.index, info)
        raise ProgramError(f"cannot assign to a '{t}'")

    def field_slots(self, base: str, htype: HeaderType) -> list[Lvalue]:
        """Every slot of a header after its valid bit: its fields, and a varbit's width."""
        out = [self.ctx.dyn_slot(base, 1 + f.index, f) for f in htype.fields]
        if htype.varbit is not None:
            out.append(self.ctx.dyn_slot(base, 1 + len(htype.fields), FieldInfo("", 64, False, 0)))
        return out

    def stack_index(self, st, idx: str) -> str:
        bases = self.ctx.static("int32_t", [str(h.base) for h in st.headers])
        return f"ss_index(S, {bases}, {len(st.headers)}, {idx})"

    def stack_last(self, st) -> str:
        return self.stack_index(st, f"((ss_i128)S->s[{st.next_slot}] - 1)")

    def header_type_of(self, node: dict) -> HeaderType:
        return header_type_of(self.ctx.lay, node, lambda n: self.compile(n).const, self.union)

    def union(self, node):
        c = self.compile(node)
        if c.kind != "union":
            raise ProgramError(f"expected a header union, got {node!r}")
        return c.const

    # -- expressions by what they must be ----------------------------------------------
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
        lay = self.ctx.lay
        t, v = node["type"], node.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" not in v and "type" in v:
                return self.compile(v)
            return self._op(v)
        if t == "field":
            if isinstance(v, list) and len(v) == 2 and v[1] == "$valid$":
                return V(f"((ss_u128)S->s[{lay.header(v[0]).base}])")
            return self.field_lvalue(v).read()
        if t == "hexstr":
            return const(parse_hexstr(v))
        if t == "bool":
            return V("1" if v else "0", "bool")
        if t in ("local", "runtime_data"):
            return V(f"D[{json_int(v, f'{t} index', 0)}]")
        if t == "header":
            return V(str(lay.header(v).base), "header")
        if t == "header_stack":
            return V("", "stack", const=lay.stack(v))
        if t == "stack_field":
            st = lay.stack(v[0])
            info = st.headers[0].type.field(v[1])
            return self.ctx.dyn_slot(self.stack_last(st), 1 + info.index, info).read()
        if t == "header_union":
            return V("", "union", const=lay.union(v))
        if t == "header_union_stack":
            raise Unsupported("header union stacks")
        if t == "register":
            raise Unsupported("a register read inside an expression")
        raise ProgramError(f"unsupported expression operand type '{t}'")

    def _op(self, e: dict) -> V:
        if not isinstance(e, dict) or "op" not in e:
            raise ProgramError(f"bad expression {e!r}")
        op, left, right = e["op"], e.get("left"), e.get("right")
        if op in ("+", "-", "*", "<<", ">>", "&", "|", "^", "/", "%") and left is not None:
            return binary_value(op, self.value(left), self.value(right))
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
            return self._conditional(e["cond"], left, right)
        if op in ("dereference_header_stack", "dereference_stack"):
            st = self.compile(left).const
            idx = self.compile(right)
            if isinstance(idx.const, int) and 0 <= idx.const < len(st.headers):
                return V(str(st.headers[idx.const].base), "header")
            return V(self.stack_index(st, idx.src), "header")
        if op == "access_field":
            base = self.header(left)
            htype = self.header_type_of(left)
            info = htype.fields[json_int(right, "access_field index", 0, len(htype.fields) - 1)]
            return self.ctx.dyn_slot(base, 1 + info.index, info).read()
        if op == "last_stack_index":
            return V(f"((ss_i128)S->s[{self._any_stack(right).next_slot}] - 1)", signed=True)
        if op == "size_stack":
            return V(f"((ss_u128)S->s[{self._any_stack(right).next_slot}])")
        if op == "access_union_header":
            u = self.union(left)
            return V(str(u.headers[json_int(right, "access_union_header index", 0, len(u.headers) - 1)].base), "header")
        if op == "dereference_union_stack":
            raise Unsupported("header union stacks")
        raise ProgramError(f"unsupported expression operator '{op}'")

    def _conditional(self, cond_node, left, right) -> V:
        cond = self.boolean(cond_node)
        lc, rc = self.compile(left), self.compile(right)
        if "union" in (lc.kind, rc.kind):
            raise Unsupported("a conditional header union")
        if lc.kind == rc.kind == "header":
            return V(f"({cond} ? {lc.src} : {rc.src})", "header")
        lv, rv = self.value(left), self.value(right)
        signed = lv.signed or rv.signed
        ty = "ss_i128" if signed else "ss_u128"
        return V(f"({cond} ? ({ty}){lv.src} : ({ty}){rv.src})", signed=signed)

    def _any_stack(self, node):
        c = self.compile(node)
        if c.kind != "stack":
            raise Unsupported("union stacks") if node.get("type") == "header_union_stack" else \
                ProgramError(f"expected a header stack, got {node!r}")
        return c.const

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
        parts = [f"{x.target} == {y.target}" for x, y in zip(self.field_slots(a, htype), self.field_slots(b, htype))]
        fields = " && ".join(parts) or "1"
        return f"(S->s[{a}] == S->s[{b}] && (!S->s[{a}] || ({fields})))"


def binary_value(op: str, a: V, b: V) -> V:
    """``a op b`` for an arithmetic or bitwise operator: signed where the operands make it so
    (``&`` only when both are), a division or modulo through the helper that fails the packet
    on zero."""
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
