"""A packet leaves at once when a queue would hold only it and no packet waits in the switch
(packet_path.py); otherwise it is queued and the loop sends it when its time has come. Either
way the frames leave in order and with the queueing metadata simple_switch gives them
(tests/p4/queueing.p4 writes it into a header of every frame it sends)."""
from __future__ import annotations

import struct
import time
from pathlib import Path

from scapy.layers.l2 import Ether
from scapy.packet import raw

from softswitch.dataplane import Dataplane
from softswitch.pipeline.program import Program
from softswitch.runtime.tables import Entry

REPO = Path(__file__).resolve().parents[2]
QUEUEING_JSON = REPO / "tests/p4/build/queueing.json"
UPTIME_US = 10_000_000        # the switch has run 10 s: a port's first packet at 10 pps is due at once


def _switch(program: Path = QUEUEING_JSON) -> tuple[Dataplane, list[tuple[int, bytes]]]:
    """Ports 1-3 named only; ingress port 1 forwards to 2, 3 to 3 (``program``'s fwd table and
    set_port action); what is sent is recorded."""
    dp = Dataplane({1: None, 2: None, 3: None})
    sent: list[tuple[int, bytes]] = []
    dp.transmit = lambda port, frame: sent.append((port, frame))    # bound when the program is set
    dp.start_ns = time.monotonic_ns() - UPTIME_US * 1000
    prog = Program(program.read_bytes())
    fwd = next(t for t in prog.tables.values() if t.name.endswith("fwd"))
    set_port = next(a for a in prog.actions.values() if a.name.endswith("set_port"))
    fwd.insert(Entry((1,), 0, set_port, (2,)))
    fwd.insert(Entry((3,), 0, set_port, (3,)))
    dp.set_program(prog)
    return dp, sent


def _frame(seq: int, size: int = 64) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", type=0x88B5) / seq.to_bytes(4, "big") / (b"x" * (size - 18)))


def _seq_and_depths(frame: bytes) -> tuple[int, int, int, int]:
    """(sequence number, enq_qdepth, deq_qdepth, deq_timedelta) of a frame the program sent:
    Ethernet, then its q header (4 x 32 bits, 2 x 48, 8, 16), then the original payload."""
    enq_qdepth, deq_qdepth, _, deq_timedelta = struct.unpack_from("!IIII", frame, 14)
    seq = int.from_bytes(frame[14 + 31:14 + 35], "big")
    return seq, enq_qdepth, deq_qdepth, deq_timedelta


def test_an_unlimited_port_sends_at_once_with_nothing_queued():
    dp, sent = _switch()
    for seq in range(3):
        dp._path.arrival(1, _frame(seq))
        assert dp.queued == 0                     # never queued: the loop has nothing to look for
    assert [(port, _seq_and_depths(f)) for port, f in sent] == [(2, (seq, 0, 0, 0)) for seq in range(3)]


def test_a_rate_limited_port_queues_behind_its_first_packet_and_no_packet_overtakes():
    dp, sent = _switch()
    dp.set_queue_rate(10, 2)                      # a packet every 100 ms
    for seq in range(3):
        dp._path.arrival(1, _frame(seq))
    assert len(sent) == 1 and dp.queued == 2      # the first was due at once, two wait
    dp._path.arrival(3, _frame(3))                # port 3 has no limit, yet a packet waits: queued
    assert dp.queued == 3 and len(sent) == 1
    dp._drain_queues()                            # port 3's packet is due; port 2's are not yet
    assert [port for port, _ in sent] == [2, 3] and dp.queued == 2
    deadline = time.monotonic() + 2
    while dp.queued and time.monotonic() < deadline:
        time.sleep(0.001)
        dp._drain_queues()
    assert dp.queued == 0
    got = [(port, _seq_and_depths(f)) for port, f in sent]
    assert [(port, seq) for port, (seq, *_) in got] == [(2, 0), (3, 3), (2, 1), (2, 2)]
    assert [enq for _, (_, enq, _, _) in got] == [0, 0, 0, 1]    # the queue's depth as each arrived
    assert [waited >= 50_000 for _, (_, _, _, waited) in got] == [False, False, True, True]   # waited their turn
