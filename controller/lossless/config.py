"""What the fabric's traffic classes are, and which are lossless (a record per class, checked).

A `TrafficClass` is a priority (the switches' egress priority queue, 0..5: 6 and 7 are the control
traffic's, PRIORITY_LINK_HEARTBEAT and PRIORITY_CONTROL), the DSCPs that map to it (below 32: the
INT bit is not a class's), how a port serves it (``weight`` 0: strict priority, else weighted
round robin), its own queue depth, bit rate and ECN thresholds, and the PFC thresholds it is made
lossless with (`PfcThresholds`, bytes of a port's ingress buffer of the class). Which classes are
lossless is chosen at run time, by jobs (`controller.lossless.Lossless.use`) and by
``LosslessConfig.lossless``, among those that have PFC thresholds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller import p4names as P4
from controller.telemetry.entries import EcnThresholds

CONTROL_CLASSES = (P4.PRIORITY_LINK_HEARTBEAT, P4.PRIORITY_CONTROL)
DSCP_LIMIT = P4.INT_DSCP_BIT        # classes' DSCPs are below it (dscp_class clears the INT bit)
MAX_QUANTA = 0xFFFF
ACTIONS = ("drop", "forward")


@dataclass(frozen=True)
class PfcThresholds:
    """802.1Qbb thresholds of a lossless class on every port (softswitch/pfc.py): PAUSE when the
    port's buffer of the class reaches ``xoff`` bytes, XON at ``xon`` or below, ``headroom`` bytes
    more admitted for what is in flight, PAUSE frames asking ``quanta`` x 512 bit times."""
    xoff: int
    xon: int
    headroom: int
    quanta: int = MAX_QUANTA

    def __post_init__(self) -> None:
        if not 0 <= self.xon < self.xoff or self.headroom < 0:
            raise ValueError(f"PFC thresholds XOFF {self.xoff}, XON {self.xon}, headroom {self.headroom} bytes: need "
                             f"0 <= XON < XOFF and headroom >= 0")
        if not 1 <= self.quanta <= MAX_QUANTA:
            raise ValueError(f"PFC quanta {self.quanta}: need 1..{MAX_QUANTA}")


@dataclass(frozen=True)
class TrafficClass:
    """One class: see the module docstring. ``depth`` packets and ``bitrate`` bits/s, None: the
    port's; ``ecn`` None: the port's ECN thresholds (telemetry's ecn_config)."""
    priority: int
    dscps: tuple[int, ...]
    name: str = ""
    weight: int = 0
    depth: int | None = None
    bitrate: int | None = None
    ecn: EcnThresholds | None = None
    pfc: PfcThresholds | None = None

    def __post_init__(self) -> None:
        label = self.label
        if not 0 <= self.priority < 8 or self.priority in CONTROL_CLASSES:
            raise ValueError(f"{label}: priority {self.priority} is not a data class (0..7 but {CONTROL_CLASSES}, "
                             f"the control traffic's)")
        bad = [d for d in self.dscps if not 0 <= d < DSCP_LIMIT]
        if bad:
            raise ValueError(f"{label}: DSCP {bad} outside 0..{DSCP_LIMIT - 1} ({DSCP_LIMIT} is INT's bit)")
        if self.weight < 0 or (self.depth is not None and self.depth < 1) or (self.bitrate is not None and self.bitrate < 0):
            raise ValueError(f"{label}: weight {self.weight}, depth {self.depth}, bit rate {self.bitrate}: "
                             f"need weight >= 0, depth >= 1, bit rate >= 0")

    @property
    def label(self) -> str:
        return f"class {self.priority}" + (f" ({self.name})" if self.name else "")


@dataclass(frozen=True)
class WatchdogConfig:
    """The switches' PFC watchdog (softswitch/pfc.py): a lossless queue paused ``detect_ms`` with
    packets waiting is in a storm until no PAUSE came for it for ``restore_ms``; it looks every
    ``poll_ms``; ``action`` drop (its packets) or forward (PFC off on it)."""
    detect_ms: int
    restore_ms: int
    poll_ms: int = 10
    action: str = "drop"

    def __post_init__(self) -> None:
        if self.detect_ms < 1 or self.restore_ms < 0 or self.poll_ms < 1 or self.action not in ACTIONS:
            raise ValueError(f"PFC watchdog {self.detect_ms}/{self.restore_ms}/{self.poll_ms} ms, {self.action}: need "
                             f"detection and polling >= 1 ms, restoration >= 0, action one of {ACTIONS}")


@dataclass(frozen=True)
class LosslessConfig:
    """The fabric's classes; ``lossless``: those lossless from the start (besides what jobs ask
    for); ``watchdog`` None: no watchdog."""
    classes: tuple[TrafficClass, ...]
    lossless: frozenset[int] = field(default_factory=frozenset)
    watchdog: WatchdogConfig | None = None

    def __post_init__(self) -> None:
        prios = [c.priority for c in self.classes]
        if len(set(prios)) != len(prios):
            raise ValueError(f"traffic classes: a priority given twice ({sorted(prios)})")
        dscps = [d for c in self.classes for d in c.dscps]
        if len(set(dscps)) != len(dscps):
            raise ValueError(f"traffic classes: a DSCP in two classes ({sorted(dscps)})")
        self.check_lossless(self.lossless)

    def klass(self, priority: int) -> TrafficClass:
        for c in self.classes:
            if c.priority == priority:
                return c
        raise ValueError(f"no traffic class of priority {priority} (classes: {[c.priority for c in self.classes]})")

    def check_lossless(self, priorities) -> None:
        """ValueError naming a class that cannot be lossless (none such, or no PFC thresholds)."""
        for p in priorities:
            if self.klass(p).pfc is None:
                raise ValueError(f"{self.klass(p).label} cannot be lossless: it has no PFC thresholds")

    def dscp_class(self) -> dict[int, int]:
        """DSCP -> class, as the switches (and the hosts) map it."""
        return {d: c.priority for c in self.classes for d in c.dscps}
