"""Action primitives (core and v1model/simple_switch) → lines of Python.

Each primitive call in the JSON becomes a few statements acting on ``F`` (the packet state)
and ``D`` (the action data). Semantics follow BMv2's src/bm_sim/core/primitives.cpp and
targets/simple_switch/primitives.cpp; where BMv2 would abort the whole switch (a failed
``assert``/``assume``) softswitch drops the one packet and logs it instead.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import ProgramError
from .expressions import DATA, HEADER, STACK, UNION, USTACK, Compiled, ExpressionCompiler
from .helpers import zeros_source
from .layout import FieldInfo, Layout
from .untrusted import literal

DROP_PORT = 511
MIRROR_SESSION_VALID = 1 << 15   # BMv2 keeps "a clone was asked for" in this bit


class Lvalue:
    """A writable field: the source that names it (``F[slot]``, or an action's local
    variable) and its width/signedness."""

    def __init__(self, target: str, info: FieldInfo):
        self.target = target
        self.info = info

    def store(self, value_src: str, bits: int | None = None) -> str:
        """``target = value`` truncated to the field's width; ``bits``: the value is known to
        be >= 0 and below 2**bits (it needs no mask if that fits the field)."""
        w = self.info.width
        if w is None:
            raise ProgramError(f"cannot assign a plain value to variable-length field '{self.info.name}'")
        if self.info.signed:
            return f"{self.target} = _tcm({value_src}, {w})"
        if bits is not None and bits <= w:
            return f"{self.target} = {value_src}"
        return f"{self.target} = {value_src} & {(1 << w) - 1:#x}"

    def assign(self, value: Compiled) -> str:
        return self.store(value.src, value.bits)


class Arithmetic:
    """P4_14-era arithmetic primitives, still accepted by simple_switch, for a compiler that has
    ``_binary(dst, a, b, op)`` (dst = a op b) and ``_accumulate(dst, v, op)`` (dst = dst op v)."""

    def p_add_to_field(self, dst, v): return self._accumulate(dst, v, "+")
    def p_subtract_from_field(self, dst, v): return self._accumulate(dst, v, "-")
    def p_add(self, d, a, b): return self._binary(d, a, b, "+")
    def p_subtract(self, d, a, b): return self._binary(d, a, b, "-")
    def p_bit_xor(self, d, a, b): return self._binary(d, a, b, "^")
    def p_bit_or(self, d, a, b): return self._binary(d, a, b, "|")
    def p_bit_and(self, d, a, b): return self._binary(d, a, b, "&")
    def p_shift_left(self, d, a, b): return self._binary(d, a, b, "<<")
    def p_shift_right(self, d, a, b): return self._binary(d, a, b, ">>")


def call_primitive(compiler: Any, prim: dict, unsupported: Callable[[str], Exception]) -> list[str]:
    """``compiler.p_<op>(*parameters)`` for one primitive call of the JSON (the Python and the
    native generators' primitives have the same names); ``unsupported(op)``: the error for an
    op the compiler lacks."""
    op = prim.get("op")
    fn = getattr(compiler, "p_" + str(op), None)
    if fn is None:
        raise unsupported(str(op))
    try:
        return fn(*prim.get("parameters", []))
    except TypeError as e:
        raise ProgramError(f"primitive '{op}' has wrong parameters: {e}") from None


def header_type_of(layout: Layout, node: dict, stack_of: Callable[[dict], Any], union_of: Callable[[dict], Any]):
    """The header type of a header operand: a header, a stack element (``stack_of`` gives the
    layout's stack of an operand), a union member (``union_of``: its union), either arm of a
    conditional."""
    if node["type"] == "header":
        return layout.header(node["value"]).type
    if node["type"] == "expression":
        e = node["value"]
        if e.get("type") == "expression":       # p4c wraps a conditional header twice
            return header_type_of(layout, e, stack_of, union_of)
        if e.get("op") == "?":                  # cond ? a : b: both of one header type
            return header_type_of(layout, e["left"], stack_of, union_of)
        if e.get("op") in ("dereference_header_stack", "dereference_stack"):
            return stack_of(e["left"]).headers[0].type
        if e.get("op") == "access_union_header":
            return union_of(e["left"]).headers[int(e["right"])].type
    raise ProgramError(f"cannot tell the header type of {node!r}")


class PrimitiveCompiler(Arithmetic):
    def __init__(self, layout: Layout, ec: ExpressionCompiler, objects: Any,
                 calculation_output: Callable[[str], str]):
        self.layout = layout
        self.ec = ec
        self.calculation_output = calculation_output     # a calculation's value for F (codegen)
        self.bind: Callable[[Any], str] = ec.bind
        self.obj = objects
        self.hidden = layout.hidden
        self.egress_spec = layout.intrinsic("standard_metadata.egress_spec")
        self.mcast_grp = layout.intrinsic("intrinsic_metadata.mcast_grp")

    # -- operands ------------------------------------------------------------------------
    def lvalue(self, p: dict) -> Lvalue:
        t, v = p["type"], p.get("value")
        if t == "field":
            local = self.ec.local(v)
            if local is not None:
                return Lvalue(local, self.layout.action_locals[v[1]])
            slot, info, _ = self.layout.field_ref(v)
            if info is None:
                raise ProgramError(f"'{v[0]}.$valid$' is read-only")
            return Lvalue(f"F[{slot}]", info)
        if t == "expression":
            e = v["value"] if v.get("type") == "expression" else v
            if e.get("op") != "access_field":
                raise ProgramError(f"expression is not assignable: {e!r}")
            base = self.ec.header(e["left"])
            htype = self._header_type_of(e["left"])
            info = htype.fields[int(e["right"])]
            slot = str(int(base) + 1 + info.index) if base.isdigit() else f"{base} + {1 + info.index}"
            return Lvalue(f"F[{slot}]", info)
        if t == "stack_field":
            st = self.layout.stack(v[0])
            info = st.headers[0].type.field(v[1])
            bases = self.bind(tuple(h.base for h in st.headers))
            return Lvalue(f"F[{bases}[F[{st.next_slot}] - 1] + {1 + info.index}]", info)
        raise ProgramError(f"cannot assign to a '{t}'")

    def _header_type_of(self, node: dict):
        return header_type_of(self.layout, node, lambda n: self.ec.compile(n).const, self._union_of)

    def _union_of(self, node: dict):
        if node["type"] == "header_union":
            return self.layout.union(node["value"])
        e = node["value"]
        return self.ec.compile(e["left"]).const.unions[0]

    def _object(self, table: dict, p: dict, what: str):
        name = p.get("value")
        try:
            return table[name]
        except KeyError:
            raise ProgramError(f"unknown {what} '{name}'") from None

    def _set_valid(self, base_src: str) -> list[str]:
        """Mark a header valid; a union member invalidates its siblings."""
        if base_src.isdigit():
            sib = self.obj.union_siblings.get(int(base_src), ())
            return [f"F[{base_src}] = 1"] + [f"F[{s}] = 0" for s in sib]
        if self.obj.union_siblings:
            return [f"_set_valid(F, {base_src})"]
        return [f"F[{base_src}] = 1"]

    def _header_slots(self, node: dict) -> tuple[str, int]:
        return self.ec.header(node), self._header_type_of(node).slots

    # -- primitives ----------------------------------------------------------------------
    def compile(self, prim: dict) -> list[str]:
        return call_primitive(self, prim, lambda op: ProgramError(f"unsupported primitive '{op}'"))

    def p_assign(self, dst, src):
        if dst["type"] == "header":
            return self.p_assign_header(dst, src)
        return [self.lvalue(dst).assign(self.ec.value(src))]

    p_modify_field = p_assign

    def p_assign_VL(self, dst, src):
        if dst["type"] != "field" or src["type"] != "field":
            raise ProgramError("assign_VL needs two field references")
        d_slot, _, d_hdr = self.layout.field_ref(dst["value"])
        s_slot, _, s_hdr = self.layout.field_ref(src["value"])
        return [f"F[{d_slot}] = F[{s_slot}]",
                f"F[{d_hdr.varbit_len_slot}] = F[{s_hdr.varbit_len_slot}]"]

    def p_assign_header(self, dst, src):
        db, n = self._header_slots(dst)
        sb, _ = self._header_slots(src)
        return [f"_assign_header(F, {db}, {sb}, {n})"]

    def p_assign_union(self, dst, src):
        d = self.ec.compile(dst)
        s = self.ec.compile(src)
        n = self._union_of(dst).headers
        sizes = self.bind(tuple(h.type.slots for h in n))
        return [f"for _d, _s, _n in zip({d.src}, {s.src}, {sizes}): _assign_header(F, _d, _s, _n)"]

    def p_assign_header_stack(self, dst, src):
        ds, ss = self.layout.stack(dst["value"]), self.layout.stack(src["value"])
        n = ds.headers[0].type.slots
        lines = [f"F[{ds.next_slot}] = F[{ss.next_slot}]"]
        lines += [f"_assign_header(F, {a.base}, {b.base}, {n})" for a, b in zip(ds.headers, ss.headers)]
        return lines

    def p_assign_union_stack(self, dst, src):
        ds, ss = self.layout.union_stack(dst["value"]), self.layout.union_stack(src["value"])
        lines = [f"F[{ds.next_slot}] = F[{ss.next_slot}]"]
        for du, su in zip(ds.unions, ss.unions):
            lines += [f"_assign_header(F, {a.base}, {b.base}, {a.type.slots})"
                      for a, b in zip(du.headers, su.headers)]
        return lines

    def _stack_shift(self, stack_p, num_p, direction: str):
        c = self.ec.compile(stack_p)
        if c.kind == STACK:
            elems = [(h.base,) for h in c.const.headers]
            sizes = (c.const.headers[0].type.slots,)
        elif c.kind == USTACK:
            elems = [tuple(h.base for h in u.headers) for u in c.const.unions]
            sizes = tuple(h.type.slots for h in c.const.unions[0].headers)
        else:
            raise ProgramError(f"{direction} needs a header stack, got {stack_p!r}")
        return [f"_stack_{direction}(F, {self.bind(tuple(elems))}, {self.bind(sizes)}, "
                f"{c.const.next_slot}, {self.ec.data(num_p)})"]

    def p_push(self, stack, num):
        return self._stack_shift(stack, num, "push")

    def p_pop(self, stack, num):
        return self._stack_shift(stack, num, "pop")

    def _packet_length_change(self, hdr, op: str) -> str:
        """The statement growing (``op`` "+") or shrinking ("-") the packet length by ``hdr``'s bytes."""
        return f"F[{self.hidden['packet_length']}] {op}= {self._header_type_of(hdr).fixed_bits // 8}"

    def p_add_header(self, hdr):
        base, n = self._header_slots(hdr)
        return [f"if not F[{base}]:",
                f"    F[{base} + 1:{base} + {n}] = {zeros_source(n - 1)}",
                *("    " + ln for ln in self._set_valid(base)),
                "    " + self._packet_length_change(hdr, "+")]

    def p_add_header_fast(self, hdr):
        return self._set_valid(self.ec.header(hdr))

    def p_remove_header(self, hdr):
        base, _ = self._header_slots(hdr)
        return [f"if F[{base}]:",
                "    " + self._packet_length_change(hdr, "-"),
                f"    F[{base}] = 0"]

    def p_copy_header(self, dst, src):
        return self.p_assign_header(dst, src)

    def p_mark_to_drop(self, std_hdr=None):
        lines = [f"F[{self.egress_spec}] = {DROP_PORT}"]
        if self.mcast_grp is not None:
            lines.append(f"F[{self.mcast_grp}] = 0")
        return lines

    p_drop = p_mark_to_drop

    def p_exit(self):
        return ["raise _Exit"]

    def p_no_op(self):
        return ["pass"]

    def p_assert(self, cond):
        return [f"if not {self.ec.boolean(cond)}: raise _Abort('assert failed')"]

    def p_assume(self, cond):
        return [f"if not {self.ec.boolean(cond)}: raise _Abort('assume failed')"]

    def p_log_msg(self, fmt, values):
        args = ", ".join(self.ec.data(v) for v in values.get("value", []))
        return [f"_log_msg({literal(fmt['value'], 'log_msg format')}, ({args}{',' if args else ''}))"]

    def _clone(self, session, field_list):
        return [f"F[{self.hidden['clone_session']}] = ({self.ec.data(session)} & 0xffff) | {MIRROR_SESSION_VALID}",
                f"F[{self.hidden['clone_field_list']}] = {self.ec.data(field_list)} & 0xffff"]

    def p_clone_ingress_pkt_to_egress(self, session, field_list):
        return self._clone(session, field_list)

    def p_clone_egress_pkt_to_egress(self, session, field_list):
        return self._clone(session, field_list)

    def p_resubmit(self, field_list):
        return [f"F[{self.hidden['resubmit_field_list']}] = {self.ec.data(field_list)} & 0xffff"]

    def p_recirculate(self, field_list):
        return [f"F[{self.hidden['recirculate_field_list']}] = {self.ec.data(field_list)} & 0xffff"]

    def p_truncate(self, length):
        t = self.hidden["truncate_length"]
        return [f"F[{t}] = min(F[{t}], {self.ec.data(length)})"]

    def p_generate_digest(self, receiver, learn_id):
        return [f"F[{self.hidden['learn_id']}] = {self.ec.data(learn_id)} & 0xffff"]

    def p_modify_field_with_hash_based_offset(self, dst, base, calc, size):
        c = self._object(self.obj.calculations, calc, "calculation")
        return [f"_sz = {self.ec.data(size)} or 1",
                self.lvalue(dst).store(f"({self.calculation_output(c.name)} % _sz) + {self.ec.data(base)}")]

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        return [f"_lo, _hi = {self.ec.data(lo)}, {self.ec.data(hi)}",
                "if _lo <= _hi:",
                "    " + self.lvalue(dst).store("_randint(_lo, _hi)")]

    def p_count(self, counter, index):
        c = self._object(self.obj.counters, counter, "counter array")
        # into the counter array's lists, no call: an index out of range counts nothing (BMv2)
        return [f"_cx = {self.ec.data(index)}",
                f"if 0 <= _cx < {c.size}:",
                f"    {self.bind(c.packets)}[_cx] += 1",
                f"    {self.bind(c.bytes)}[_cx] += F[{self.hidden['ingress_length']}]"]

    def p_execute_meter(self, meter, index, dst):
        m = self._object(self.obj.meters, meter, "meter array")
        idx = self.ec.data(index)
        return [f"_c = {self.bind(m)}.execute({idx}, F[{self.hidden['ingress_length']}])",
                "if _c is not None:",
                "    " + self.lvalue(dst).store("_c")]

    def p_register_read(self, dst, reg, index):
        r = self._object(self.obj.registers, reg, "register array")
        return [f"_v = {self.bind(r)}.read({self.ec.data(index)})",
                "if _v is not None:",
                "    " + self.lvalue(dst).store("_v")]

    def p_register_write(self, reg, index, value):
        r = self._object(self.obj.registers, reg, "register array")
        return [f"{self.bind(r)}.write({self.ec.data(index)}, {self.ec.data(value)})"]

    def _binary(self, dst, a, b, op):
        return [self.lvalue(dst).store(f"({self.ec.data(a)} {op} {self.ec.data(b)})")]

    def _accumulate(self, dst, v, op):
        d = self.lvalue(dst)
        return [d.store(f"({d.target} {op} {self.ec.data(v)})")]


def is_jump(prim: dict) -> bool:
    return prim.get("op") in ("_jump", "_jump_if_zero")


def jump_target(prim: dict, ec: ExpressionCompiler) -> tuple[str | None, int]:
    """(condition source or None, target index) of a ``_jump``/``_jump_if_zero``."""
    params = prim["parameters"]
    if prim["op"] == "_jump":
        return None, int(ec.compile(params[0]).const)
    return ec.data(params[0]), int(ec.compile(params[1]).const)


__all__ = ["PrimitiveCompiler", "Arithmetic", "call_primitive", "header_type_of", "Lvalue", "is_jump", "jump_target", "DROP_PORT",
           "MIRROR_SESSION_VALID", "DATA", "HEADER", "UNION"]
