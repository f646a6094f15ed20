"""The liveness state machine of every monitored port, without I/O (times are passed in).

A port is ALIVE while heartbeats arrive; once ``multiplier`` intervals pass without one it is
DEAD - and only if more than ``multiplier`` checks (one per heartbeat round sent) passed since
the last one was heard, so a controller too starved to send its heartbeats on time never blames
the links for it; a dead port becomes ALIVE again after ``recover_after`` heartbeats in a row.

The silence must also be the port's own (BFD runs in the switch; here heartbeats go through one
busy controller process, whose stream threads can fall behind): a port is found dead only while
its switch still hears heartbeats on another port (or has no other), and while the neighbour's
heartbeats still reach its other neighbours (or it has no other, or its P4Runtime session is
down: ``unreachable``). A switch that is killed loses its session and all its neighbours at
once, so its neighbours' ports die; a stalled stream silences every port it serves alike, so
none does.

That evidence is counted in heartbeat rounds (the sequence number each heartbeat carries), not
in arrival times: another port speaks for the link only once it has heard a heartbeat sent
``multiplier`` rounds after the port's last one. A stalled switch or stream delivers its
backlog in a burst, port after port; by arrival time the ports flushed first would look alive
well after the others fell silent, by round they do not.

A loaded machine also delays heartbeats without stalling anything outright: every hop (the
controller's stream, the sending switch's server and pipeline, the receiving switch, the stream
back) waits for a share of the CPU, so a port's heartbeats arrive as late as the slowest of those
at that moment, and the gap between two of them grows by as much. Each heartbeat carries its
send time, so the monitor knows how late they arrive: a port is dead only once it has been
silent for the detection time *plus* twice the largest lateness seen in the last
`LATENESS_ROUNDS` rounds (`LATENESS_MARGIN`: lateness grows faster under a rising load than the
last rounds show; at most `MAX_STRETCH` detection times). On an idle machine that adds a few
milliseconds; on a starved one detection takes longer instead of blaming a healthy link, and
every verdict says by how much it was stretched (``Transition.stretched``).

`check(now, unreachable)` returns the transitions since the last call; `heard(port, now, seq,
late)` records a heartbeat of round ``seq`` that arrived ``late`` seconds after it was sent.
Thread-safe: the stream readers call `heard`, the ticker calls `check`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from controller.failover.config import HeartbeatConfig

PortKey = tuple[str, int]   # (switch name, port)
LATENESS_ROUNDS = 20        # heartbeat rounds whose lateness counts (2 s at the default 100 ms)
LATENESS_MARGIN = 2         # detection is stretched by this many times the lateness seen
# ... and by at most this many detection times (10 s at the defaults): on this 2-core machine
# running the test suite, heartbeats ran 5-9 s late for a while after a switch was killed (every
# switch reconciled, protobuf in pure Python on both sides), and at 10 (5 s) a healthy core link
# was found dead
MAX_STRETCH = 20


@dataclass(frozen=True)
class Transition:
    port: PortKey
    alive: bool
    at: float          # when the monitor decided (the time passed to check)
    last_heard: float  # the last heartbeat heard on the port before the decision
    stretched: float = 0.0   # seconds added to the detection time for late heartbeats (dead only)


@dataclass
class _PortState:
    alive: bool = True
    last_heard: float = 0.0
    last_seq: int = 0         # the newest round heard on the port
    deadline: float = 0.0     # dead when now > deadline and nothing heard since
    recovering: int = 0       # heartbeats heard since the port died
    missed: int = 0           # checks (heartbeat rounds) since the last heartbeat heard


class PortMonitor:
    def __init__(self, peers: Mapping[PortKey, PortKey], config: HeartbeatConfig, now: float) -> None:
        """``peers``: every monitored port -> the neighbour's port at the other end of its link."""
        self.config = config
        self._lock = threading.Lock()
        self._ports: dict[Hashable, _PortState] = {}
        self._peer = dict(peers)
        # ports of the same switch, and ports that hear the same neighbour
        self._same_switch: dict[PortKey, list[PortKey]] = {}
        self._same_sender: dict[PortKey, list[PortKey]] = {}
        for key, peer in self._peer.items():
            self._same_switch[key] = [k for k in self._peer if k[0] == key[0] and k != key]
            self._same_sender[key] = [k for k, p in self._peer.items() if p[0] == peer[0] and k != key]
        for key in self._peer:
            self._ports[key] = _PortState(alive=True, last_heard=now, deadline=now + config.grace_ms / 1000.0)
        self._late_now = 0.0                                # the latest heartbeat of this round
        self._late_rounds: deque[float] = deque(maxlen=LATENESS_ROUNDS)

    @property
    def lateness(self) -> float:
        """How late heartbeats arrive now: the latest one of the last LATENESS_ROUNDS rounds."""
        with self._lock:
            return self._lateness()

    @property
    def detection_s(self) -> float:
        """The silence that makes a port dead now: the detection time, stretched for late heartbeats."""
        with self._lock:
            return self.config.detect_s + self._stretch()

    def _lateness(self) -> float:
        return max(self._late_now, max(self._late_rounds, default=0.0))

    def _stretch(self) -> float:
        """What detection waits beyond its time: LATENESS_MARGIN x the lateness, capped."""
        return min(LATENESS_MARGIN * self._lateness(), MAX_STRETCH * self.config.detect_s)

    @property
    def ports(self) -> list[PortKey]:
        return list(self._ports)  # type: ignore[arg-type]

    def heard(self, port: PortKey, now: float, seq: int, late: float = 0.0) -> None:
        with self._lock:
            st = self._ports.get(port)
            if st is None:
                return
            self._late_now = max(self._late_now, late)
            if not st.alive:
                # recovery needs heartbeats in a row: a stray one long after the last restarts it
                gap = now - st.last_heard
                st.recovering = st.recovering + 1 if gap <= self.config.detect_s + self._stretch() else 1
            st.last_heard = now
            st.last_seq = max(st.last_seq, seq)
            st.missed = 0
            st.deadline = max(st.deadline, now + self.config.detect_s)

    def grace(self, switch: str, now: float) -> None:
        """Give the ports of ``switch`` a grace period (its session just came back)."""
        with self._lock:
            for (name, _), st in self._ports.items():  # type: ignore[misc]
                if name == switch and st.alive:
                    st.deadline = max(st.deadline, now + self.config.grace_ms / 1000.0)

    def _heard_since(self, ports: list[PortKey], seq: int) -> bool:
        """No such ports, or one of them heard round ``seq`` or a later one."""
        return not ports or any(self._ports[k].last_seq >= seq for k in ports)

    def _own_silence(self, key: PortKey, unreachable: frozenset[str]) -> bool:
        # a whole detection time of rounds after the port's last: ports silenced by one stall
        # (their last rounds a few apart) never count as evidence for each other; a cut link's
        # neighbours keep hearing, so this costs nothing beyond the detection time itself
        since = self._ports[key].last_seq + self.config.multiplier
        if not self._heard_since(self._same_switch[key], since):
            return False          # the whole switch is silent: its stream, or the controller, is behind
        return self._peer[key][0] in unreachable or self._heard_since(self._same_sender[key], since)

    def check(self, now: float, unreachable: frozenset[str] = frozenset(), hold: bool = False) -> list[Transition]:
        """Transitions since the last call; ``unreachable``: switches whose session is down;
        ``hold``: no port is found dead in this call (the controller knows it is too busy)."""
        out = []
        with self._lock:
            stretch = self._stretch()
            self._late_rounds.append(self._late_now)
            self._late_now = 0.0
            for key, st in self._ports.items():
                st.missed += 1
                if (st.alive and not hold and now > st.deadline + stretch and st.missed > self.config.multiplier
                        and self._own_silence(key, unreachable)):  # type: ignore[arg-type]
                    st.alive = False
                    st.recovering = 0
                    out.append(Transition(key, False, now, st.last_heard, stretch))  # type: ignore[arg-type]
                elif not st.alive and st.recovering >= self.config.recover_after:
                    st.alive = True
                    st.recovering = 0
                    st.deadline = st.last_heard + self.config.detect_s
                    out.append(Transition(key, True, now, st.last_heard))  # type: ignore[arg-type]
        return out

    def is_alive(self, port: PortKey) -> bool:
        with self._lock:
            return self._ports[port].alive

    def state(self, port: PortKey, now: float) -> dict:
        """What the monitor holds of ``port`` (for a report of why it is or is not dead yet)."""
        with self._lock:
            st = self._ports[port]
            return {"alive": st.alive, "silent_s": round(now - st.last_heard, 3), "last_round": st.last_seq,
                    "missed": st.missed, "deadline_in_s": round(st.deadline - now, 3),
                    "stretch_s": round(self._stretch(), 3)}

    def last_round(self, port: PortKey) -> int:
        """The newest heartbeat round heard on ``port`` (0: none yet)."""
        with self._lock:
            return self._ports[port].last_seq

    def dead(self) -> set[PortKey]:
        with self._lock:
            return {k for k, st in self._ports.items() if not st.alive}  # type: ignore[misc]
