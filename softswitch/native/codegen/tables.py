"""A table apply in C as a control-flow Block: the key, ``ss_table_lookup``, counters and
meter, the action through a function that picks it by id (through the profile's member for an
indirect table), and the successor by hit or miss or by the action that ran."""
from __future__ import annotations

from dataclasses import dataclass

from ...pipeline.codegen import by_action, successors
from ...pipeline.controlflow import Block
from ...pipeline.expressions import parse_hexstr
from ...pipeline.untrusted import json_int
from .actions import Actions
from .calculations import Calculations
from .context import Context, const, mask
from .expressions import Expressions


@dataclass(eq=False)
class Tables:
    ctx: Context
    ex: Expressions
    calculations: Calculations
    actions: Actions

    def block(self, t: dict) -> Block:
        ctx = self.ctx
        table = ctx.p.tables[t["name"]]
        tix = ctx.tables.index(t["name"])
        next_tables, hit_miss, default_next, action_next = successors(t)
        run = self._run_table_action(tix, t)
        tb = f"o->tables[{tix}]"
        miss = [f"a = {tb}.default_action;",
                f"if (a >= 0 && (r = {run}(o, S, a, {tb}.default_data)) != 0) goto out;"]
        keys = t.get("key", [])
        if not keys:
            a = table.default_action
            if table.default_const and a is not None:
                data = ctx.static("ss_u128", [const(d & ((1 << 128) - 1)).src for d in table.default_data])
                nxt = next_tables.get("__MISS__") if hit_miss else action_next.get(a.id, default_next)
                return Block([f"a = {a.id};", *self.actions.call(a.id, data)], [nxt])
            if hit_miss:
                return Block(miss, [next_tables.get("__MISS__")])
            return by_action(miss, action_next, default_next, "a")
        parts = [self._key_source(k) for k in keys]
        lines = [f"{{ ss_u128 _key[{len(parts)}] = {{{', '.join(parts)}}};",
                 f"  e = ss_table_lookup(&{tb}, _key); }}",
                 "if (!e) {", *["    " + ln for ln in miss], "} else {"]
        il = ctx.hidden["ingress_length"]
        hit = []
        if t.get("with_counters"):
            hit += ["e->packets += 1;", f"e->bytes += S->s[{il}];"]
        if t.get("direct_meters"):
            meter = ctx.p.meters[t["direct_meters"]]
            target = self.ex.lvalue({"type": "field", "value": meter.result_target})
            hit.append(target.store(f"ss_meter_execute(&e->meter, S->s[{il}])"))
        if t.get("type", "simple") == "simple":
            hit += ["a = e->action;", f"if ((r = {run}(o, S, a, e->data)) != 0) goto out;"]
        else:
            profile = table.profile
            pix = ctx.profiles.index(profile.name)
            pick = "0"
            if profile.selector is not None:
                pick = f"(e->group >= 0 ? (uint32_t){self.calculations.calculation(profile.selector.name)}(o, S) : 0)"
            hit += [f"{{ int _found; ss_member *_m = ss_profile_member(&o->profiles[{pix}], e, {pick}, &_found);",
                    "  if (!_m) a = -1;",
                    f"  else {{ a = _m->action; if ((r = {run}(o, S, a, _m->data)) != 0) goto out; }} }}"]
        lines += ["    " + ln for ln in hit] + ["}"]
        if hit_miss:
            return Block(lines, [next_tables.get("__HIT__"), next_tables.get("__MISS__")], cond="e != NULL")
        return by_action(lines, action_next, default_next, "a")

    def _run_table_action(self, tix: int, t: dict) -> str:
        """A function running table ``tix``'s action ``a`` with data ``D``: its id picks it."""
        fn = self.ctx.ident("RUN")
        lines = [f"static int {fn}(ss_objects *o, ss_st *S, int a, const ss_u128 *D) {{", "    switch (a) {"]
        for aid in sorted({json_int(x, "action id") for x in t.get("action_ids", [])}):
            target = self.actions.action_fn.get(aid)
            if target:
                lines.append(f"    case {aid}: return {target}(o, S, D);")
        lines += ["    default: return SS_OK;", "    }", "}", ""]
        self.ctx.out += lines
        return fn

    def _key_source(self, k: dict) -> str:
        ctx = self.ctx
        mt, target = k.get("match_type"), k.get("target")
        if mt == "valid":
            return f"(ss_u128)S->s[{ctx.lay.header(target).base}]"
        slot, info, _ = ctx.lay.field_ref(target)
        if info is None:
            src = f"(ss_u128)S->s[{slot}]"
        else:
            src = f"((ss_u128){ctx.slot(slot, info).read().src} & {mask(info.width)})"
        if k.get("mask"):
            src = f"({src} & {const(parse_hexstr(k['mask'])).src})"
        return src
