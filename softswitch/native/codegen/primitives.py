"""Action primitives in C (the Python path's primitives.py, primitive by primitive, with the
same names): statements on the packet state ``S``, the action data ``D`` and the program's
objects ``o`` (registers, counters, meters); those that can fail stop the packet after them."""
from __future__ import annotations

from ...pipeline.errors import ProgramError
from ...pipeline.primitives import DROP_PORT, MIRROR_SESSION_VALID, Arithmetic, call_primitive
from .calculations import Calculations
from .context import FAILED, FALLIBLE, SS_EXIT, Context, Unsupported
from .expressions import Expressions, binary_value


class Primitives(Arithmetic):
    def __init__(self, ctx: Context, ex: Expressions, calculations: Calculations):
        self.ctx = ctx
        self.ex = ex
        self.calculations = calculations
        self.hidden = ctx.hidden
        self.egress_spec = ctx.lay.intrinsic("standard_metadata.egress_spec")
        self.mcast_grp = ctx.lay.intrinsic("intrinsic_metadata.mcast_grp")

    def primitive(self, prim: dict) -> list[str]:
        """The primitive's statements; where they can fail (a stack index, a division), the
        packet stops after them, as the Python path's exception stops it (the stateful ones
        check before they change anything)."""
        lines = call_primitive(self, prim, lambda op: Unsupported(f"primitive '{op}'"))
        if any(h in ln for ln in lines for h in FALLIBLE):
            lines = lines + [FAILED]
        return lines

    def set_valid(self, base: str) -> list[str]:
        """Mark a header valid; a union member invalidates its siblings (stack elements are no
        union's: union stacks are refused)."""
        siblings = self.ctx.p.union_siblings.get(int(base), ()) if base.isdigit() else ()
        return [f"S->s[{base}] = 1;", *(f"S->s[{sib}] = 0;" for sib in siblings)]

    # -- fields and headers -------------------------------------------------------------
    def p_assign(self, dst, src):
        if dst["type"] == "header":
            return self.p_assign_header(dst, src)
        if dst["type"] in ("header_union", "header_stack", "header_union_stack"):
            raise Unsupported(f"assigning a {dst['type']}")
        return [self.ex.lvalue(dst).store(self.ex.value(src))]

    p_modify_field = p_assign

    def p_assign_VL(self, dst, src):
        if dst["type"] != "field" or src["type"] != "field":
            raise ProgramError("assign_VL needs two field references")
        lay = self.ctx.lay
        d_slot, d_info, d_hdr = lay.field_ref(dst["value"])
        s_slot, s_info, s_hdr = lay.field_ref(src["value"])
        return [f"{self.ctx.slot(d_slot, d_info).target} = {self.ctx.slot(s_slot, s_info).target};",
                f"S->s[{d_hdr.varbit_len_slot}] = S->s[{s_hdr.varbit_len_slot}];"]

    def p_assign_header(self, dst, src):
        ex = self.ex
        db, sb = ex.header(dst), ex.header(src)
        htype = ex.header_type_of(dst)
        copies = [f"{d.target} = {s.target};" for d, s in zip(ex.field_slots(db, htype), ex.field_slots(sb, htype))]
        return [f"if (!S->s[{sb}]) S->s[{db}] = 0;",
                f"else {{ S->s[{db}] = S->s[{sb}]; {' '.join(copies)} }}"]

    p_copy_header = p_assign_header

    def p_assign_header_stack(self, dst, src):
        ds, ss = self.ctx.lay.stack(dst["value"]), self.ctx.lay.stack(src["value"])
        lines = [f"S->s[{ds.next_slot}] = S->s[{ss.next_slot}];"]
        for a, b in zip(ds.headers, ss.headers):
            lines += self.p_assign_header({"type": "header", "value": a.name}, {"type": "header", "value": b.name})
        return lines

    def p_assign_union(self, dst, src):
        d, s = self.ex.union(dst), self.ex.union(src)
        lines = []
        for a, b in zip(d.headers, s.headers):
            lines += self.p_assign_header({"type": "header", "value": a.name}, {"type": "header", "value": b.name})
        return lines

    def _stack_shift(self, stack, num, direction: str):
        c = self.ex.compile(stack)
        if c.kind != "stack":
            raise Unsupported(f"{direction} on a union stack")
        st = c.const
        bases = self.ctx.static("int32_t", [str(h.base) for h in st.headers])
        return [f"ss_stack_{direction}(S, {bases}, {len(st.headers)}, {st.headers[0].type.slots}, "
                f"{st.next_slot}, (ss_i128){self.ex.value(num).src});"]

    def p_push(self, stack, num): return self._stack_shift(stack, num, "push")
    def p_pop(self, stack, num): return self._stack_shift(stack, num, "pop")

    def p_add_header(self, hdr):
        base = self.ex.header(hdr)
        htype = self.ex.header_type_of(hdr)
        zero = [f"{lv.target} = 0;" for lv in self.ex.field_slots(base, htype)]
        return [f"if (!S->s[{base}]) {{ {' '.join(zero)} {' '.join(self.set_valid(base))} "
                f"S->s[{self.hidden['packet_length']}] += {htype.fixed_bits // 8}; }}"]

    def p_add_header_fast(self, hdr):
        return self.set_valid(self.ex.header(hdr))

    def p_remove_header(self, hdr):
        base = self.ex.header(hdr)
        nbytes = self.ex.header_type_of(hdr).fixed_bits // 8
        return [f"if (S->s[{base}]) {{ S->s[{self.hidden['packet_length']}] -= {nbytes}; S->s[{base}] = 0; }}"]

    # -- the packet's way ---------------------------------------------------------------
    def p_mark_to_drop(self, std=None):
        lines = [f"S->s[{self.egress_spec}] = {DROP_PORT};"]
        if self.mcast_grp is not None:
            lines.append(f"S->s[{self.mcast_grp}] = 0;")
        return lines

    p_drop = p_mark_to_drop

    def p_exit(self): return [f"return {SS_EXIT};"]
    def p_no_op(self): return [";"]

    def p_assert(self, cond): return [f"if (!{self.ex.boolean(cond)}) return SS_ERR_ABORT;"]
    p_assume = p_assert

    def p_log_msg(self, fmt, values):
        for v in values.get("value", []):
            self.ex.value(v)             # checked, not printed: the native path does not log
        return [";"]

    def _clone(self, session, field_list):
        return [f"S->s[{self.hidden['clone_session']}] = (uint64_t)(({self.ex.value(session).src} & 0xffff) "
                f"| {MIRROR_SESSION_VALID});",
                f"S->s[{self.hidden['clone_field_list']}] = (uint64_t)({self.ex.value(field_list).src} & 0xffff);"]

    p_clone_ingress_pkt_to_egress = _clone
    p_clone_egress_pkt_to_egress = _clone

    def p_resubmit(self, fl):
        return [f"S->s[{self.hidden['resubmit_field_list']}] = (uint64_t)({self.ex.value(fl).src} & 0xffff);"]

    def p_recirculate(self, fl):
        return [f"S->s[{self.hidden['recirculate_field_list']}] = (uint64_t)({self.ex.value(fl).src} & 0xffff);"]

    def p_truncate(self, length):
        t = self.hidden["truncate_length"]
        return [f"{{ ss_u128 _t = {self.ex.value(length).src}; if (_t < S->s[{t}]) S->s[{t}] = (uint64_t)_t; }}"]

    def p_generate_digest(self, receiver, learn_id):
        return [f"S->s[{self.hidden['learn_id']}] = (uint64_t)({self.ex.value(learn_id).src} & 0xffff);"]

    # -- hashes, randomness and the program's stateful objects --------------------------
    def p_modify_field_with_hash_based_offset(self, dst, base, calc, size):
        name = calc.get("value")
        if name not in self.ctx.p.calculations:
            raise ProgramError(f"unknown calculation '{name}'")
        return [f"{{ ss_u128 _sz = {self.ex.value(size).src}; if (!_sz) _sz = 1;",
                "  " + self.ex.lvalue(dst).store(f"((ss_u128){self.calculations.calculation(name)}(o, S) % _sz) + "
                                                 f"{self.ex.value(base).src}"),
                "}"]

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        return [f"{{ ss_u128 _lo = {self.ex.value(lo).src}, _hi = {self.ex.value(hi).src};",
                "  if (_lo <= _hi) " + self.ex.lvalue(dst).store("ss_random(o, (uint64_t)_lo, (uint64_t)_hi)"),
                "}"]

    def _index_of(self, names: list[str], p: dict, what: str) -> int:
        try:
            return names.index(p.get("value"))
        except ValueError:
            raise ProgramError(f"unknown {what} '{p.get('value')}'") from None

    def p_count(self, counter, index):
        c = self._index_of(self.ctx.counters, counter, "counter array")
        il = self.hidden["ingress_length"]
        return [f"{{ ss_u128 _cx = {self.ex.value(index).src}; ss_counter_array *_c = &o->counters[{c}];",
                f"  {FAILED}",
                f"  if (_cx < _c->size) {{ _c->packets[(uint32_t)_cx]++; _c->bytes[(uint32_t)_cx] += S->s[{il}]; }} }}"]

    def p_execute_meter(self, meter, index, dst):
        m = self._index_of(self.ctx.meters, meter, "meter array")
        il = self.hidden["ingress_length"]
        return [f"{{ ss_u128 _mx = {self.ex.value(index).src}; ss_meter_array *_m = &o->meters[{m}];",
                f"  {FAILED}",
                "  if (_mx < _m->size) " + self.ex.lvalue(dst).store(
                    f"ss_meter_execute(&_m->m[(uint32_t)_mx], S->s[{il}])"),
                "}"]

    def p_register_read(self, dst, reg, index):
        r = self._index_of(self.ctx.registers, reg, "register array")
        return [f"{{ ss_u128 _rx = {self.ex.value(index).src}; ss_register *_r = &o->registers[{r}];",
                "  if (_rx < _r->size) " + self.ex.lvalue(dst).store("_r->v[(uint32_t)_rx]"),
                "}"]

    def p_register_write(self, reg, index, value):
        r = self._index_of(self.ctx.registers, reg, "register array")
        return [f"{{ ss_u128 _rx = {self.ex.value(index).src}, _rv = {self.ex.value(value).src};",
                f"  ss_register *_r = &o->registers[{r}]; {FAILED}",
                "  if (_rx < _r->size) _r->v[(uint32_t)_rx] = (uint64_t)_rv & _r->mask; }"]

    # -- Arithmetic's two forms ---------------------------------------------------------
    def _accumulate(self, dst, v, op):
        d = self.ex.lvalue(dst)
        return [d.store(binary_value(op, d.read(), self.ex.value(v)))]

    def _binary(self, d, a, b, op):
        return [self.ex.lvalue(d).store(binary_value(op, self.ex.value(a), self.ex.value(b)))]
