"""What every flow under a host congestion control shares: the control's name, the network
its published defaults are scaled to (`hostagent.congestion.make_control`) and the parameters a
user set over them. The traffic senders
(`hostagent.traffic.controlled`) and the collectives' reliable transport
(`hostagent.collectives.peer_cc`) take it alike."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

SENDER_CONTROLS = ("timely", "swift")     # those that need nothing but the acknowledgements' times


@dataclass(frozen=True)
class CcSettings:
    """What every controlled flow of a run shares: the control's name, what its published
    defaults are scaled to (the lab's line rate and unloaded RTT: `hostagent.congestion`) and
    ``params``, fields of its Params set over the scaled defaults (`parse_param`)."""

    name: str
    link_bps: float
    base_rtt_s: float
    params: dict[str, float | int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in SENDER_CONTROLS:
            why = (" (HPCC reads each hop's queue, tx bytes and link rate from the data packets' telemetry, "
                   "which the fabric program does not stamp)" if self.name == "hpcc" else "")
            raise ValueError(f"congestion control {self.name!r}: the hosts run {', '.join(SENDER_CONTROLS)}{why}")
        if not self.link_bps > 0 or not self.base_rtt_s > 0:
            raise ValueError(f"congestion control {self.name}: link {self.link_bps} bits/s and base RTT "
                             f"{self.base_rtt_s} s must be positive")

    def to_arg(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_arg(cls, text: str) -> "CcSettings":
        try:
            return cls(**json.loads(text))
        except (TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"--cc {text!r}: {err}") from None


def parse_param(text: str) -> tuple[str, float | int | None]:
    """``FIELD=VALUE`` of a control's Params (``base_target_s=5e-3``, ``hai_n=3``,
    ``init_cwnd=none``): the field's name and its number (int where written as one) or None;
    ValueError naming the text. Whether the control has the field is `make_control`'s check."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name.isidentifier() or not value:
        raise ValueError(f"{text!r}: FIELD=VALUE, e.g. base_target_s=0.005")
    if value.lower() == "none":
        return name, None
    for number in (int, float):
        try:
            return name, number(value)
        except ValueError:
            pass
    raise ValueError(f"{text!r}: {value!r} is not a number nor none")
