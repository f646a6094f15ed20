"""What every flow under a host congestion control shares: the control's name and the network
its published defaults are scaled to (`hostagent.congestion.make_control`). The traffic senders
(`hostagent.traffic.controlled`) and the collectives' reliable transport
(`hostagent.collectives.peer_cc`) take it alike."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

SENDER_CONTROLS = ("timely", "swift")     # those that need nothing but the acknowledgements' times


@dataclass(frozen=True)
class CcSettings:
    """What every controlled flow of a run shares: the control's name and what its published
    defaults are scaled to (the lab's line rate and unloaded RTT: `hostagent.congestion`)."""

    name: str
    link_bps: float
    base_rtt_s: float

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
