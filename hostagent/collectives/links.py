"""A set of ranks as one of them sees it during one call: tagged arrays to and from members.

Algorithms are written against a Link, so the same ring or tree runs over the whole group or over
a subset (a rack's members, the racks' leaders) in hierarchical algorithms. A message's tag is
(call, sub-link space, step), the call being the (sub)group's number and the call's own (call_id):
unique within a group's life, so messages of different calls, subgroups or sub-links never meet.
"""

from __future__ import annotations

import numpy as np

from hostagent.collectives.arrays import from_bytes
from hostagent.collectives.reliable import CALL_NUMBER_BITS, CollectiveError, ReliableTransport

SPACE_BITS = 12
STEP_BITS = 20
SUBGROUP_BITS = 32 - CALL_NUMBER_BITS


def call_id(subgroup: int, number: int) -> int:
    """A call's number on the wire: its (sub)group's number above the call's own."""
    if not (0 <= subgroup < 1 << SUBGROUP_BITS and 0 <= number < 1 << CALL_NUMBER_BITS):
        raise ValueError(f"subgroup {subgroup} or call number {number} out of range")
    return (subgroup << CALL_NUMBER_BITS) | number


def make_tag(call: int, space: int, step: int) -> int:
    if not (0 <= space < 1 << SPACE_BITS and 0 <= step < 1 << STEP_BITS):
        raise ValueError(f"tag space {space} or step {step} out of range")
    return (call << 32) | (space << STEP_BITS) | step


class Link:
    """`members` (global ranks, in the order the algorithm numbers them); `me` is my index."""

    def __init__(
        self,
        transport: ReliableTransport,
        members: list[int],
        call: int,
        deadline: float,
        dtype: np.dtype,
        space: int = 0,
    ) -> None:
        self.transport = transport
        self.members = list(members)
        self.me = self.members.index(transport.rank) if transport.rank in self.members else -1  # -1: not one of them
        self.size = len(self.members)
        self.call = call
        self.deadline = deadline
        self.dtype = dtype
        self.space = space
        self.watch = self.members  # every member must stay alive for a collective to finish
        self._subs = 0

    def send(self, peer: int, step: int, array: np.ndarray) -> None:
        self.transport.send(self.members[peer], make_tag(self.call, self.space, step), array, self.deadline, self.watch)

    def recv(self, peer: int, step: int, count: int | None = None) -> np.ndarray:
        data = self.transport.recv(self.members[peer], make_tag(self.call, self.space, step), self.deadline, self.watch)
        array = from_bytes(data, self.dtype)
        if count is not None and array.size != count:
            raise CollectiveError(
                f"rank {self.members[peer]} sent {array.size} elements where {count} were expected (sizes differ between ranks)"
            )
        return array

    def sub(self, members: list[int]) -> Link:
        """A link over some of my members (by index here), in a space of its own; every member
        must create its sub-links in the same order so the spaces agree."""
        self._subs += 1
        space = self.space * 16 + self._subs
        link = Link(self.transport, [self.members[i] for i in members], self.call, self.deadline, self.dtype, space)
        link.watch = self.watch  # a stopped rank anywhere in the group ends the call
        return link


def split_bounds(length: int, parts: int) -> list[int]:
    """Offsets of `parts` near-equal pieces of `length` (np.array_split's), parts + 1 of them."""
    base, extra = divmod(length, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def pieces(length: int, itemsize: int, piece_bytes: int) -> list[tuple[int, int]]:
    """(start, stop) of the pipeline pieces of a buffer: at least one, even when empty."""
    step = max(1, piece_bytes // itemsize)
    return [(s, min(s + step, length)) for s in range(0, max(length, 1), step)] or [(0, 0)]
