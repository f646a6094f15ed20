"""A table apply as a control-flow Block: the lookup (the entry dict itself for an exact
table, recent lookups first otherwise), counters and meter, the action (through its profile
for an indirect table), and the successor by hit or miss or by the action that ran."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ...runtime.action_profiles import ActionProfile
from ...runtime.tables import EXACT, NOT_CACHED
from ..controlflow import Block
from ..expressions import parse_hexstr
from ..primitives import PrimitiveCompiler
from ..untrusted import json_int
from .actions import Actions
from .calculations import Calculations
from .context import Context, indented, mask


@dataclass(eq=False)
class Tables:
    ctx: Context
    pc: PrimitiveCompiler
    actions: Actions
    calculations: Calculations

    def block(self, t: dict) -> Block:
        """A table apply: lookup, counters and meter, the action; then its successor, by hit
        or miss, or by the action that ran (``_i``: its id, -1 when none ran)."""
        ctx = self.ctx
        table = ctx.obj.tables[t["name"]]
        tb = ctx.bind(table)
        next_tables, hit_miss, default_next, action_next = successors(t)
        key_parts = [self._key_source(k) for k in t.get("key", [])]
        if not key_parts:        # p4c wraps every action called in a control in such a table
            a = table.default_action
            if table.default_const and a is not None:    # always the same action: inline
                nxt = next_tables.get("__MISS__") if hit_miss else action_next.get(a.id, default_next)
                return Block(self.actions.lines(a.id, tuple(table.default_data)), [nxt])
            lines = [f"a = {tb}.default_action",
                     "if a is not None:",
                     *indented(run_action(f"{tb}.default_data"))]
            if hit_miss:
                return Block(lines, [next_tables.get("__MISS__")])
            return by_action(lines, action_next, default_next)
        key = "(" + "".join(p + ", " for p in key_parts) + ")"
        il = ctx.layout.hidden["ingress_length"]
        if table.kind == EXACT:       # the entry dict itself, keyed by (values,)
            lines = [f"e = {ctx.bind(table.exact_get())}(({key},))"]
        else:                         # the recent lookups first: a call less for a key seen before
            lines = [f"k = {key}",
                     f"e = {ctx.bind(table.cached_get())}(k, {ctx.bind(NOT_CACHED)})",
                     f"if e is {ctx.bind(NOT_CACHED)}:",
                     f"    e = {ctx.bind(table.lookup)}(k)"]
        lines += ["if e is None:",
                 f"    a = {tb}.default_action",
                 "    if a is not None:",
                  *indented(indented(run_action(f"{tb}.default_data"))),
                 "else:"]
        hit = []
        if t.get("with_counters"):
            hit += ["e.packets += 1", f"e.bytes += F[{il}]"]
        if t.get("direct_meters"):
            meter = ctx.obj.meters[t["direct_meters"]]
            target = self.pc.lvalue({"type": "field", "value": meter.result_target})
            hit.append(target.store(f"e.meter.execute(F[{il}])"))
        if t.get("type", "simple") == "simple":
            hit += ["a = e.action", *run_action("e.data")]
        else:                    # a selector may find no member: the entry hit, no action ran
            hit += self._profile_action(table.profile)
        lines += ["    " + ln for ln in hit]
        if hit_miss:
            return Block(lines, [next_tables.get("__HIT__"), next_tables.get("__MISS__")], cond="e is not None")
        return by_action(lines, action_next, default_next)

    def _profile_action(self, profile: ActionProfile) -> list[str]:
        """Run the action of the member an indirect table's entry ``e`` leads to: its member,
        or the member its group picks as BMv2 does, ``handles[hash % len(handles)]`` with the
        selector's hash truncated to 32 bits (action_profiles.py). No member (a group gone or
        empty, a member gone): no action runs."""
        bind = self.ctx.bind
        if profile.selector is None:
            pick = "0"
        else:
            pick = f"(({self.calculations.output(profile.selector.name)}) & 0xFFFFFFFF)"
        return [f"g = {bind(profile.groups)}.get(e.group)",
                "if g is not None and g.handles:",
                f"    m = {bind(profile.by_handle)}[g.handles[{pick} % len(g.handles)]]",
                "else:",
                f"    m = {bind(profile.members)}.get(e.member)",
                "if m is None:",
                "    a = None",
                "else:",
                "    a = m.action",
                *indented(run_action("m.data"))]

    def _key_source(self, k: dict) -> str:
        layout = self.ctx.layout
        mt, target = k.get("match_type"), k.get("target")
        if mt == "valid":
            return f"F[{layout.header(target).base}]"
        slot, info, _ = layout.field_ref(target)
        width = 1 if info is None else info.width
        src = f"F[{slot}]"
        if info is not None and info.signed:
            src = f"({src} & {mask(width)})"
        if k.get("mask"):
            src = f"({src} & {parse_hexstr(k['mask']):#x})"
        return src


class Successors(NamedTuple):
    """Where a table goes on: by hit or miss when ``next_tables`` names __HIT__ or __MISS__
    (``hit_miss``), otherwise by the action that ran (``action_next``: its id -> the node),
    ``default_next`` for an action not named."""

    next_tables: dict[str, str | None]
    hit_miss: bool
    default_next: str | None
    action_next: dict[int, str | None]


def successors(t: dict) -> Successors:
    """A table's successors (the Python and the C generator's tables go on alike)."""
    next_tables = t.get("next_tables", {})
    default_next = t.get("base_default_next")
    action_next: dict[int, str | None] = {}
    for aid, aname in zip(t.get("action_ids", []), t.get("actions", [])):
        aid = json_int(aid, f"table '{t['name']}': action id")
        action_next[aid] = next_tables.get(aname, default_next)
    return Successors(next_tables, "__HIT__" in next_tables or "__MISS__" in next_tables, default_next, action_next)


def run_action(data: str) -> list[str]:
    """Run the action ``a`` with ``data``: an action with nothing to do has no function (None)."""
    return ["af = a.fn", "if af is not None:", f"    af(F, {data})"]


def by_action(lines: list[str], action_next: dict[int, str | None], default_next: str | None,
              selector: str = "-1 if a is None else a.id") -> Block:
    """A block that goes on by the action that ran (``selector``: its id, -1 when none ran);
    actions going to the same node share an arm."""
    arms: dict[str | None, list[int]] = {}
    for aid, nxt in action_next.items():
        if nxt != default_next:
            arms.setdefault(nxt, []).append(aid)
    if not arms:
        return Block(lines, [default_next])
    return Block(lines, [*arms, default_next], selector=selector, cases=[tuple(ids) for ids in arms.values()])
