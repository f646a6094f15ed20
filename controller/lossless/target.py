"""The traffic classes on the switches' targets, through their run-time control (P4Runtime cannot
set a target's queues or buffers, as it cannot set queue rates): the commands for one switch, and
what a target cannot do.

softswitch takes them all (softswitch/ctl.py): per port and class its depth, weight and bit rate,
the lossless classes' PFC thresholds (set_lossless / clear_lossless, every data port of the
switch) and the watchdog. BMv2 (simple_switch) takes a class's depth (``set_queue_depth D PORT
PRIO``) and packet rate, nothing else: its priority queues are strict, paced one by one in
packets/s, and it has no PFC (no PAUSE frames, no buffer accounting per ingress port), which is
`Unsupported`'s message.
"""
from __future__ import annotations

from typing import Callable, Protocol

from controller.lossless.config import LosslessConfig, TrafficClass


class Unsupported(Exception):
    """A target cannot do what the classes ask; the message says what and why."""


BMV2_PFC = ("PFC needs softswitch: BMv2's simple_switch has no priority flow control (it sends and takes no "
            "802.1Qbb PAUSE frames and counts no buffer per ingress port and class; its priority queues are "
            "strict, each paced on its own in packets/s)")


class RuntimeControl(Protocol):
    """A switch's run-time control: ``command(switch, line)`` answers as softswitch-ctl does
    (``ok``, JSON; an error raises), ``target(switch)`` is "softswitch" or "bmv2"."""

    def command(self, switch: str, line: str) -> str: ...

    def target(self, switch: str) -> str: ...


class CallableControl:
    """A `RuntimeControl` of two functions (the lab's: a P4Switch node's runtime_command)."""

    def __init__(self, command: Callable[[str, str], str], target: Callable[[str], str]):
        self._command, self._target = command, target

    def command(self, switch: str, line: str) -> str:
        return self._command(switch, line)

    def target(self, switch: str) -> str:
        return self._target(switch)


def class_commands(c: TrafficClass, ports: list[int]) -> list[str]:
    """One class's queue settings on every port of a switch."""
    out = []
    for port in ports:
        if c.depth is not None:
            out.append(f"set_queue_depth {c.depth} {port} {c.priority}")
        out.append(f"set_queue_weight {c.weight} {port} {c.priority}")
        if c.bitrate is not None:
            out.append(f"set_queue_bitrate {c.bitrate} {port} {c.priority}")
    return out


def lossless_commands(config: LosslessConfig, lossless: set[int]) -> list[str]:
    """The lossless classes' thresholds (every data port), the others lossy, and the watchdog."""
    out = []
    for c in config.classes:
        if c.priority in lossless:
            t = c.pfc
            out.append(f"set_lossless {c.priority} {t.xoff} {t.xon} {t.headroom} {t.quanta}")
        else:
            out.append(f"clear_lossless {c.priority}")
    wd = config.watchdog
    out.append(f"set_pfc_watchdog {wd.detect_ms} {wd.restore_ms} {wd.poll_ms} {wd.action}" if wd is not None
               else "set_pfc_watchdog 0 0 10 drop")
    return out


def check_target(kind: str, switch: str, config: LosslessConfig, lossless: set[int]) -> None:
    """Unsupported when ``kind`` cannot run ``config`` with ``lossless`` classes."""
    if kind == "softswitch":
        return
    if lossless or config.watchdog is not None:
        raise Unsupported(f"{switch}: {BMV2_PFC}")
    extra = [c.label for c in config.classes if c.weight or c.bitrate]
    if extra:
        raise Unsupported(f"{switch}: {', '.join(extra)}: BMv2 serves its priority queues by strict priority "
                          f"alone and paces them in packets/s (no weights, no bit rates); softswitch does both")
