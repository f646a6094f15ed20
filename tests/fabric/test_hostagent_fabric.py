"""Host agents in a k=4 fat-tree (softswitch, `Lab(hostagent=...)`): a RoCEv2-like flow from pod
0 to pod 3 that the agent keeps repathing (PLB with K = 0 and N = 1: a new source port every
round, the kernel's "repath every N rounds whatever happens") crosses the core through more
than one core switch, where a flow the agent does not move (plain UDP) keeps to one; read from
the cores' egress counters toward pod 3. Teardown stops the agents with the lab."""
from __future__ import annotations

import os

import pytest

from aifabric.lab.lab import Lab
from hostagent.agent.config import AgentConfig
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic.drive import run_traffic
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent_support import bcc_missing
from topologies.fabric import Role, fat_tree
from teardown_check import assert_torn_down
from emulation.p4switch import port_accepts

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)"),
              pytest.mark.skipif(bcc_missing() is not None, reason=str(bcc_missing()))]
PACKETS = 300
RATE_PPS = 100


def core_counts(lab: Lab, pod: int) -> dict[str, int]:
    """Packets each core switch sent toward ``pod``."""
    out = {}
    for core in (s for s in lab.fabric.switches if s.role == Role.CORE):
        port = next(p for p, peer in lab.fabric.ports_of(core.name).items() if lab.fabric.switch(peer).pod == pod)
        counter = lab.controller.read_port_counters(core.name).get(port)
        out[core.name] = counter.packets if counter is not None else 0
    return out


def one_flow(lab: Lab, src: str, dst: str, dport: int, sport: int) -> dict[str, int]:
    """Send one flow; packets per core toward ``dst``'s pod while it ran."""
    pod = lab.fabric.switch(lab.fabric.host(dst).switch).pod
    before = core_counts(lab, pod)
    flows = [FlowSpec(src, dst, "udp", sport, dport, PACKETS, rate_pps=RATE_PPS)]
    results = run_traffic({n: lab.host(n) for n in (src, dst)}, flows, quiet=2.0, deadline=30, start_delay=0.5)
    assert results[0].received is not None and results[0].received.unique >= 0.9 * PACKETS, results[0].summary()
    after = core_counts(lab, pod)
    return {c: after[c] - before[c] for c in before}


def test_repathed_flow_crosses_more_than_one_core(tmp_path) -> None:
    fabric = fat_tree(4)
    busy = [s.name for s in fabric.switches if port_accepts(s.grpc_port)]
    assert not busy, f"gRPC ports of {busy} are taken: another fabric is running"
    config = AgentConfig("plb", round_s=0.1, plb=PlbParams(rehash_rounds=1, cong_thresh=0), seed=1)
    src, dst = fabric.hosts[0].name, fabric.hosts[-1].name
    with Lab(fabric, target="softswitch", log_dir=tmp_path, hostagent=config) as lab:
        assert lab.agents is not None and set(lab.agents.processes) == {h.name for h in fabric.hosts}
        still = one_flow(lab, src, dst, 5555, 50200)              # plain UDP: counted, never moved
        moved = one_flow(lab, src, dst, ROCEV2_PORT, 50201)       # RoCEv2: a new source port every round
        stats = lab.agents.stats()[src]
        busy_still = [c for c, n in still.items() if n >= 0.1 * PACKETS]
        busy_moved = [c for c, n in moved.items() if n >= 0.1 * PACKETS]
        assert len(busy_still) == 1, f"an unmoved flow kept to one core: {still}"
        assert len(busy_moved) >= 2, f"the repathed flow should cross several cores: {moved}"
        assert stats.totals.repaths >= 2 and stats.totals.rounds >= 2
        agents = lab.agents
    assert set(agents.exit_codes.values()) == {0}, agents.failures         # each detached and exited cleanly
    assert_torn_down(fabric)
