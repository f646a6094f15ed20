"""DCQCN's reaction point (Zhu et al., SIGCOMM'15), one flow's sending rate, as pure logic:
every method takes the time; nothing here reads a clock.

* CNP (`ReactionPoint.on_cnp`): target rate RT = current rate RC, RC = RC (1 - alpha/2) (not
  below the minimum rate), alpha = (1 - g) alpha + g; the rate-increase timer, byte counter
  and both event counts start again.
* alpha timer: every ``alpha_timer_s`` without a CNP, alpha = (1 - g) alpha.
* rate increase, one event per ``rate_timer_s`` (timer, T) and per ``byte_counter`` bytes sent
  (byte counter, BC), each event then RC = (RT + RC) / 2 after moving RT by stage:
  fast recovery while both counts are at most F (RT stays), additive increase when one of them
  is past F (RT += R_AI), hyper increase when both are (RT += i R_HAI, i = min(T, BC) - F);
  RT and RC never exceed the line rate.

Rates are bits/s. Defaults are DCQCN's at the paper's 40 Gbit/s: g = 1/256, a CNP at most
every 50 us per flow (the notification point, applied by the receiver's BPF program), alpha
and rate timers of 55 us, a 10 MB byte counter, F = 5, R_AI = 40 Mbit/s; R_HAI (ten times
R_AI) and the minimum rate (10 Mbit/s) are this project's choices.

Emulated links are thousands of times slower than 40 Gbit/s, so `DcqcnParams.scaled` keeps
the dynamics the same *in packet times*: with s = 40 Gbit/s / the emulated line rate, every
interval (CNP, alpha, rate timer) is s times longer, every rate step (R_AI, R_HAI, minimum)
the same fraction of the line rate (s times smaller), and the byte counter stays in bytes
(it already counts packets). At 10 Mbit/s, s = 4000: a CNP at most every 200 ms, timers of
220 ms, R_AI = 10 kbit/s.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

REFERENCE_LINE_BPS = 40e9


@dataclass(frozen=True)
class DcqcnParams:
    line_rate_bps: float = REFERENCE_LINE_BPS
    g: float = 1 / 256
    cnp_interval_s: float = 50e-6
    alpha_timer_s: float = 55e-6
    rate_timer_s: float = 55e-6
    byte_counter: int = 10 * 1024 * 1024
    fast_recovery_steps: int = 5
    ai_rate_bps: float = 40e6
    hai_rate_bps: float = 400e6
    min_rate_bps: float = 10e6
    initial_alpha: float = 1.0

    def __post_init__(self) -> None:
        for name in ("line_rate_bps", "cnp_interval_s", "alpha_timer_s", "rate_timer_s", "byte_counter"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DCQCN {name} {getattr(self, name)}: must be positive")
        if not 0 < self.g <= 1 or not 0 <= self.initial_alpha <= 1:
            raise ValueError(f"DCQCN g {self.g} and initial alpha {self.initial_alpha}: fractions (g above 0)")
        if self.fast_recovery_steps < 0:
            raise ValueError(f"DCQCN fast_recovery_steps {self.fast_recovery_steps}: must not be negative")
        for name in ("ai_rate_bps", "hai_rate_bps", "min_rate_bps"):
            if not 0 <= getattr(self, name) <= self.line_rate_bps:
                raise ValueError(f"DCQCN {name} {getattr(self, name)}: must be 0..the line rate {self.line_rate_bps}")

    @property
    def time_scale(self) -> float:
        """How much slower than DCQCN's 40 Gbit/s reference this line is."""
        return REFERENCE_LINE_BPS / self.line_rate_bps

    def scaled(self, line_rate_bps: float) -> "DcqcnParams":
        """These parameters (given at ``self.line_rate_bps``) for a line of ``line_rate_bps``,
        the same in packet times (see the module docstring)."""
        if not line_rate_bps > 0:
            raise ValueError(f"DCQCN line rate {line_rate_bps}: must be positive")
        s = self.line_rate_bps / line_rate_bps
        return replace(self, line_rate_bps=line_rate_bps, cnp_interval_s=self.cnp_interval_s * s,
                       alpha_timer_s=self.alpha_timer_s * s, rate_timer_s=self.rate_timer_s * s,
                       ai_rate_bps=self.ai_rate_bps / s, hai_rate_bps=self.hai_rate_bps / s,
                       min_rate_bps=self.min_rate_bps / s)


@dataclass
class ReactionPoint:
    """One flow's DCQCN state. It starts at the line rate (a NIC's rate limiter before any CNP)."""

    params: DcqcnParams
    now: float
    rc: float = 0.0                 # current rate, bits/s
    rt: float = 0.0                 # target rate
    alpha: float = 0.0
    timer_events: int = 0           # T: rate-increase timer events since the last CNP
    byte_events: int = 0            # BC: byte-counter events since the last CNP
    stage: str = "line_rate"        # line_rate | cut | fast_recovery | additive | hyper
    cnps: int = 0
    increases: int = 0
    _bytes_left: int = field(default=0, repr=False)
    _next_alpha: float = field(default=0.0, repr=False)
    _next_rate: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        p = self.params
        self.rc = self.rt = self.rc or p.line_rate_bps
        self.alpha = p.initial_alpha
        self._bytes_left = p.byte_counter
        self._next_alpha = self.now + p.alpha_timer_s
        self._next_rate = self.now + p.rate_timer_s

    @property
    def rate_bps(self) -> float:
        return self.rc

    def advance(self, now: float) -> None:
        """Run the alpha and rate-increase timers up to ``now``, in order."""
        p = self.params
        while True:
            due = min(self._next_alpha, self._next_rate)
            if due > now:
                break
            if self._next_alpha <= self._next_rate:
                self.alpha *= 1 - p.g
                self._next_alpha += p.alpha_timer_s
            else:
                self.timer_events += 1
                self._increase()
                self._next_rate += p.rate_timer_s
        self.now = max(self.now, now)

    def on_sent(self, nbytes: int, now: float) -> None:
        """``nbytes`` more sent by ``now``: byte-counter events, after the timers due by then."""
        self.advance(now)
        while nbytes >= self._bytes_left:
            nbytes -= self._bytes_left
            self._bytes_left = self.params.byte_counter
            self.byte_events += 1
            self._increase()
        self._bytes_left -= nbytes

    def on_cnp(self, now: float) -> None:
        """A CNP arrived: cut the rate (see the module docstring)."""
        self.advance(now)
        p = self.params
        self.cnps += 1
        self.rt = self.rc
        self.rc = max(p.min_rate_bps, self.rc * (1 - self.alpha / 2))
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.timer_events = self.byte_events = 0
        self._bytes_left = p.byte_counter
        self._next_alpha = now + p.alpha_timer_s
        self._next_rate = now + p.rate_timer_s
        self.stage = "cut"

    def _increase(self) -> None:
        p = self.params
        f = p.fast_recovery_steps
        t, bc = self.timer_events, self.byte_events
        if t <= f and bc <= f:
            self.stage = "fast_recovery"
        elif t > f and bc > f:
            self.stage = "hyper"
            self.rt += (min(t, bc) - f) * p.hai_rate_bps
        else:
            self.stage = "additive"
            self.rt += p.ai_rate_bps
        self.rt = min(self.rt, p.line_rate_bps)
        self.rc = min((self.rt + self.rc) / 2, p.line_rate_bps)
        self.increases += 1
