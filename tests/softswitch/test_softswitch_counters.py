"""An indexed counter counts packets and their ingress bytes at the index the program names,
from the generated code itself (primitives.p_count), and goes on counting after the array is
reset: the reset empties its cells in place. (That the counts match BMv2's is the
differential P4Runtime test's.)"""
from __future__ import annotations

from pathlib import Path

from scapy.layers.l2 import Ether
from scapy.packet import raw

from softswitch.dataplane import Dataplane
from softswitch.pipeline.program import Program
from softswitch.runtime.tables import Entry

REPO = Path(__file__).resolve().parents[2]
STATEFUL_JSON = REPO / "tests/p4/build/stateful.json"


def _frame(idx: int, pad: int) -> bytes:
    """An st packet (tests/p4/stateful.p4): index idx (the program counts at idx & 0xF)."""
    st = bytes([idx]) + bytes(18)                # idx, add, then the program's outputs
    return raw(Ether(dst="00:00:00:00:00:02", type=0x88B5) / st / (b"x" * pad))


def test_counts_land_at_the_index_and_go_on_after_a_reset():
    dp = Dataplane({1: None, 2: None})
    dp.transmit = lambda port, frame: None
    prog = Program(STATEFUL_JSON.read_bytes())
    fwd = next(t for t in prog.tables.values() if t.name.endswith("fwd"))
    fwd.insert(Entry((1,), 0, next(a for a in prog.actions.values() if a.name.endswith("set_port")), (2,)))
    dp.set_program(prog)
    ctr = next(c for c in prog.counters.values() if c.name.endswith("ctr"))

    for idx, pad in ((3, 50), (3, 60), (0x15, 70)):      # 0x15 counts at 5
        dp._path.arrival(1, _frame(idx, pad))
    assert [(i, ctr.read(i)) for i in range(ctr.size) if ctr.read(i) != (0, 0)] == \
        [(3, (2, 2 * 33 + 110)), (5, (1, 33 + 70))]      # 33 bytes of headers a frame
    ctr.reset()
    dp._path.arrival(1, _frame(3, 50))
    assert [(i, ctr.read(i)) for i in range(ctr.size) if ctr.read(i) != (0, 0)] == [(3, (1, 83))]
