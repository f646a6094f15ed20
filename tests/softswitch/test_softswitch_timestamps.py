"""softswitch sets its timestamps as simple_switch does: truncated to their fields' widths, so
after 2^32 µs (71 minutes) of uptime enq_timestamp wraps and deq_timedelta is still the time the
packet waited (BMv2: now less the truncated enqueue time, truncated). A program reading the raw
field (a widening cast, a comparison) sees what it would see on BMv2."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import raw

from softswitch.dataplane import Dataplane
from softswitch.pipeline.program import Program
from softswitch.runtime.tables import Entry

REPO = Path(__file__).resolve().parents[2]
QUEUEING_JSON = REPO / "tests/p4/build/queueing.json"
UPTIME_US = 2**32 + 5_000_000          # 71 minutes and 5 s
NEAR_US = 1_000_000                    # the test's own run time, generously


def test_timestamps_wrap_at_their_widths_after_71_minutes():
    dp = Dataplane({1: None, 2: None})
    sent: list[tuple[int, bytes]] = []
    dp.transmit = lambda port, frame: sent.append((port, frame))    # bound when the program is set
    dp.start_ns = time.monotonic_ns() - UPTIME_US * 1000
    prog = Program(QUEUEING_JSON.read_bytes())
    at_egress: list[list] = []
    run_egress = prog.egress
    prog.egress = lambda F: (at_egress.append(F[:]), run_egress(F))[1]
    fwd = next(t for t in prog.tables.values() if t.name.endswith("fwd"))
    set_port = next(a for a in prog.actions.values() if a.name.endswith("set_port"))
    fwd.insert(Entry((1,), 0, set_port, (2,)))
    dp.set_program(prog)

    dp._path.arrival(1, raw(Ether(dst="00:00:00:00:00:02", type=0x88B5) / (b"x" * 50)))
    dp._drain_queues()

    assert [port for port, _ in sent] == [2]
    F, s = at_egress[0], prog.intrinsics
    uptime = dp.now_us()
    assert F[s["enq_timestamp"]] == pytest.approx(uptime % 2**32, abs=NEAR_US)          # wrapped, not 2^32 + ...
    assert 0 <= F[s["deq_timedelta"]] < 1_000_000                          # waited well under a second
    assert F[s["ingress_global_timestamp"]] == pytest.approx(uptime, abs=NEAR_US)       # 48 bits: no wrap for 8.9 years
    assert F[s["egress_global_timestamp"]] == pytest.approx(uptime, abs=NEAR_US)

