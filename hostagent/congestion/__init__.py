"""Delay- and telemetry-based congestion controls of AI fabrics, for the lab's traffic senders and
the collectives' reliable transport.

TIMELY (an RTT gradient drives a rate), Swift (delay against a target drives a fabric and an
endpoint window) and HPCC (per-hop INT drives a window and its rate). Each is fed `AckSample`s
and retransmit timeouts and answers `window_packets` and `rate_bps`; `make_control` builds one by
name with the published defaults carried over to the network (`...Params.scaled`).
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from hostagent.congestion.hpcc import Hpcc, HpccParams
from hostagent.congestion.sample import AckSample, CongestionControl, HopTelemetry
from hostagent.congestion.settings import SENDER_CONTROLS, CcSettings, parse_param
from hostagent.congestion.swift import Swift, SwiftParams
from hostagent.congestion.timely import Timely, TimelyParams

CONTROLS: dict[str, tuple[type, type]] = {
    "timely": (Timely, TimelyParams),
    "swift": (Swift, SwiftParams),
    "hpcc": (Hpcc, HpccParams),
}


def make_control(name: str, link_bps: float, base_rtt_s: float, frame_bytes: int,
                 **overrides: Any) -> CongestionControl:
    """The control ``name`` for a network of ``link_bps``, ``base_rtt_s`` and ``frame_bytes``:
    its Params scaled to that network (`TimelyParams.scaled`, ...), then ``overrides`` (Params
    fields) applied."""
    try:
        control, params_cls = CONTROLS[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"congestion control {name!r}: valid names are {', '.join(sorted(CONTROLS))}") from None
    params = params_cls.scaled(link_bps, base_rtt_s, frame_bytes)
    if overrides:
        known = {f.name for f in fields(params_cls)}
        if unknown := sorted(set(overrides) - known):
            raise ValueError(f"{params_cls.__name__} has no field {', '.join(unknown)} "
                             f"(fields: {', '.join(sorted(known))})")
        params = replace(params, **overrides)
    return control(link_bps, base_rtt_s, frame_bytes, params)


def settings_control(settings: CcSettings, frame_bytes: int) -> CongestionControl:
    """The control ``settings`` describe, for one flow of ``frame_bytes`` frames; ValueError
    naming a parameter the control does not have or a value its Params refuse."""
    return make_control(settings.name, settings.link_bps, settings.base_rtt_s, frame_bytes, **settings.params)


__all__ = ["AckSample", "CcSettings", "CongestionControl", "HopTelemetry", "Hpcc", "HpccParams", "Swift",
           "SwiftParams", "Timely", "TimelyParams", "make_control", "parse_param", "settings_control", "CONTROLS", "SENDER_CONTROLS"]
