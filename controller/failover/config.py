"""Heartbeat settings (BFD's desired interval and detect multiplier).

The default interval is 100 ms, not BFD's 10 ms or less: heartbeats here are P4Runtime
packet-outs and packet-ins through Python (the controller's streams and, on softswitch, the
target's gRPC server), one per fabric port and interval; on a k=4 fat-tree (64 port ends) at
10 ms that is 6400 messages a second each way, more than a 2-core machine running 20 switches
carries. At 50 ms (1280 a second) heartbeats took most of this 2-core machine (benchmarks/
failover.py: 89% busy with them, 24% without, same probes; top under the fabric test's traffic:
the controller ~70% of a core, every softswitch 6-12%, nothing idle), so one switch's heartbeats
ran 0.5-0.9 s late and healthy ports were found dead (the under-load fabric test, run alone,
failed 1 run in 3 on softswitch and 2 in 3 on BMv2). At 100 ms it passed 3 in 3 on both.

The default multiplier is 5 (a port is dead after 500 ms of silence), not BFD's 3: see above.
A faster machine, or fewer switches per core, can take a shorter interval and a smaller
multiplier (`aifabric up --failover --heartbeat-ms 20 --heartbeat-multiplier 3`).

Link heartbeats (``link_interval_ms``, ``link_multiplier``) are the fast tier, BFD's defaults
of 10 ms x 3: they never pass through Python beyond one generator loop (each switch's pipeline
sends them and its neighbour's pipeline hears them, ``p4src/include/control/failover.p4``,
`emulation.failover_heartbeat_generator`), so the data plane stops using a silent port 30 ms after it
fell silent. The controller's heartbeats above stay the slower tier that names the failure and
reroutes. A link heartbeat frame is handled twice by a pipeline and by nothing else: on a k=4
fat-tree at 10 ms, 6400 frames a second, 12,800 pipeline passes. softswitch carries that
(benchmarks/failover.py: 63% busy with probes and heartbeats); BMv2, several times slower per
packet here, did not (96-100% busy, probes 300 ms late, healthy ports found dead), so where no
interval is given the command line and the benchmark take ``link_interval_for(target)``: 10 ms
on softswitch, 50 ms on BMv2.
"""

from __future__ import annotations

from dataclasses import dataclass


LINK_INTERVAL_MS = {"softswitch": 10.0, "bmv2": 50.0}


def link_interval_for(target_kind: str) -> float:
    """The link-heartbeat interval a fabric of ``target_kind`` switches carries here."""
    return LINK_INTERVAL_MS.get(target_kind, LINK_INTERVAL_MS["softswitch"])


@dataclass(frozen=True)
class HeartbeatConfig:
    """``interval_ms``: one heartbeat per fabric port this often; a port is dead once
    ``multiplier`` intervals passed without one heard on it, alive again after
    ``recover_after`` heartbeats heard since it died. ``grace_ms``: at start (and when a switch's
    session comes back) ports are given this long before their silence counts.
    ``link_interval_ms``, ``link_multiplier``: the link heartbeats of the data plane; a port
    silent for their product is skipped by the switch itself until it hears one again."""

    interval_ms: float = 100.0
    multiplier: int = 5
    recover_after: int = 3
    grace_ms: float = 1000.0
    link_interval_ms: float | None = LINK_INTERVAL_MS["softswitch"]   # None: no link heartbeats
    link_multiplier: int = 3

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"HeartbeatConfig.interval_ms must be > 0, not {self.interval_ms}")
        if self.multiplier < 1:
            raise ValueError(f"HeartbeatConfig.multiplier must be >= 1, not {self.multiplier}")
        if self.recover_after < 1:
            raise ValueError(f"HeartbeatConfig.recover_after must be >= 1, not {self.recover_after}")
        if self.link_interval_ms is not None and self.link_interval_ms <= 0:
            raise ValueError(f"HeartbeatConfig.link_interval_ms must be > 0 (or None: off), not {self.link_interval_ms}")
        if self.link_multiplier < 1:
            raise ValueError(f"HeartbeatConfig.link_multiplier must be >= 1, not {self.link_multiplier}")

    @property
    def interval_s(self) -> float:
        return self.interval_ms / 1000.0

    @property
    def detect_s(self) -> float:
        """Silence after which a port is dead."""
        return self.multiplier * self.interval_s

    @property
    def link_timeout_us(self) -> int | None:
        """Silence after which the data plane skips a port (None: link heartbeats off)."""
        if self.link_interval_ms is None:
            return None
        return round(self.link_multiplier * self.link_interval_ms * 1000)
