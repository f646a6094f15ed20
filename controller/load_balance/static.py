"""Static, even routing pinned before a job (as DeepSeek routes its training fabric): every
flow of the job gets one of the equal-cost paths the routes allow, spread so that the busiest
link carries as few flows as can be found (`controller.load_balance.spread.balanced`), and a
TE pin (`TeOverrides`) at each switch of its path where the routes give a choice. The flows'
five-tuples are known before the job starts (a collective's peers and ports are), so nothing
is measured and nothing moves while it runs.
"""
from __future__ import annotations

from typing import Sequence

from controller.load_balance.hash_paths import FiveTuple
from controller.load_balance.spread import SEARCH_BUDGET, balanced
from controller.load_balance.te.overrides import Pin
from controller.paths import installed_paths


def static_pins(controller, flows: Sequence[FiveTuple], budget: int = SEARCH_BUDGET) -> list[Pin]:
    """The pins that put each of ``flows`` on its path (IPv4 five-tuples)."""
    fabric, forwarding = controller.fabric, controller.forwarding
    allowed = [installed_paths(fabric, forwarding, f.src, f.dst) for f in flows]
    options = [[(i, tuple((a.switch, b.switch) for a, b in zip(p, p[1:]))) for i, p in enumerate(paths)]
               for paths in allowed]
    choice = balanced(options, [None] * len(flows), budget)
    pins = []
    for flow, paths, (index, _) in zip(flows, allowed, choice):
        choices: dict[str, set[int]] = {}
        for path in paths:
            for hop in path:
                choices.setdefault(hop.switch, set()).add(hop.egress_port)
        src, dst = fabric.host(flow.src).ip4.ip, fabric.host(flow.dst).ip4.ip
        pins += [Pin(hop.switch, str(src), str(dst), flow.protocol_number, flow.sport, flow.dport,
                     hop.egress_port)
                 for hop in paths[index] if len(choices[hop.switch]) > 1]
    return pins
