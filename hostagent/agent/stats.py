"""What a host agent reports: `AgentStats`, written as one JSON file (replaced atomically, so a
reader never sees half of it) that the lab, benchmarks and the Prometheus collector
(`hostagent.agent.metrics`) read. Totals only grow over the agent's life; per-flow records
describe the flows the agent is tracking now."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class SentFlowStats:
    """A flow this host sends (PLB and DCQCN act on these)."""

    flow: str                           # FlowKey.describe()
    src: str
    dst: str
    protocol: str
    sport: int
    dport: int
    qp: int
    packets: int = 0
    bytes: int = 0
    label: int = 0                      # IPv6 flow label on the wire now
    wire_sport: int = 0                 # source port on the wire now
    rounds: int = 0                     # PLB rounds with deliveries
    congested_rounds: int = 0
    consec_cong_rounds: int = 0
    ce_fraction: float | None = None    # of the last round (TCP: ECN-Echo among ACKs; RoCEv2: CE the receiver saw)
    repaths: int = 0
    rtos: int = 0
    paused: bool = False                # PLB holding still after an RTO
    cnps: int = 0                       # CNPs received
    rate_bps: float | None = None       # DCQCN current rate (None: no CNP yet, line rate)
    target_rate_bps: float | None = None
    alpha: float | None = None
    stage: str | None = None


@dataclass
class ReceivedFlowStats:
    """A flow this host receives (its notification point)."""

    flow: str
    packets: int = 0
    ce: int = 0
    cnps_sent: int = 0
    reports_sent: int = 0


@dataclass
class Totals:
    rounds: int = 0
    congested_rounds: int = 0
    repaths: int = 0
    rtos: int = 0
    cnps_received: int = 0
    cnps_sent: int = 0
    reports_sent: int = 0
    rate_updates: int = 0
    flows_forgotten: int = 0


@dataclass
class AgentStats:
    host: str
    mode: str
    iface: str
    pid: int
    started: float                      # CLOCK_REALTIME seconds
    updated: float
    totals: Totals = field(default_factory=Totals)
    sent: list[SentFlowStats] = field(default_factory=list)
    received: list[ReceivedFlowStats] = field(default_factory=list)
    bpf: dict[str, list[int]] = field(default_factory=dict)    # kernel ids of its programs and maps
    stopped: bool = False               # the final write, after detaching

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "AgentStats":
        d = dict(data)
        d["totals"] = Totals(**d.get("totals", {}))
        d["sent"] = [SentFlowStats(**f) for f in d.get("sent", [])]
        d["received"] = [ReceivedFlowStats(**f) for f in d.get("received", [])]
        return cls(**d)

    def write(self, path: Path | str) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path | str) -> "AgentStats":
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ValueError(f"host agent stats {path}: {err}") from None

    def flow(self, description: str) -> SentFlowStats | None:
        return next((f for f in self.sent if f.flow == description), None)
