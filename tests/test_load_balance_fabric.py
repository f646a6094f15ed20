"""Load-balancing modes and TE overrides on a real k=4 fat-tree (slow: 20 switches).

Each check looks at p0e0, an edge switch whose two uplinks (ports 3 and 4) form the ECMP group
of every remote destination, and reads its egress port counters around the traffic it sends:
spray splits one flow over both uplinks evenly, ECMP keeps it on one, a flowlet stays on one
uplink while its gaps are short and moves after long pauses, a TE pin wins over spraying and
goes away when removed, and changing modes under a running flow loses nothing.
"""
from __future__ import annotations

import math
import os
import threading
import time

import pytest
from targets import FABRIC_TARGETS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]

EDGE, UPLINKS = "p0e0", (3, 4)
SRC, DST = "p0e0h0", "p2e1h1"


@pytest.fixture(scope="module", params=FABRIC_TARGETS)
def lb_lab(request):
    from aifabric.lab import Lab
    from controller.lb import LbModes, TeOverrides
    from topologies.fabric import fat_tree

    with Lab(fat_tree(4), target=request.param) as lab:
        yield lab, LbModes(lab.controller), TeOverrides(lab.controller)


@pytest.fixture
def modes(lb_lab):
    _, modes, overrides = lb_lab
    yield modes
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


def _settled(lab, before, expected: int, timeout: float = 5.0) -> dict[int, int]:
    """Uplink counter deltas once ``expected`` packets have left (a slow target drains late)."""
    deadline = time.monotonic() + timeout
    while True:
        d = _delta(before, _uplinks(lab))
        if sum(d.values()) >= expected or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


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


def test_flowlets_move_only_after_long_pauses(lb_lab, modes):
    lab = lb_lab[0]
    gap_us = 50_000
    modes.set("flowlet", [EDGE], gap_us=gap_us)
    used = []
    for _ in range(16):                       # bursts of back-to-back packets, 150 ms apart
        before = _uplinks(lab)
        _burst(lab, 50003, 5)
        d = _settled(lab, before, 5)
        assert sorted(d.values()) == [0, 5], f"a burst was split: {d}"   # one flowlet, one uplink
        used.append(max(d, key=d.get))
        time.sleep(gap_us * 3 / 1e6)
    # a new flowlet after every pause: both uplinks seen (all 16 alike: probability 2^-15)
    assert set(used) == set(UPLINKS), used


def test_a_te_pin_wins_over_spraying_and_is_removed(lb_lab, modes):
    from controller.lb import Pin
    lab, _, overrides = lb_lab
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
