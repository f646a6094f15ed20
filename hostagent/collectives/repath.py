"""Repathing: a flow of the collectives that loses packets moves to another path of the fabric by
itself, before and independently of any reroute of the controller's (as Protective ReRoute moves
a flow by its IPv6 flow label on a timeout): its packets leave from another UDP source port,
which the switches' ECMP hashes onto other uplinks.

`PeerPaths` keeps, per peer, the path its packets take now (0: the group's own port; 1 to
PATHS - 1: ports the kernel gives), the paths left because they lost packets (tried again only
once every path was), and when the flow last moved. The transport moves a flow when a packet's
acknowledgement is later than the retransmission timeout measured from that peer's round trips
(the way there lost it), and when a copy of a packet it took arrives (the sender resent it: the
acknowledgements back were lost); not again sooner than that timeout, so one loss moves it once.
Heartbeats go out on every path in turn (`beat_path`), so a peer whose path from us died still
hears us, and is not declared silent while a path to it works.
"""
from __future__ import annotations

PATHS = 8       # source ports a flow may take: in a k=4 fat tree between pods 4 paths, each hit ~1/4 of the time


class PeerPaths:
    def __init__(self, peers: int, paths: int = PATHS) -> None:
        if paths < 2:
            raise ValueError(f"repathing needs at least 2 paths, not {paths}")
        self.paths = paths
        self.current = [0] * peers
        self._left: list[set[int]] = [set() for _ in range(peers)]
        self._moved_at = [float("-inf")] * peers
        self._beats = 0
        self.moves = 0

    def move(self, peer: int, now: float, hold_s: float) -> bool:
        """Move ``peer``'s flow off its path to the next one it has not left (all left: start
        over); not when it moved less than ``hold_s`` ago. True when it moved."""
        if now - self._moved_at[peer] < hold_s:
            return False
        here, left = self.current[peer], self._left[peer]
        left.add(here)
        if len(left) == self.paths:      # every path lost something: their health is stale
            left.clear()
            left.add(here)
        self.current[peer] = next(p for p in ((here + i) % self.paths for i in range(1, self.paths)) if p not in left)
        self._moved_at[peer] = now
        self.moves += 1
        return True

    def beat_path(self) -> int:
        """The path of the next round of heartbeats: each in turn."""
        self._beats += 1
        return self._beats % self.paths
