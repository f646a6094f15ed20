"""Load-balancing modes and TE overrides on a real k=4 fat-tree (slow: 20 switches).

Each check looks at p0e0, an edge switch whose two uplinks (ports 3 and 4) form the ECMP group
of every remote destination, and reads its egress port counters around the traffic it sends:
spray splits one flow over both uplinks evenly, ECMP keeps it on one, a flowlet stays on one
uplink while its gaps are short and moves after long pauses, a TE pin wins over spraying and
goes away when removed, and changing modes under a running flow loses nothing. The fabric's hash
as a library (`HashPaths`) names every switch's choice for 192 five-tuples, as INT shows them. TE's own
measurement is shown too: the edge switch samples one packet in N to the controller,
and the TE loop pins the elephants it found in those samples, and the traffic follows the pins.
Before any of that, on the fresh fabric, every ordered host pair reaches each other over IPv4
and IPv6 and many flows between two pods use all four core switches (ECMP); after it, nothing
of the fabric is left.
"""
from __future__ import annotations

import math
import os
import shlex
import threading
import time

import pytest
from targets import FABRIC_TARGETS, only_in_full

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]

EDGE, UPLINKS = "p0e0", (3, 4)
SRC, DST = "p0e0h0", "p2e1h1"


SAMPLE_ONE_IN = 8


@pytest.fixture(scope="module", params=FABRIC_TARGETS)
def lb_lab(request):
    from aifabric.lab.lab import Lab
    from controller.load_balance import LbModes, TeOverrides
    from controller.load_balance.te.engine import TeConfig
    from controller.load_balance.te.loop import TeLoop
    from topologies.fabric import fat_tree

    from emulation.p4switch import port_accepts
    from teardown_check import assert_torn_down

    fabric = fat_tree(4)
    busy = [s.name for s in fabric.switches if port_accepts(s.grpc_port)]
    assert not busy, f"gRPC ports of {busy} are taken: another fabric is running"
    with Lab(fabric, target=request.param, telemetry=_hash_check_telemetry()) as lab:
        overrides = TeOverrides(lab.controller)
        # elephants from 50 kbit/s: a test flow (200 packets/s of 298 bytes, 477 kbit/s) expects
        # 12.5 samples per period and needs 2. Not by chance alone: on a loaded machine the
        # packet-ins come in bursts, and one flow's count per round ranged over 4..23 samples
        # (2 runs beside 4 busy processes), lower still under the whole suite
        te = TeLoop(lab.controller, TeConfig(host_link_bps=5e5), period_s=0.5,
                    one_in=SAMPLE_ONE_IN, overrides=overrides)
        yield lab, LbModes(lab.controller), overrides, te
    assert_torn_down(fabric)


HASH_CHECK_PORT = 4800      # UDP destination port of the hash check's flows: INT watches these alone


def _hash_check_telemetry():
    from controller.telemetry.entries import TelemetryConfig, WatchRule
    return TelemetryConfig(int_enabled=True, watchlist=(WatchRule(protocol=17, dst_ports=(HASH_CHECK_PORT,) * 2),))


@pytest.fixture
def modes(lb_lab):
    only_in_full(lb_lab[0].target)
    _, modes, overrides, te = lb_lab
    yield modes
    te.stop()
    overrides.replace([])
    modes.set("ecmp")


def _uplinks(lab) -> dict[int, int]:
    counters = lab.controller.read_port_counters(EDGE)
    return {p: counters[p].packets if p in counters else 0 for p in UPLINKS}


def _delta(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    return {p: after[p] - before[p] for p in UPLINKS}


def _flow(sport: int, packets: int, rate_pps: float = 400.0):
    from hostagent.traffic.flows import FlowSpec
    return FlowSpec(SRC, DST, "udp", sport, 4791, packets, rate_pps=rate_pps)


def _send(lab, flows, **kw):
    from hostagent.traffic.drive import run_traffic
    hosts = {n: lab.host(n) for n in {SRC, DST}}
    return run_traffic(hosts, flows, **kw)


def _edge_pins(te) -> dict[int, int]:
    """The TE pins installed at EDGE: source port of the flow -> uplink."""
    return {p.sport: p.port for p in te.overrides.pins if p.switch == EDGE}


def _settled(lab, before, expected: int, timeout: float = 5.0) -> dict[int, int]:
    """Uplink counter deltas once ``expected`` packets have left (a slow target drains late)."""
    deadline = time.monotonic() + timeout
    while True:
        d = _delta(before, _uplinks(lab))
        if sum(d.values()) >= expected or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


def test_all_pairs_reach_and_ecmp_uses_every_core(lb_lab):
    """The fabric as it comes up (first in the module: no mode changed yet)."""
    from aifabric.lab import checks

    lab = lb_lab[0]
    only_in_full(lab.target)
    for family in ("ipv4", "ipv6"):
        reach = checks.all_pairs(lab, family)
        assert reach.pairs == 240
        assert reach.reached == 240, f"{family}: unreached {reach.failures()}"
        # one echo request in flight per host: a loss-free fabric answers every first one
        assert not reach.needed_retry, f"{family}: pairs whose first echo request was lost: {reach.needed_retry}"
    per_core, sent = checks.ecmp_over_cores(lab, flows=64, count=10)
    total = sum(per_core.values())
    # a slow target may lose part of the bursts; what matters is where the rest went
    assert total >= 0.5 * sent, f"{sent} datagrams sent, the cores forwarded only {per_core}"
    assert all(n > 0 for n in per_core.values()), f"some core carried nothing: {per_core}"
    assert max(per_core.values()) < 0.5 * total, f"one core took half of the flows: {per_core}"


def test_the_hash_library_names_every_switchs_choice(lb_lab):
    """`HashPaths` (the program in offline switches, fed the controller's state) against the
    switches' own choices, seen by INT: 16 sources x 12 source ports to hosts in other pods
    (and one in their own edge), every hop of every path (switch, ingress and egress port).
    Second in the module, on the fresh fabric (its groups' members as first inserted), and the
    module's one check on BMv2 in the default suite."""
    import random

    from controller.load_balance.hash_paths import FiveTuple, HashPaths
    from hostagent.traffic.drive import run_traffic
    from hostagent.traffic.flows import FlowSpec

    lab = lb_lab[0]
    names = [h.name for h in lab.fabric.hosts]
    rng = random.Random(46)
    flows = []
    for src in names:
        far = [n for n in names if n[:2] != src[:2]]
        near = [n for n in names if n[:4] == src[:4] and n != src]
        for k, sport in enumerate(rng.sample(range(49152, 65536), 12)):
            dst = near[0] if k == 0 else rng.choice(far)
            flows.append(FlowSpec(src, dst, "udp", sport, HASH_CHECK_PORT, 2, rate_pps=50, payload=64))
    with HashPaths.of(lab.controller) as paths:
        predicted = {f: paths.path(FiveTuple(f.src, f.dst, f.sport, f.dport)) for f in flows}
    lab.collector.reset_flows()
    results = run_traffic({n: lab.host(n) for n in names}, flows, quiet=1.0, deadline=60)
    assert all(r.complete for r in results), [{k: s[k] for k in ("src", "dst", "sport", "lost", "delivered_bytes", "error", "sender_late_s")} for s in (r.summary() for r in results if not r.complete)][:5]
    lab.collector.wait_quiet()
    seen = lab.collector.snapshot().flows
    ip = {n: str(lab.fabric.host(n).ip4.ip) for n in names}
    wrong, unseen = [], []
    for f, hops in predicted.items():
        summary = next((s for k, s in seen.items() if (k.src_ip, k.dst_ip, k.src_port, k.dst_port)
                        == (ip[f.src], ip[f.dst], f.sport, f.dport)), None)
        if summary is None:
            unseen.append(f)
            continue
        real = [(h.switch_id, h.ingress_port, h.egress_port) for h in summary.path]
        if summary.paths_seen != 1 or real != [(h.device_id, h.ingress_port, h.egress_port) for h in hops]:
            wrong.append((f.src, f.dst, f.sport, real, hops))
    assert not unseen, f"{len(unseen)} of {len(flows)} flows sent no INT report, e.g. {unseen[:2]}"
    assert not wrong, f"{len(wrong)} of {len(flows)} paths differ from the library's, e.g. {wrong[:2]}"
    assert len({hops[2].switch for hops in predicted.values() if len(hops) == 5}) == 4   # every core taken


def test_host_congestion_controls_are_fed_across_the_fabric(lb_lab):
    """TIMELY and Swift flows from pod 0 to pod 2 (hostagent.traffic.controlled): every datagram's
    acknowledgement comes back through the switches, every datagram arrives, and
    the RTTs the senders measured are the fabric's (above the veth-only floor, under a second)."""
    from hostagent.traffic import drive
    from hostagent.congestion import CcSettings
    from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec

    lab = lb_lab[0]
    for i, name in enumerate(("timely", "swift")):
        flows = [FlowSpec(SRC, DST, "udp", 51100 + i, ROCEV2_PORT, 150, rate_pps=300)]
        hosts = {n: lab.host(n) for n in (SRC, DST)}
        # a base RTT no target's RTT reaches (0.2 s): the check is the feeding, not the dynamics
        # (unit-tested), and a slow target must not drive the windows to a datagram a minute
        r = drive.run_traffic(hosts, flows, quiet=2.0, deadline=60, cc=CcSettings(name, 1e7, 0.2), timeout=60)[0]
        sent = r.sent
        assert r.complete and sent.error is None, (name, r.summary())
        assert (sent.acks, sent.ack_errors) == (150, 0), (name, r.summary())
        # a timeout is a guess on a slow target (BMv2 held a few past 40 ms): each one it gave up
        # on must then have come late, none lost
        assert sent.acks_missing == sent.acks_late, (name, r.summary())
        assert 0 < sent.rtt_min_us <= sent.rtt_sum_us / sent.acks < 1e6, (name, r.summary())


def test_ecmp_keeps_a_flow_on_one_uplink(lb_lab, modes):
    lab = lb_lab[0]
    before = _uplinks(lab)
    (r,) = _send(lab, [_flow(50001, 200)])
    d = _settled(lab, before, 200)
    assert r.complete and r.lost == 0
    assert sorted(d.values()) == [0, 200], d


def test_spray_splits_one_flow_evenly(lb_lab, modes):
    lab = lb_lab[0]
    modes.set("spray", [EDGE])
    n = 400
    before = _uplinks(lab)
    (r,) = _send(lab, [_flow(50002, n)])
    d = _settled(lab, before, n)
    assert r.complete and r.lost == 0
    assert sum(d.values()) == n
    # random member per packet: each uplink ~ Binomial(n, 1/2); 4 standard deviations
    tolerance = 4 * math.sqrt(n / 4)
    assert all(abs(v - n / 2) <= tolerance for v in d.values()), d


def _burst(lab, sport: int, packets: int) -> None:
    script = ("import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
              f"s.bind(('',{sport}));[s.sendto(b'x'*64,(sys.argv[1],4791)) for _ in range({packets})]")
    lab.host(SRC).cmd(f"python3 -c \"{script}\" {lab.fabric.host(DST).ip4.ip}")


FLOWLET_GAP_US = 50_000
UNDER_GAP, OVER_GAP = 0.5, 1.5       # pauses as a fraction of the gap: just under, just over


def _paced(lab, sport: int, pauses_s: list[float]) -> list[float]:
    """One packet, then one after each pause; the pauses as the sender kept them (seconds)."""
    script = ("import socket,sys,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
              f"s.bind(('',{sport}));d=(sys.argv[1],4791);t=[];"
              f"[(time.sleep(p),t.append(time.monotonic()),s.sendto(b'x'*64,d)) for p in {[0.0, *pauses_s]!r}];"
              "print(' '.join(str(b-a) for a,b in zip(t,t[1:])))")
    out = lab.host(SRC).cmd(f"python3 -c {shlex.quote(script)} {lab.fabric.host(DST).ip4.ip}")
    return [float(x) for x in out.split()]


def test_flowlets_stay_on_one_uplink_through_pauses_just_under_the_gap(lb_lab, modes):
    """Packets half a gap apart, for three gaps: one flowlet (a flowlet that ends by age, or a
    gap taken ten times too short, would move it). A pause the sender itself stretched past 90%
    of the gap (a busy machine) proves nothing: that round is not counted."""
    lab = lb_lab[0]
    modes.set("flowlet", [EDGE], gap_us=FLOWLET_GAP_US)
    gap_s = FLOWLET_GAP_US / 1e6
    counted = 0
    for _ in range(4):
        time.sleep(3 * gap_s)                 # the flowlet before is over
        before = _uplinks(lab)
        kept = _paced(lab, 50004, [UNDER_GAP * gap_s] * 6)
        d = _settled(lab, before, 7)
        if max(kept) >= 0.9 * gap_s:
            continue
        counted += 1
        assert sorted(d.values()) == [0, 7], f"a flowlet moved within pauses of {kept} s (gap {gap_s} s): {d}"
    assert counted >= 2, "the sender kept too few pauses under the gap to tell"


def test_flowlets_move_after_pauses_just_over_the_gap(lb_lab, modes):
    """16 packets a gap and a half apart: each starts a flowlet of its own, on an uplink drawn
    anew, so both uplinks carry some (all 16 on one: probability 2^-15; a gap taken twice too
    long would keep them all on the first)."""
    lab = lb_lab[0]
    modes.set("flowlet", [EDGE], gap_us=FLOWLET_GAP_US)
    gap_s = FLOWLET_GAP_US / 1e6
    time.sleep(3 * gap_s)
    before = _uplinks(lab)
    kept = _paced(lab, 50003, [OVER_GAP * gap_s] * 15)
    d = _settled(lab, before, 16)
    assert sum(d.values()) == 16, d
    assert all(d.values()), f"pauses of {min(kept):.3f}..{max(kept):.3f} s (gap {gap_s} s) never moved the flow: {d}"


def test_flowlets_keep_a_burst_on_one_uplink(lb_lab, modes):
    lab = lb_lab[0]
    modes.set("flowlet", [EDGE], gap_us=FLOWLET_GAP_US)
    for _ in range(4):                        # bursts of back-to-back packets
        before = _uplinks(lab)
        _burst(lab, 50005, 5)
        d = _settled(lab, before, 5)
        assert sorted(d.values()) == [0, 5], f"a burst was split: {d}"   # one flowlet, one uplink
        time.sleep(3 * FLOWLET_GAP_US / 1e6)


def test_a_te_pin_wins_over_spraying_and_is_removed(lb_lab, modes):
    from controller.load_balance import Pin
    lab, _, overrides, _ = lb_lab
    modes.set("spray", [EDGE])
    src, dst = lab.fabric.host(SRC), lab.fabric.host(DST)
    pin = Pin(EDGE, str(src.ip4.ip), str(dst.ip4.ip), 17, 50004, 4791, port=UPLINKS[1])
    overrides.replace([pin])
    before = _uplinks(lab)
    (r,) = _send(lab, [_flow(50004, 200)])
    d = _settled(lab, before, 200)
    assert r.complete and d == {UPLINKS[0]: 0, UPLINKS[1]: 200}, d
    overrides.replace([])                     # stale: removed, spraying again
    before = _uplinks(lab)
    (r,) = _send(lab, [_flow(50004, 200)])
    d = _settled(lab, before, 200)
    assert r.complete and min(d.values()) > 0, d


def test_changing_modes_under_traffic_loses_nothing(lb_lab, modes):
    lab = lb_lab[0]
    stop = threading.Event()

    def flip():
        order = [("spray", {}), ("flowlet", {"gap_us": 1000}), ("ecmp", {})]
        i = 0
        while not stop.is_set():
            mode, kw = order[i % len(order)]
            modes.set(mode, **kw)
            i += 1
            stop.wait(0.3)

    t = threading.Thread(target=flip)
    t.start()
    try:
        (r,) = _send(lab, [_flow(50005, 600, rate_pps=300)])
    finally:
        stop.set()
        t.join()
    assert r.complete and r.lost == 0, r.summary()


def test_the_edge_switch_samples_one_packet_in_n_to_the_controller(lb_lab, modes):
    """Random sampling: the flow's samples ~ Binomial(n, 1/N), each counted as N frames."""
    from controller.load_balance.te.flows import Flow
    lab, sampler = lb_lab[0], lb_lab[3].sampler
    src, dst = lab.fabric.host(SRC), lab.fabric.host(DST)
    flow = Flow.between(src, dst, 50006, 4791)
    n = 400
    sampler.start()
    try:
        taken0 = sampler.switch_samples()
        (r,) = _send(lab, [_flow(50006, n)])
        assert r.complete
        taken = sampler.switch_samples() - taken0
        deadline = time.monotonic() + 5
        while sampler.counters.samples + sampler.counters.ignored < taken and time.monotonic() < deadline:
            time.sleep(0.1)                     # packet-ins still on their way
        counts = sampler()
    finally:
        sampler.stop()
    frame = r.flow.payload + 42
    samples, rest = divmod(counts.bytes_by_flow.get(flow, 0), SAMPLE_ONE_IN * frame)
    assert rest == 0, "every sample counts as N frames of its size"
    p = 1 / SAMPLE_ONE_IN
    assert abs(samples - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (samples, counts.bytes_by_flow)
    assert sampler.counters.samples + sampler.counters.ignored == taken, (sampler.counters, taken)
    assert set(counts.bytes_by_flow) <= {flow}, counts.bytes_by_flow


def test_the_te_loop_pins_the_elephants_it_sampled(lb_lab, modes):
    from controller.load_balance.te.flows import Flow
    lab, te = lb_lab[0], lb_lab[3]
    src, dst = lab.fabric.host(SRC), lab.fabric.host(DST)
    # 12 s of traffic: room for six watch windows after the first round that pins both
    flows = [_flow(50007, 2400, rate_pps=200), _flow(50008, 2400, rate_pps=200)]
    expected = {Flow.between(src, dst, f.sport, f.dport) for f in flows}

    def both_pinned():       # a round may fall at the flows' start and see only one of them
        return next((r for r in te.rounds if r.desired and {e.flow for e in r.elephants} == expected), None)

    results: list = []
    sender = threading.Thread(target=lambda: results.extend(_send(lab, flows)))
    te.start()
    sender.start()
    try:
        deadline = time.monotonic() + 20
        while both_pinned() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        pinned = both_pinned()
        assert pinned is not None, f"no TE round pinned both flows: {[(r.number, r.elephants) for r in te.rounds]}"
        # Watch the uplinks for a second in which no round changed a pin (a later round may move a
        # flow when its sampled rate wanders, as it does for seconds on a loaded machine: a stalled
        # sender or late packet-ins leave a flow under the threshold for a round); the traffic
        # must follow the pins in force then.
        for _ in range(6):
            time.sleep(0.5)                      # pins written, queued packets gone
            rounds_before, in_force = len(te.rounds), _edge_pins(te)
            before = _uplinks(lab)
            time.sleep(1.0)
            window = _delta(before, _uplinks(lab))
            if not any(r.changed for r in te.rounds[rounds_before:]):
                break
        else:
            pytest.fail(f"the pins kept changing: {[(r.number, r.desired) for r in te.rounds]}")
    finally:
        sender.join()
        te.stop()
    ports = {e.egress_port for e in pinned.desired.values() if e.switch == EDGE}
    assert len(ports) == 1, pinned.desired           # both fit on the first path with room
    assert set(in_force) == {f.sport for f in flows}, in_force
    used = set(in_force.values())
    assert all(window[p] > 0 for p in used) and all(v == 0 for p, v in window.items() if p not in used), \
        (window, in_force)
    assert all(r.complete and r.lost == 0 for r in results), [(r.summary()["lost"], r.summary()) for r in results]
    assert not te.overrides.pins                     # stopped: every pin removed


def test_no_control_port_reachable_from_other_machines(lb_lab):
    """Issue 29 (5): the lab's TCP listeners in this machine's namespace (every target's
    P4Runtime and run-time control servers, the controller's) listen on loopback; the only
    ones on every address are BMv2's Thrift servers, which cannot be bound to one, and each of
    those ports is closed to other machines by the lab's nftables rule. A connection from a
    network namespace on a veth link (another machine's place) reaches none of them, while it
    does reach a listener of the test's own, on every address and closed by nothing."""
    from exposure import lab_pids, outside_namespace, probe_from, tcp_listeners, wildcard_listener
    from emulation import control_ports
    from emulation.p4switch import RUN_DIR

    lab = lb_lab[0]
    listeners = tcp_listeners(lab_pids(RUN_DIR))
    targets = [sw for sw in lab.net.switches if getattr(sw, "process", None) is not None]
    grpc_ports = {sw.grpc_port for sw in targets}
    assert grpc_ports <= {l.port for l in listeners}, f"the lab's P4Runtime ports are not all seen: {listeners}"
    thrift = {(sw.process.pid, sw.thrift_port) for sw in targets if sw.target_kind == "bmv2"}
    closed = control_ports.closed()
    exposed = [str(l) for l in listeners if l.wildcard and not ((l.pid, l.port) in thrift and l.port in closed)]
    assert not exposed, f"listening on every address, open to other machines: {exposed}"
    with outside_namespace() as ns, wildcard_listener() as canary:
        seen = probe_from(ns, [canary, *{l.port for l in listeners}])
    assert seen[(4, canary)] == seen[(6, canary)] == "accepted", f"the probe reaches nothing: {seen}"
    reached = sorted({f"IPv{fam} {port}" for (fam, port), how in seen.items() if how == "accepted" and port != canary})
    assert not reached, f"another machine reaches the lab's control ports: {reached}"
