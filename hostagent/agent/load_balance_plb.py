"""Protective Load Balancing (PLB, Qureshi et al., SIGCOMM'22) as Linux defines it for TCP
(net/ipv4/tcp_plb.c), for one flow, as pure logic: no clock, no randomness of its own.

Per round (about one RTT) with packets delivered, `PlbState.update` takes the round's
congestion ratio, the CE fraction scaled to 0..256 as the kernel computes it
(``(ce << 8) // delivered``): below ``cong_thresh`` the count of consecutive congested rounds
restarts at 0, else it grows (up to ``rehash_rounds``). Then `PlbState.check_rehash` says
whether to repath now:

* forced: ``rehash_rounds`` (N) consecutive congested rounds;
* idle: ``idle_rehash_rounds`` (M, 0 disables) consecutive congested rounds and nothing in
  flight (a repath then cannot reorder anything);
* never while paused: after a retransmission timeout (`on_rto`, which resets the count) PLB
  holds still for ``suspend_rto_sec`` plus a random part of it (the kernel's
  ``get_random_u32_below(pause)``: up to twice the setting), so that it does not move the flow
  back onto a path the timeout may have just left because it black-holed packets.

A repath resets the count. Rounds without deliveries are not rounds (`update` with None).
The parameters carry the kernel's sysctl names and defaults (net.ipv4.tcp_plb_*).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

PLB_SCALE = 256              # TCP_PLB_SCALE: ratios in 1/256
MAX_ROUNDS = 31              # the sysctls' bound (tcp_plb_max_rounds)


def cong_ratio(ce: int, delivered: int) -> int | None:
    """The kernel's per-round ratio: ``(ce << 8) // delivered``; None when nothing was delivered."""
    if delivered <= 0:
        return None
    return (max(0, ce) << 8) // delivered


@dataclass(frozen=True)
class PlbParams:
    """net.ipv4.tcp_plb_* (defaults as in Linux 6.x)."""

    rehash_rounds: int = 12          # N
    idle_rehash_rounds: int = 3      # M (0: no idle rehash)
    cong_thresh: int = 128           # K in 1/256 (128: 50%); 0 repaths every N rounds whatever happens
    suspend_rto_sec: float = 60.0    # hold still this long (plus up to as much again) after an RTO

    def __post_init__(self) -> None:
        for name in ("rehash_rounds", "idle_rehash_rounds"):
            value = getattr(self, name)
            if not 0 <= value <= MAX_ROUNDS:
                raise ValueError(f"PLB {name} {value}: must be 0..{MAX_ROUNDS} (as net.ipv4.tcp_plb_{name})")
        if not 0 <= self.cong_thresh <= PLB_SCALE:
            raise ValueError(f"PLB cong_thresh {self.cong_thresh}: must be 0..{PLB_SCALE} (1/256 units)")
        if self.suspend_rto_sec < 0:
            raise ValueError(f"PLB suspend_rto_sec {self.suspend_rto_sec}: must not be negative")

    @classmethod
    def with_fraction(cls, k: float, **kw: object) -> "PlbParams":
        """``cong_thresh`` from a fraction (0.5 -> 128)."""
        if not 0 <= k <= 1:
            raise ValueError(f"PLB congestion threshold {k}: a fraction 0..1")
        return cls(cong_thresh=round(k * PLB_SCALE), **kw)  # type: ignore[arg-type]


@dataclass
class PlbState:
    """One flow's PLB state (struct tcp_plb_state) and what it did."""

    params: PlbParams = field(default_factory=PlbParams)
    consec_cong_rounds: int = 0
    pause_until: float | None = None     # monotonic seconds; None: no recent RTO holds PLB
    rounds: int = 0
    congested_rounds: int = 0
    rehashes: int = 0
    last_ratio: int | None = None

    def update(self, ratio: int | None) -> None:
        """One round's congestion ratio (tcp_plb_update_state); None: nothing delivered."""
        if ratio is None:
            return
        self.rounds += 1
        self.last_ratio = ratio
        if ratio < self.params.cong_thresh:
            self.consec_cong_rounds = 0
            return
        self.congested_rounds += 1
        if self.consec_cong_rounds < self.params.rehash_rounds:
            self.consec_cong_rounds += 1

    def check_rehash(self, now: float, in_flight: bool) -> bool:
        """True when the flow must take a new path now (tcp_plb_check_rehash); the count is then
        reset and the repath counted."""
        p = self.params
        forced = self.consec_cong_rounds >= p.rehash_rounds
        idle = bool(p.idle_rehash_rounds) and not in_flight and self.consec_cong_rounds >= p.idle_rehash_rounds
        if not forced and not idle:
            return False
        if self.pause_until is not None and now >= self.pause_until:
            self.pause_until = None
        if self.pause_until is not None:
            return False
        self.consec_cong_rounds = 0
        self.rehashes += 1
        return True

    def on_rto(self, now: float, random_below: Callable[[float], float]) -> None:
        """A retransmission timeout (tcp_plb_update_state_upon_rto): hold still for the
        suspension plus ``random_below(suspension)``, and start counting afresh. The caller
        repaths the flow itself (TCP's RTO does, with sk_rethink_txhash)."""
        pause = self.params.suspend_rto_sec
        self.pause_until = now + pause + random_below(pause)
        self.consec_cong_rounds = 0

    def paused(self, now: float) -> bool:
        return self.pause_until is not None and now < self.pause_until
