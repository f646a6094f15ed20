"""A port's traffic classes: which class's packet its link sends next.

Every egress port has a link (``PortLink``) shared by its class queues (queues.EgressQueue, one per
``standard_metadata.priority``). The link is free at ``next_free`` (the end of its last frame at
its bit rate; with no bit rate, always). When it is free, the port serves, among the classes whose
head packet may leave by now (queued, its own pace free, not paused by 802.1Qbb: pfc.py):

1. the classes of weight 0, by strict priority, highest first (simple_switch's
   QueueingLogicPriRL: what every class is unless given a weight);
2. then the weighted classes, by weighted round robin: the class whose turn it is sends up to
   its weight in packets while it has a packet ready, then the turn passes to the next weighted
   class (in priority order, highest first, round and round) that has one; a class with nothing
   ready gives up the rest of its turn.

The packet departs at ``max(link free, class ready)``: the time the arithmetic of queues.py
gives, whatever the loop's lateness. Strict classes come first, so a weighted class is served
only when no strict class has a packet ready; among weighted classes that share a backlogged
link, class c gets weight(c) / sum(weights) of its packets. The native data plane
(native/classes.c) serves its ports by the same rules.
"""
from __future__ import annotations

from .queues import wire_us


class PortLink:
    """An egress port's link and its class queues (highest priority first)."""
    __slots__ = ("port", "bitrate", "last_departure", "last_length", "next_free", "queues", "queued",
                 "_turn", "_left")

    def __init__(self, port: int, bitrate: int = 0):
        self.port = port
        self.bitrate = 0
        self.last_departure = 0.0
        self.last_length = 0
        self.queues: list = []        # queues.EgressQueue, highest priority first
        self.queued = 0               # packets in them
        self._turn = None             # the weighted class whose turn it is
        self._left = 0                # packets it may still send this turn
        self.set_bitrate(bitrate)

    def set_bitrate(self, bits_per_s: int) -> None:
        """The link's bit rate (0: unlimited), from its last departure on."""
        self.bitrate = bits_per_s
        self.next_free = self.last_departure + (wire_us(self.last_length, bits_per_s) if bits_per_s else 0.0)

    def add(self, queue) -> None:
        self.queues = sorted([*self.queues, queue], key=lambda q: -q.priority)

    def departs(self, departure: float, length: int) -> None:
        self.last_departure, self.last_length = departure, length
        self.next_free = departure + wire_us(length, self.bitrate) if self.bitrate else departure

    def next_event(self) -> float | None:
        """When the port may send its next packet (None: nothing queued)."""
        if not self.queued:
            return None
        soonest = min(q.ready() for q in self.queues if q.items)
        return soonest if soonest > self.next_free else self.next_free

    def pick(self, now: float):
        """(queue, departure) of the packet the port sends next, if one may leave by ``now``;
        None otherwise. The caller takes it (``queue.take(departure)``)."""
        free = self.next_free
        if free > now or not self.queued:
            return None
        weighted = False
        for q in self.queues:
            if q.items:
                if q.weight:
                    weighted = True
                    continue
                r = q.ready()
                if r <= now:
                    return q, (r if r > free else free)
        return self._round_robin(now, free) if weighted else None

    def _round_robin(self, now: float, free: float):
        ring = [q for q in self.queues if q.weight]
        turn = self._turn
        if turn is not None and turn.weight and self._left and turn.items:
            r = turn.ready()
            if r <= now:
                self._left -= 1
                return turn, (r if r > free else free)
        start = ring.index(turn) + 1 if turn in ring else 0
        for i in range(len(ring)):
            q = ring[(start + i) % len(ring)]
            if q.items:
                r = q.ready()
                if r <= now:
                    self._turn, self._left = q, q.weight - 1
                    return q, (r if r > free else free)
        return None
