"""fabric.p4's ECN marking under a real queue: RED on enq_qdepth (p4src/README.md, "Congestion
signals: ECN and INT").

One switch routes bursts from port 1 to port 2, whose egress queue is drained at
`RATE_PPS` (softswitch ``--queue-rate``; BMv2 ``set_queue_rate``), so each burst builds a queue
from 0 to about its length. Each packet's depth at enqueue is read from the INT hop the switch
adds (the flow is on the INT watchlist; the hop's queue occupancy is ``enq_qdepth``, the very
value ECN decides on), its marking from the ECN bits it leaves with. Then:

* non-ECT packets are never marked (0%);
* ECT packets at depth <= Kmin are never marked (0%), above Kmax always (100%);
* in between, the number marked is the sum of the per-packet probabilities
  p(d) = Pmax/65536 * (d - Kmin) / (Kmax - Kmin), within 4 standard deviations of that
  Poisson-binomial count (sigma^2 = sum p(1 - p)): a correct implementation fails this about
  once in 16000 runs. The switch draws r in [0, 65535] and marks when
  r * (Kmax - Kmin) < Pmax * (d - Kmin), whose probability differs from p(d) by less than 1/65536;
* the ``ecn_marked`` counter of port 2 equals the CE marks seen.

The checks need the queue to have been past Kmax and between Kmin and Kmax often enough: the
bursts (frames built beforehand, sent back to back) go on until it was, and on a machine too busy
to send a burst faster than the queue drains, the test is skipped saying what it measured.

On BMv2 (marker ``bmv2``) the same checks run with simple_switch_CLI's queue rate.
"""
from __future__ import annotations

import math
import os
import shutil
import socket
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from controller import entries as E
from controller.routing import NextHop
from controller.switch import SwitchConnection
from controller.telemetry import entries as TE
from scenarios.runner import load_p4info, program_files
from emulation.bmv2_cli import run_cli
from emulation.testbed import CONNECT_TIMEOUT_S, Testbed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, raw sockets)")

ROUTER_MAC, HOST_A, HOST_B = "00:00:00:00:aa:aa", "00:00:00:00:00:0a", "00:00:00:00:00:0b"
OUT = 2
RATE_PPS = 200
BURST, BURSTS = 60, 12              # a burst fits the default queue depth (64); at least BURSTS bursts
MAX_BURSTS = 40                     # ... and at most this many to see the queue past Kmax
MIN_HIGH, MIN_MID = 30, 200         # ECT packets the bursts must give above Kmax, between Kmin and Kmax
# Frames of a burst 0.5 ms apart: ten times faster than the queue drains (5 ms), so it still
# builds to ~55, and slow enough for BMv2, which lost a third of back-to-back bursts here
SEND_GAP_S = 0.0005
# A burst drains in BURST / RATE_PPS = 0.3 s; a switch starved on a busy machine can stall past a
# second. Its late frames still count (taken before the next burst, not drained away), and a
# burst is waited for this long after its last frame, so the next one finds the queue empty.
QUIET_S = 3.0
KMIN, KMAX, PMAX = 6, 38, 40000     # Pmax = 0.61
ECT0, ECT1, NOT_ECT, CE = 2, 1, 0, 3
INT_AT = 14 + 20 + 8                # the flow is IPv4/UDP: INT shim after the UDP header
QOCC_AT = INT_AT + 16 + 12          # queue id (1 byte) + occupancy (3 bytes) of the first hop


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frame(i: int, ecn: int) -> bytes:
    return raw(Ether(dst=ROUTER_MAC, src=HOST_A) / IP(src="10.0.1.1", dst="10.0.2.1", id=i, tos=ecn)
               / UDP(sport=4000, dport=4791) / (b"e" * 40))


def _ecn_of(i: int) -> int:
    return (NOT_ECT, ECT0, ECT1, ECT0, ECT1)[i % 5]


def p_mark(depth: int) -> float:
    if depth <= KMIN:
        return 0.0
    if depth > KMAX:
        return 1.0
    return PMAX / 65536 * (depth - KMIN) / (KMAX - KMIN)


class Bursts:
    """What the bursts gave: (sent ECN, depth, ECN out) per packet received, how many packets
    met a queue above Kmax and between Kmin and Kmax, and how long each burst took to send."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []
        self.send_ms: list[float] = []

    def take(self, frames: list[bytes]) -> None:
        """Each of the bursts' frames among ``frames`` (others, such as the kernel's own, left)."""
        for f in frames:
            p = Ether(f)
            if UDP in p and p[UDP].dport == 4791:
                depth = int.from_bytes(f[QOCC_AT + 1:QOCC_AT + 4], "big")
                self.seen.append((_ecn_of(p[IP].id % BURST), depth, p[IP].tos & 3))

    def count(self, low: int, high: float) -> int:
        return sum(1 for sent, d, _ in self.seen if sent != NOT_ECT and low < d <= high)

    def enough(self) -> bool:
        """The queue went past Kmax (MIN_HIGH ECT packets found it there) and enough ECT packets
        met it between Kmin and Kmax for the statistical check."""
        return self.count(KMAX, math.inf) >= MIN_HIGH and self.count(KMIN, KMAX) >= MIN_MID

    def why_not(self) -> str:
        drain_ms = 1000 / RATE_PPS
        return (f"the machine could not build the queue: after {len(self.send_ms)} bursts of {BURST}, "
                f"{self.count(KMAX, math.inf)} ECT packets above Kmax (need {MIN_HIGH}) and "
                f"{self.count(KMIN, KMAX)} between Kmin and Kmax (need {MIN_MID}); a burst took "
                f"{sorted(self.send_ms)[len(self.send_ms) // 2]:.0f} ms to send (median), while the queue "
                f"drains a packet every {drain_ms:.0f} ms")


def _run(target: str) -> tuple[Bursts, int]:
    """The bursts' packets, and the ecn_marked counter of OUT. Bursts go on (up to MAX_BURSTS)
    until the queue has been past Kmax and long enough between Kmin and Kmax: on a busy machine
    a burst can leave the sender so slowly that the queue never builds."""
    json_path, p4info_path = program_files("fabric")
    if not json_path.exists():
        pytest.skip(f"{json_path} is not built")
    info = load_p4info(p4info_path)
    frames = [[_frame(b * BURST + i, _ecn_of(i)) for i in range(BURST)] for b in range(MAX_BURSTS)]
    with Testbed(nports=2, prefix=f"ecn{os.getpid() % 1000}{target[0]}") as tb:
        thrift = _free_port() if target == "bmv2" else None
        extra = ("--queue-rate", f"{RATE_PPS}@{OUT}") if target == "softswitch" else ()
        t = tb.start_target(target, device_id=1, extra_args=extra, thrift_port=thrift)
        if target == "bmv2":
            run_cli(thrift, [f"set_queue_rate {RATE_PPS} {OUT}"])
        with SwitchConnection(f"{target}:ecn", t.grpc_addr, device_id=1) as conn:
            conn.connect(timeout=CONNECT_TIMEOUT_S)
            conn.set_pipeline(info, json_path.read_bytes())
            ents = [E.my_station(info, ROUTER_MAC), E.route_member(info, 1, NextHop(OUT, ROUTER_MAC, HOST_B, "b")),
                    E.ecmp_group(info, 1, [1]), E.next_entry(info, 1, 1), E.route(info, "10.0.2.0/24", 1),
                    E.entity(info.table_entry(TE.ECN_CONFIG, {"egress_port": OUT}, action=TE.ECN_SET_THRESHOLDS,
                                              params={"kmin": KMIN, "kmax": KMAX, "pmax": PMAX})),
                    E.entity(info.table_entry(TE.INT_WATCHLIST, {"ip_dst": ("10.0.2.0", 0xFFFFFF00)},
                                              action=TE.INT_MARK_SOURCE, params={"max_hop": 4}, priority=1))]
            conn.insert(ents)
            bursts = Bursts()
            for burst in frames:
                if len(bursts.send_ms) >= BURSTS and bursts.enough():
                    break
                tb.ports[1].drain()
                bursts.take(tb.ports[OUT].receive(timeout=0.05, quiet=0.05))    # a late one of the last burst
                started = time.monotonic()
                for f in burst:
                    tb.ports[1].send(f)
                    time.sleep(SEND_GAP_S)
                bursts.send_ms.append(1000 * (time.monotonic() - started))
                bursts.take(tb.ports[OUT].receive(timeout=10.0, count=BURST, quiet=QUIET_S))
            bursts.take(tb.ports[OUT].receive(timeout=QUIET_S, quiet=QUIET_S))
            marked = conn.read_counter(info.counter_id(TE.ECN_MARKED), OUT).get(OUT, (0, 0))[0]
    if not bursts.enough():
        pytest.skip(bursts.why_not())
    return bursts, marked


def _check(bursts: Bursts, counter: int) -> None:
    seen = bursts.seen
    sent = BURST * len(bursts.send_ms)
    assert len(seen) >= sent * 0.9, f"only {len(seen)} of {sent} packets came out"
    not_ect = [out for sent, _, out in seen if sent == NOT_ECT]
    assert not_ect and all(out == NOT_ECT for out in not_ect), "a non-ECT packet was marked"
    assert all(out in (sent, CE) for sent, _, out in seen), "ECN bits changed to something other than CE"
    ect = [(d, out) for sent, d, out in seen if sent != NOT_ECT]
    low = [out for d, out in ect if d <= KMIN]
    high = [out for d, out in ect if d > KMAX]
    mid = [(d, out) for d, out in ect if KMIN < d <= KMAX]
    assert low and all(out != CE for out in low), f"{sum(o == CE for o in low)} of {len(low)} marked at depth <= Kmin"
    assert high and all(out == CE for out in high), f"{sum(o != CE for o in high)} of {len(high)} not marked above Kmax"
    expected = sum(p_mark(d) for d, _ in mid)
    sigma = math.sqrt(sum(p_mark(d) * (1 - p_mark(d)) for d, _ in mid))
    observed = sum(out == CE for _, out in mid)
    assert abs(observed - expected) <= 4 * sigma + 1, \
        f"{observed} marked between Kmin and Kmax, expected {expected:.1f} +- {4 * sigma:.1f} (4 sigma)"
    # the probability grows with the depth: the upper half of the range marks more
    half = (KMIN + KMAX) / 2
    lo = [out == CE for d, out in mid if d <= half]
    hi = [out == CE for d, out in mid if d > half]
    assert sum(hi) / len(hi) > sum(lo) / len(lo), "marking does not grow with the queue depth"
    assert counter == sum(out == CE for _, out in ect), f"ecn_marked {counter}, CE seen {sum(o == CE for _, o in ect)}"


def test_red_marking_softswitch():
    _check(*_run("softswitch"))


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")
def test_red_marking_bmv2():
    _check(*_run("bmv2"))
