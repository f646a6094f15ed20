"""The aggregator's semantics as pure logic: an incoming packet in, the packets it causes out.

This is the parameter server's core and the reference model fabric.p4's aggregation is tested
against (p4src/README.md, "In-network aggregation"). Per (slot, set) it keeps a bitmap of
the children that contributed, their count, the max exponent, the OVERFLOW and DONE flags,
the job's frame_values int32 accumulators and, as fabric.p4's `agg_seq` does, the round's seq.
A packet whose frame_values is not the job's is rejected, as the switches refuse it.

Headers of the packets it sends are the incoming packet's with pkt_type, flags, exponent, seq
(the round's) and, towards a parent, worker_id rewritten, as a switch rewriting the packet in
place does. Because results carry the round's seq, a retransmission that meets a round of
another chunk (state left by an earlier run of the job) is answered with a seq the worker
rejects as stale, never with someone else's sums under its own seq; a RESULT from the parent
for another chunk than the set's round is refused.

One addition to the spec: a contribution's own OVERFLOW flag is kept (ORed into the round's
flags). Workers never set it, so for them nothing changes; a switch's partial sum that
saturated keeps saying so up the tree instead of reaching the workers as a plain wrong sum.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

import numpy as np

from hostagent.collectives.aggregation.protocol import (
    DEFAULT_FRAME_VALUES,
    FLAG_OVERFLOW,
    INT32_MAX,
    INT32_MIN,
    MAX_CHILDREN,
    AggPacket,
    PktType,
    check_frame_values,
)


class Dest(enum.Enum):
    SENDER = "sender"  # only the child the packet came from
    CHILDREN = "children"  # every child (the multicast group)
    PARENT = "parent"  # the next aggregator up the tree


@dataclass(frozen=True)
class Outgoing:
    dest: Dest
    packet: AggPacket


class RejectedPacket(ValueError):
    """A well-formed packet this aggregator cannot take (other job, slot out of range, ...)."""


@dataclass
class AggregatorStats:
    contributions: int = 0  # counted into a round
    retransmissions: int = 0  # a child's bit was already set
    answered: int = 0  # retransmissions answered from a DONE round
    partial_resends: int = 0  # retransmissions that re-sent a partial up
    dropped: int = 0  # retransmissions into an incomplete round
    rounds: int = 0  # rounds completed (results or partials sent)
    overflows: int = 0  # rounds that saturated


@dataclass
class _Cell:
    acc: np.ndarray  # the frame's accumulators
    bitmap: int = 0
    count: int = 0
    exponent: int = 0
    overflow: bool = False
    done: bool = False
    seq: int = 0  # the chunk of the current round


def saturating_add(acc: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, bool]:
    """int32 sum saturated at INT32_MIN/INT32_MAX, and whether any element saturated."""
    total = acc + values  # wraps around; an element overflowed where its sign differs from both operands'
    wrapped = ((acc ^ total) & (values ^ total)) < 0
    if not wrapped.any():
        return total, False
    total[wrapped] = np.where(acc[wrapped] < 0, INT32_MIN, INT32_MAX)
    return total, True


class Aggregator:
    """One job's aggregator. `parent_index` None makes it the root (it sends RESULTs);
    otherwise it sends its partial sums up as CONTRIB with worker_id = parent_index.
    `frame_values`: the values every packet of the job carries."""

    def __init__(self, job_id: int, fan_in: int, slots: int, parent_index: int | None = None,
                 frame_values: int = DEFAULT_FRAME_VALUES) -> None:
        if not 1 <= fan_in <= MAX_CHILDREN:
            raise ValueError(f"job {job_id}: fan_in {fan_in} is outside 1..{MAX_CHILDREN}")
        if not 1 <= slots <= 0xFFFF:
            raise ValueError(f"job {job_id}: slots {slots} is outside 1..65535")
        if parent_index is not None and not 0 <= parent_index < MAX_CHILDREN:
            raise ValueError(f"job {job_id}: parent_index {parent_index} is outside 0..{MAX_CHILDREN - 1}")
        try:
            self.frame_values = check_frame_values(frame_values)
        except ValueError as exc:
            raise ValueError(f"job {job_id}: {exc}") from None
        self.job_id = job_id
        self.fan_in = fan_in
        self.slots = slots
        self.parent_index = parent_index
        self.stats = AggregatorStats()
        self._cells = [(self._cell(), self._cell()) for _ in range(slots)]

    def _cell(self) -> _Cell:
        return _Cell(np.zeros(self.frame_values, dtype=np.int32))

    @property
    def is_root(self) -> bool:
        return self.parent_index is None

    def cell_state(self, slot: int, set_id: int) -> tuple[int, int, int, bool, bool, np.ndarray]:
        """(bitmap, count, exponent, overflow, done, sums copy) of one (slot, set), for tests."""
        c = self._cells[slot][set_id]
        return c.bitmap, c.count, c.exponent, c.overflow, c.done, c.acc.copy()

    def handle(self, packet: AggPacket) -> list[Outgoing]:
        h = packet.header
        if h.job_id != self.job_id:
            raise RejectedPacket(f"packet of job {h.job_id} given to the aggregator of job {self.job_id}")
        if h.slot >= self.slots:
            raise RejectedPacket(f"job {self.job_id}: slot {h.slot} is not below {self.slots}")
        if h.frame_values != self.frame_values:
            raise RejectedPacket(f"job {self.job_id}: a frame of {h.frame_values} values; the job's frames "
                                 f"carry {self.frame_values}")
        if h.pkt_type == PktType.RESULT:
            return self._from_parent(packet)
        if h.worker_id >= self.fan_in:
            raise RejectedPacket(f"job {self.job_id}: worker_id {h.worker_id} is not below fan_in {self.fan_in}")
        return self._contribution(packet)

    def _contribution(self, packet: AggPacket) -> list[Outgoing]:
        h = packet.header
        bit = 1 << h.worker_id
        cells = self._cells[h.slot]
        cells[1 - h.set_id].bitmap &= ~bit  # the child has moved on from the other set's round
        cell = cells[h.set_id]
        incoming_overflow = bool(h.flags & FLAG_OVERFLOW)
        if cell.bitmap & bit:
            self.stats.retransmissions += 1
            if cell.done:
                self.stats.answered += 1
                return [Outgoing(Dest.SENDER, self._result(cell, packet))]
            if cell.count == self.fan_in:
                self.stats.partial_resends += 1
                return [Outgoing(Dest.PARENT, self._partial(cell, packet))]
            self.stats.dropped += 1
            return []
        self.stats.contributions += 1
        if cell.count in (0, self.fan_in):
            cell.count, cell.bitmap, cell.exponent, cell.seq = 1, bit, h.exponent, h.seq
            cell.overflow, cell.done = incoming_overflow, False
            cell.acc = packet.values.astype(np.int32, copy=True)
        else:
            cell.count += 1
            cell.bitmap |= bit
            cell.exponent = max(cell.exponent, h.exponent)
            cell.acc, saturated = saturating_add(cell.acc, packet.values)
            cell.overflow = cell.overflow or saturated or incoming_overflow
        if cell.count < self.fan_in:
            return []
        self.stats.rounds += 1
        self.stats.overflows += cell.overflow
        if self.is_root:
            cell.done = True
            return [Outgoing(Dest.CHILDREN, self._result(cell, packet))]
        return [Outgoing(Dest.PARENT, self._partial(cell, packet))]

    def _from_parent(self, packet: AggPacket) -> list[Outgoing]:
        h = packet.header
        if self.is_root:
            raise RejectedPacket(f"job {self.job_id}: the root aggregator got a RESULT (slot {h.slot}, seq {h.seq})")
        cell = self._cells[h.slot][h.set_id]
        if cell.count == 0 or h.seq != cell.seq:
            raise RejectedPacket(
                f"job {self.job_id}: stale RESULT for slot {h.slot} set {h.set_id} seq {h.seq} "
                f"(the set's round is {'empty' if cell.count == 0 else f'seq {cell.seq}'})"
            )
        cell.acc = packet.values.astype(np.int32, copy=True)
        cell.exponent = h.exponent
        cell.overflow = bool(h.flags & FLAG_OVERFLOW)
        cell.done = True
        return [Outgoing(Dest.CHILDREN, packet)]

    def _flags(self, cell: _Cell) -> int:
        return FLAG_OVERFLOW if cell.overflow else 0

    def _result(self, cell: _Cell, packet: AggPacket) -> AggPacket:
        header = replace(
            packet.header, pkt_type=PktType.RESULT, flags=self._flags(cell), exponent=cell.exponent, seq=cell.seq
        )
        return AggPacket(header, cell.acc.copy())

    def _partial(self, cell: _Cell, packet: AggPacket) -> AggPacket:
        header = replace(
            packet.header,
            pkt_type=PktType.CONTRIB,
            flags=self._flags(cell),
            exponent=cell.exponent,
            seq=cell.seq,
            worker_id=self.parent_index,
        )
        return AggPacket(header, cell.acc.copy())
