"""Host agents as the lab runs them (`python -m hostagent`, one process per host, started by
`hostagent.agent.launch`) in two network namespaces, with a congested hop in front of B
(`CeMarker`: a fixed share of each flow's ECT packets marked CE) and traffic from
hostagent.traffic: a flow held above PLB's threshold K repaths (on the wire: new source ports,
new flow labels), one below K never does, DCQCN's CNPs slow the UDP sender through its
rate-control port, and on SIGTERM every agent detaches all it attached."""
from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from hostagent.agent.config import AgentConfig
from hostagent.agent.dcqcn import DcqcnParams
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic.drive import FlowResult, run_traffic
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent_support import MARKER_PRIO, CeMarker, NsPair, needs_bcc, tcp_selector

pytestmark = needs_bcc
RATE_PPS = 400
ROUND_S = 0.05
N = 12
LINE_BPS = 1.2e6                 # a bit above the UDP flows' 400 pps of 318-byte frames
TCP_PORT = 5001
QUEUE_BYTES = 2_000_000        # > the 1.2 MB TCP flow and both UDP flows (600 x 318 bytes each)


def config(stats_dir) -> AgentConfig:
    # DCQCN scaled to 1.2 Mbit/s would wait 1.7 s between CNPs: a tenth of a second shows it here.
    # The marker marks a fixed share whatever the rate (no queue drains), so the rate would sink
    # to the minimum and stay: half the line keeps the flows finishing in seconds.
    dcqcn = replace(DcqcnParams().scaled(LINE_BPS), cnp_interval_s=0.1, alpha_timer_s=0.1, rate_timer_s=0.1,
                    min_rate_bps=LINE_BPS / 2)
    # its flows are read from its stats after the traffic: kept the whole test, not forgotten after
    # 2 s idle (a busy machine wrote the first stats after the traffic once the flows were gone)
    return AgentConfig("plb+dcqcn", round_s=ROUND_S, plb=PlbParams(rehash_rounds=N), line_rate_bps=LINE_BPS,
                       dcqcn=dcqcn, seed=7, idle_forget_s=600.0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from hostagent.agent.launch import start_agents

    with NsPair(f"ha{os.getpid() % 10000}") as pair:
        a, b = pair.a, pair.b
        marker = CeMarker(b)
        marker.mark(0, 3, 4)                          # flow 0: 75% CE, above K = 50%
        marker.mark(1, 1, 4)                          # flow 1: 25%, below
        marker.mark(tcp_selector(TCP_PORT), 1, 1)     # the TCP flow: every ECT segment
        # A's line: 6 Mbit/s keeps the TCP flow going for more than N rounds; its queue holds more
        # than all three flows together, so no packet is ever dropped there (a UDP loss there
        # would be the line's, not the agents')
        a.sh("tc", "qdisc", "add", "dev", a.iface, "root", "tbf", "rate", "6mbit", "burst", "16kb",
             "limit", str(QUEUE_BYTES))
        ecn_before = a.sh("sysctl", "-n", "net.ipv4.tcp_ecn").strip()
        b.sh("sysctl", "-qw", "net.ipv4.tcp_ecn=1")
        stats_dir = tmp_path_factory.mktemp("agents")
        agents = start_agents({"a": a, "b": b}, config(stats_dir), stats_dir)
        try:
            yield pair, marker, agents, ecn_before
        finally:
            agents.stop()
            marker.close()


def wire(frames: list[bytes]) -> dict[str, set]:
    """Source ports of each RoCEv2 queue pair, flow labels of the TCP flow, as captured."""
    out: dict[str, set] = {"qp0": set(), "qp1": set(), "tcp": set()}
    for f in frames:
        p = Ether(f)
        if UDP in p and p[UDP].dport == ROCEV2_PORT and bytes(p[UDP].payload)[:1] == b"\x04":
            qp = int.from_bytes(bytes(p[UDP].payload)[5:8], "big")
            out.setdefault(f"qp{qp}", set()).add(p[UDP].sport)
        elif TCP in p and p[TCP].dport == TCP_PORT and len(p[TCP].payload):
            out["tcp"].add(p[IPv6].fl)
    return out


def test_plb_repaths_above_k_never_below_and_dcqcn_slows_the_sender(lab) -> None:
    from hostagent.traffic.ratecontrol import RATE_CONTROL_PORT

    pair, marker, agents, _ = lab
    hosts = {"a": pair.a, "b": pair.b}
    addr = {"a": pair.a.ip6, "b": pair.b.ip6}
    flows = [FlowSpec("a", "b", "udp", 50100, ROCEV2_PORT, 600, rate_pps=RATE_PPS),
             FlowSpec("a", "b", "udp", 50101, ROCEV2_PORT, 600, rate_pps=RATE_PPS),
             FlowSpec("a", "b", "tcp", 50102, TCP_PORT, 1_200_000)]
    cap = pair.b.capture()
    results: list[FlowResult] = run_traffic(hosts, flows, quiet=1.0, deadline=15, start_delay=0.3,
                                            addr_of=addr.__getitem__, rate_control_port=RATE_CONTROL_PORT)
    seen = wire(cap.frames())
    cap.close()
    described = (f"udp [{pair.a.ip6}] -> [{pair.b.ip6}]:4791 qp 0", f"udp [{pair.a.ip6}] -> [{pair.b.ip6}]:4791 qp 1",
                 f"tcp [{pair.a.ip6}]:50102 -> [{pair.b.ip6}]:{TCP_PORT}")
    # the agent rewrites its stats every stats_interval_s when it gets the CPU: on a busy machine
    # the file read right after the traffic may predate the flows (seen: no record of the first);
    # wait for one written after the traffic
    ended, stats_file = time.time(), agents.processes["a"].stats_path
    deadline = time.monotonic() + 20 * AgentConfig("plb").stats_interval_s
    while os.stat(stats_file).st_mtime <= ended and time.monotonic() < deadline:
        time.sleep(0.1)
    stats = agents.stats()["a"]
    flows = [stats.flow(d) for d in described]
    assert all(flows), f"the agent's stats name no flow {[d for d, f in zip(described, flows) if f is None]}"
    hot, cool, tcp = flows
    # every flow arrived whole: the receiver keys RoCE flows by queue pair, a new port does not split them
    assert all(r.complete for r in results), [(r.id, r.lost, r.sent.error if r.sent else "no sender record")
                                              for r in results if not r.complete]
    # above K: congested rounds, repaths every N of them (one more may come when the flow goes idle)
    assert hot.rounds >= N and hot.congested_rounds == hot.rounds
    assert 1 <= hot.repaths <= hot.congested_rounds // N + 1
    # each repath a new source port on the wire (but one when the flow has ended carries nothing)
    assert hot.repaths <= len(seen["qp0"]) <= hot.repaths + 1
    # below K: never
    assert cool.rounds >= N and (cool.congested_rounds, cool.repaths) == (0, 0)
    assert seen["qp1"] == {50101}
    # TCP: ECN-Echo on the ACKs of a flow whose every segment was marked; repaths are new labels
    assert tcp.rounds >= N and tcp.repaths >= 1 and tcp.repaths <= len(seen["tcp"]) <= tcp.repaths + 1
    # DCQCN: B sent CNPs, A's reaction point cut both UDP flows' rates through the sender
    assert agents.stats()["b"].totals.cnps_sent >= 2 and stats.totals.cnps_received >= 2
    for r in results[:2]:
        assert r.sent.rate_updates >= 1 and r.sent.min_rate_pps < RATE_PPS
    assert hot.rate_bps is not None and hot.rate_bps < LINE_BPS


def test_agents_detach_everything_on_exit(lab) -> None:
    from hostagent.agent.bpf.inventory import still_loaded
    from hostagent.agent.bpf.loader import agent_filters
    from hostagent.agent.stats import AgentStats

    pair, marker, agents, ecn_before = lab
    ids = {h: p.bpf for h, p in agents.processes.items()}
    assert all(ids[h]["prog"] and ids[h]["map"] for h in ids)
    codes = agents.stop()
    assert codes == {"a": 0, "b": 0}
    for h in (pair.a, pair.b):
        assert agent_filters(h.iface, h.ns) == []
    assert "clsact" not in pair.a.sh("tc", "qdisc", "show", "dev", pair.a.iface)     # the agent made it: gone
    assert f"pref {MARKER_PRIO} bpf" in pair.b.sh("tc", "filter", "show", "dev", pair.b.iface, "ingress")   # the marker's stays
    loaded = {kind: [x for i in ids.values() for x in i[kind]] for kind in ("prog", "map")}
    deadline = time.monotonic() + 5                   # programs and maps are freed after an RCU grace period
    while (left := still_loaded(loaded)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []
    assert pair.a.sh("sysctl", "-n", "net.ipv4.tcp_ecn").strip() == ecn_before
    for p in agents.processes.values():
        assert AgentStats.read(p.stats_path).stopped
