"""Heartbeat settings (BFD's desired interval and detect multiplier).

The default interval is 50 ms, not BFD's 10 ms or less: heartbeats here are P4Runtime
packet-outs and packet-ins through Python (the controller's streams and, on softswitch, the
target's gRPC server), one per fabric port and interval; on a k=4 fat-tree (64 port ends) at
10 ms that is 6400 messages a second each way, more than a 2-core machine running 20 switches
carries, and a starved machine makes heartbeats late. See benchmarks/heartbeat_detection.py.

The default multiplier is 10 (a port is dead after 500 ms of silence), not BFD's 3: at 3 x 50 ms
the fabric tests saw healthy ports found dead on this 2-core machine while all-pairs pings and a
reroute's reconcile of every switch loaded it (heartbeats late on some ports only); at 10 they
did not. A faster machine, or fewer switches per core, can take a smaller multiplier.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HeartbeatConfig:
    """``interval_ms``: one heartbeat per fabric port this often; a port is dead once
    ``multiplier`` intervals passed without one heard on it, alive again after
    ``recover_after`` heartbeats heard since it died. ``grace_ms``: at start (and when a switch's
    session comes back) ports are given this long before their silence counts."""

    interval_ms: float = 50.0
    multiplier: int = 10
    recover_after: int = 3
    grace_ms: float = 1000.0

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"HeartbeatConfig.interval_ms must be > 0, not {self.interval_ms}")
        if self.multiplier < 1:
            raise ValueError(f"HeartbeatConfig.multiplier must be >= 1, not {self.multiplier}")
        if self.recover_after < 1:
            raise ValueError(f"HeartbeatConfig.recover_after must be >= 1, not {self.recover_after}")

    @property
    def interval_s(self) -> float:
        return self.interval_ms / 1000.0

    @property
    def detect_s(self) -> float:
        """Silence after which a port is dead."""
        return self.multiplier * self.interval_s
