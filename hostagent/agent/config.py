"""What one host agent does (`AgentConfig`), and the same as a command line (`AgentConfig.argv`,
`from_args`), so a lab can start agents with exactly the configuration its caller built.

Modes: ``plb`` (repathing on ECN, TCP and RoCEv2-like UDP), ``dcqcn`` (CNPs from receivers,
the reaction point setting senders' rates) and ``plb+dcqcn``. In every mode RoCEv2 data leaves
ECN-capable (ECT(0)), as a RoCE NIC sends it, so the fabric can mark it.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from hostagent.agent.dcqcn import DcqcnParams
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic.ratecontrol import RATE_CONTROL_PORT

MODES = ("plb", "dcqcn", "plb+dcqcn")
DEFAULT_ROUND_S = 0.02          # about one RTT of an emulated fat-tree under load
DEFAULT_LINE_RATE_BPS = 10e6    # what DCQCN's parameters are scaled to unless told
_RATE = re.compile(r"^([0-9]*\.?[0-9]+)\s*([kKmMgG]?)(bit|bps|b)?(/s)?$")
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def parse_rate(text: str) -> float:
    """Bits/s from ``10M``, ``8.6Mbit``, ``1G``, ``500k`` or a plain number."""
    m = _RATE.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"rate {text!r}: give bits/s, e.g. 10M, 8.6Mbit, 1G")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


@dataclass(frozen=True)
class AgentConfig:
    mode: str
    iface: str | None = None                 # None: the namespace's only interface besides lo
    round_s: float = DEFAULT_ROUND_S          # PLB round
    plb: PlbParams = field(default_factory=PlbParams)
    line_rate_bps: float = DEFAULT_LINE_RATE_BPS
    dcqcn: DcqcnParams | None = None          # None: DCQCN's defaults scaled to line_rate_bps
    report_interval_s: float | None = None    # receiver reports for RoCEv2 PLB; None: round_s
    rate_control_port: int = RATE_CONTROL_PORT
    stats_path: str | None = None             # JSON counters, rewritten every stats_interval_s
    stats_interval_s: float = 0.5
    idle_forget_s: float = 2.0                # a flow that sent nothing this long is forgotten
    tcp_ecn: bool = True                      # PLB: net.ipv4.tcp_ecn=1 in the namespace while running
    seed: int | None = None                   # of the new labels and ports (None: fresh)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"host agent mode {self.mode!r}: one of {', '.join(MODES)}")
        for name in ("round_s", "line_rate_bps", "stats_interval_s", "idle_forget_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"host agent {name} {getattr(self, name)}: must be positive")
        if self.report_interval_s is not None and not self.report_interval_s > 0:
            raise ValueError(f"host agent report_interval_s {self.report_interval_s}: must be positive")
        if not 1 <= self.rate_control_port <= 65535:
            raise ValueError(f"host agent rate_control_port {self.rate_control_port}: not in 1..65535")
        if self.dcqcn is not None and self.dcqcn.line_rate_bps != self.line_rate_bps:
            raise ValueError(f"host agent: DCQCN parameters for {self.dcqcn.line_rate_bps:g} bits/s "
                             f"but line_rate_bps {self.line_rate_bps:g}")

    @property
    def plb_on(self) -> bool:
        return "plb" in self.mode

    @property
    def dcqcn_on(self) -> bool:
        return "dcqcn" in self.mode

    @property
    def dcqcn_params(self) -> DcqcnParams:
        return self.dcqcn or DcqcnParams().scaled(self.line_rate_bps)

    @property
    def report_interval(self) -> float:
        return self.report_interval_s or self.round_s

    def with_stats(self, path: Path | str) -> "AgentConfig":
        return replace(self, stats_path=str(path))

    def argv(self) -> list[str]:
        """The `hostagent` command line (after the program name) for this configuration."""
        out = [self.mode, "--round-ms", repr(self.round_s * 1e3), "--line-rate", repr(self.line_rate_bps),
               "--rate-control-port", str(self.rate_control_port), "--stats-interval-s", repr(self.stats_interval_s),
               "--idle-forget-s", repr(self.idle_forget_s)]
        p = self.plb
        out += ["--rehash-rounds", str(p.rehash_rounds), "--idle-rehash-rounds", str(p.idle_rehash_rounds),
                "--cong-thresh", str(p.cong_thresh), "--suspend-rto-sec", repr(p.suspend_rto_sec)]
        if self.dcqcn is not None:
            d = self.dcqcn
            out += ["--dcqcn-g", repr(d.g), "--cnp-interval-us", repr(d.cnp_interval_s * 1e6),
                    "--alpha-timer-us", repr(d.alpha_timer_s * 1e6), "--rate-timer-us", repr(d.rate_timer_s * 1e6),
                    "--byte-counter", str(d.byte_counter), "--fast-recovery-steps", str(d.fast_recovery_steps),
                    "--ai-rate", repr(d.ai_rate_bps), "--hai-rate", repr(d.hai_rate_bps),
                    "--min-rate", repr(d.min_rate_bps), "--initial-alpha", repr(d.initial_alpha)]
        for flag, value in (("--iface", self.iface), ("--stats", self.stats_path), ("--seed", self.seed)):
            if value is not None:
                out += [flag, str(value)]
        if self.report_interval_s is not None:
            out += ["--report-interval-ms", repr(self.report_interval_s * 1e3)]
        if not self.tcp_ecn:
            out.append("--no-tcp-ecn")
        return out


_DCQCN_FLAGS = {"g": "dcqcn_g", "cnp_interval_s": "cnp_interval_us", "alpha_timer_s": "alpha_timer_us",
                "rate_timer_s": "rate_timer_us", "byte_counter": "byte_counter",
                "fast_recovery_steps": "fast_recovery_steps", "ai_rate_bps": "ai_rate", "hai_rate_bps": "hai_rate",
                "min_rate_bps": "min_rate", "initial_alpha": "initial_alpha"}
_MICRO = {"cnp_interval_s", "alpha_timer_s", "rate_timer_s"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of one agent (the mode is the subcommand)."""
    p.add_argument("--iface", help="interface to attach to (default: the namespace's only one besides lo)")
    p.add_argument("--round-ms", type=float, default=DEFAULT_ROUND_S * 1e3, help="PLB round, about one RTT")
    plb = PlbParams()
    p.add_argument("--rehash-rounds", type=int, default=plb.rehash_rounds,
                   help="N, consecutive congested rounds before a repath (net.ipv4.tcp_plb_rehash_rounds)")
    p.add_argument("--idle-rehash-rounds", type=int, default=plb.idle_rehash_rounds,
                   help="M, congested rounds before a repath with nothing in flight, 0: never "
                        "(net.ipv4.tcp_plb_idle_rehash_rounds)")
    p.add_argument("--cong-thresh", type=int, default=plb.cong_thresh,
                   help="K in 1/256, CE fraction that makes a round congested (net.ipv4.tcp_plb_cong_thresh)")
    p.add_argument("--suspend-rto-sec", type=float, default=plb.suspend_rto_sec,
                   help="hold still this long (plus up to as much again) after an RTO (net.ipv4.tcp_plb_suspend_rto_sec)")
    p.add_argument("--report-interval-ms", type=float, help="receiver reports for RoCEv2 PLB (default: the round)")
    p.add_argument("--line-rate", type=parse_rate, default=DEFAULT_LINE_RATE_BPS,
                   help="emulated line rate (bits/s: 10M, 1G) DCQCN's parameters are scaled to")
    p.add_argument("--dcqcn-g", type=float, help="DCQCN g (default 1/256)")
    p.add_argument("--cnp-interval-us", type=float, help="at most one CNP per flow per interval (default 50 us, scaled)")
    p.add_argument("--alpha-timer-us", type=float, help="alpha decay timer (default 55 us, scaled)")
    p.add_argument("--rate-timer-us", type=float, help="rate-increase timer (default 55 us, scaled)")
    p.add_argument("--byte-counter", type=int, help="rate increase every so many bytes (default 10 MiB)")
    p.add_argument("--fast-recovery-steps", type=int, help="F (default 5)")
    p.add_argument("--ai-rate", type=parse_rate, help="additive increase step, bits/s (default scaled 40M)")
    p.add_argument("--hai-rate", type=parse_rate, help="hyper increase step, bits/s (default scaled 400M)")
    p.add_argument("--min-rate", type=parse_rate, help="lowest rate, bits/s (default scaled 10M)")
    p.add_argument("--initial-alpha", type=float, help="alpha before the first CNP (default 1)")
    p.add_argument("--rate-control-port", type=int, default=RATE_CONTROL_PORT,
                   help="the traffic sender's rate-control port on 127.0.0.1 (hostagent.traffic.ratecontrol)")
    p.add_argument("--stats", help="write counters as JSON to this file (atomically, every --stats-interval-s)")
    p.add_argument("--stats-interval-s", type=float, default=0.5)
    p.add_argument("--idle-forget-s", type=float, default=2.0, help="forget a flow that sent nothing this long")
    p.add_argument("--no-tcp-ecn", action="store_true", help="leave net.ipv4.tcp_ecn as it is")
    p.add_argument("--seed", type=int, help="seed of the new labels and ports")


def from_args(mode: str, args: argparse.Namespace) -> AgentConfig:
    line = args.line_rate
    overrides = {}
    for name, flag in _DCQCN_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            overrides[name] = value / 1e6 if name in _MICRO else value
    dcqcn = replace(DcqcnParams().scaled(line), **overrides) if overrides else None
    return AgentConfig(
        mode=mode, iface=args.iface, round_s=args.round_ms / 1e3,
        plb=PlbParams(args.rehash_rounds, args.idle_rehash_rounds, args.cong_thresh, args.suspend_rto_sec),
        line_rate_bps=line, dcqcn=dcqcn,
        report_interval_s=args.report_interval_ms / 1e3 if args.report_interval_ms is not None else None,
        rate_control_port=args.rate_control_port, stats_path=args.stats, stats_interval_s=args.stats_interval_s,
        idle_forget_s=args.idle_forget_s, tcp_ecn=not args.no_tcp_ecn, seed=args.seed)

