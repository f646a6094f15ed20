"""The data plane's link-heartbeat timeout, raised when the machine makes heartbeats late.

A switch skips a port whose link heartbeats have been silent for the timeout (``heartbeat_watch``,
``failover.p4``), 30 ms by default on softswitch. On a loaded machine a switch process can wait
that long for the CPU, and then its heartbeats reach its neighbours late: they skip a healthy
port, and the ``failed_over`` counter counts packets moved off it (reordered, not lost, while
the backup is alive). The controller can tell such a spurious silence from a cut: its own
heartbeats kept arriving on that port after the moves. Each time it sees one, the timeout is
doubled (at most `MAX_TIMEOUT_US`) and rewritten on every switch; after `CALM_S` with no such
move it is halved again, down to the configured value. So detection stays as fast as the
machine allows and no slower than it must; every change is recorded and logged, a raise with the
ports that caused it, and so is a spurious move with the timeout at its cap.

A switch's skip is judged once the controller hears that port in a round sent after the move was
read (spurious), or sees its state change (a real failure): on a busy machine that round can
arrive several readings later, so a skipped port waits for its verdict (`Skips`, without I/O)
rather than being judged on the next reading alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

PortKey = tuple[str, int]
MAX_TIMEOUT_US = 500_000       # never wait more than half a second before skipping a silent port
CHECK_EVERY_S = 2.0            # how often the failed_over counters are read
CALM_S = 60.0                  # no spurious move for this long: the timeout is halved again
VERDICT_WAIT_S = 20.0          # a skipped port neither heard nor changed for this long gets no verdict


@dataclass(frozen=True)
class Change:
    """The timeout changed from ``old_us`` to ``new_us`` at ``at`` (time.monotonic()): raised
    because packets were moved off ``ports`` while the controller still heard them (``new_us ==
    old_us``: it was at MAX_TIMEOUT_US already, the spurious moves are recorded all the same), or
    lowered (no ports) after CALM_S without such a move."""

    at: float
    old_us: int
    new_us: int
    ports: tuple[PortKey, ...]


@dataclass
class Skips:
    """Ports a switch moved packets off (their ``failed_over`` count grew between two readings),
    each waiting for its verdict: heard again after the move, alive, with no state change since
    (a spurious skip: the link was up), or its state changed (a real failure: no verdict)."""

    last: dict[PortKey, int] | None = None
    # port -> (the heartbeat round sent after the reading that saw its move, when the move may have begun)
    waiting: dict[PortKey, tuple[int, float]] = field(default_factory=dict)
    last_at: float = 0.0

    def read(self, moved: Mapping[PortKey, int], round_sent: int, now: float) -> None:
        """``moved``: the ``failed_over`` counts read at ``now``; ``round_sent``: the newest
        heartbeat round, taken after they were read (a later round was sent after the moves)."""
        if self.last is not None:
            for port, n in moved.items():
                if n > self.last.get(port, 0):
                    self.waiting.setdefault(port, (round_sent, self.last_at))
        self.last, self.last_at = dict(moved), now

    def spurious(self, heard_after: Callable[[PortKey, int], bool],
                 changed_since: Callable[[PortKey, float], bool], now: float) -> dict[PortKey, float]:
        """Waiting ports heard (``heard_after(port, round)``: alive, a later round heard) with no
        state change since their move (``changed_since(port, t)``), each with when its move may
        have begun; they wait no more, nor do those that changed or waited VERDICT_WAIT_S."""
        found = {}
        for port, (round_sent, since) in list(self.waiting.items()):
            if changed_since(port, since) or now - since > VERDICT_WAIT_S:
                del self.waiting[port]
            elif heard_after(port, round_sent):
                found[port] = since
                del self.waiting[port]
        return found


def raised(timeout_us: int) -> int:
    """The next timeout: twice the last, at most MAX_TIMEOUT_US."""
    return min(MAX_TIMEOUT_US, 2 * timeout_us)


def lowered(timeout_us: int, configured_us: int) -> int:
    """The timeout after a calm spell: half the last, at least the configured one."""
    return max(configured_us, timeout_us // 2)
