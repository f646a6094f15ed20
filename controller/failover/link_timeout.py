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
ports that caused it.

`spurious(moved_before, moved_after, heard_since)` is the decision, without I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

PortKey = tuple[str, int]
MAX_TIMEOUT_US = 500_000       # never wait more than half a second before skipping a silent port
CHECK_EVERY_S = 2.0            # how often the failed_over counters are read
CALM_S = 60.0                  # no spurious move for this long: the timeout is halved again


@dataclass(frozen=True)
class Change:
    """The timeout changed from ``old_us`` to ``new_us`` at ``at`` (time.monotonic()): raised
    because packets were moved off ``ports`` while the controller still heard them, or lowered
    (no ports) after CALM_S without such a move."""

    at: float
    old_us: int
    new_us: int
    ports: tuple[PortKey, ...]


def spurious(moved_before: Mapping[PortKey, int], moved_after: Mapping[PortKey, int],
             heard_since: Callable[[PortKey], bool]) -> set[PortKey]:
    """Ports whose ``failed_over`` count grew between the two readings although the port was
    heard since the second one (``heard_since``): a switch skipped a port that was alive."""
    return {port for port, n in moved_after.items() if n > moved_before.get(port, 0) and heard_since(port)}


def raised(timeout_us: int) -> int:
    """The next timeout: twice the last, at most MAX_TIMEOUT_US."""
    return min(MAX_TIMEOUT_US, 2 * timeout_us)


def lowered(timeout_us: int, configured_us: int) -> int:
    """The timeout after a calm spell: half the last, at least the configured one."""
    return max(configured_us, timeout_us // 2)
