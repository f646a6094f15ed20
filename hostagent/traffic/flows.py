"""What one flow of a traffic run is (`FlowSpec`), and the form a sender process reads it in.

A flow is named by host names (the patterns know nothing of addresses); the driver
(`hostagent.traffic.drive`) gives it a flow id and its destination's address (`WireFlow`) for
the sender process on the source host.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

PROTOCOLS = ("udp", "tcp")
ROCEV2_PORT = 4791            # UDP destination port of RoCEv2; the source port is the flow's entropy
TCP_PORT = 5001               # default TCP destination port of the receivers
ENTROPY_PORTS = (49152, 65535)  # source ports are drawn from the IANA dynamic range
MAX_UDP_PACKETS = 1 << 24     # the sequence number travels in the 24-bit PSN field of a BTH
UDP_HEADER_BYTES = 24         # BTH-shaped header of every datagram (see hostagent.traffic.wire)
MAX_UDP_PAYLOAD = 65507


@dataclass(frozen=True)
class FlowSpec:
    """One flow: ``size`` datagrams (UDP, paced at ``rate_pps``, each with ``payload`` bytes of
    UDP payload) or ``size`` bytes (TCP, the kernel's congestion control paces it), starting
    ``start`` seconds after the run's common start."""

    src: str
    dst: str
    protocol: str
    sport: int
    dport: int
    size: int
    start: float = 0.0
    payload: int = 256
    rate_pps: float = 100.0
    dscp: int = 0                 # the datagrams' DSCP (the switches map it to a traffic class)
    priority: int = 0             # that class: what a PFC pause of the host holds (hostagent.lossless)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"flow {self.src}->{self.dst}: protocol {self.protocol!r} is not one of {PROTOCOLS}")
        if self.src == self.dst:
            raise ValueError(f"flow {self.src}->{self.dst}: source and destination are the same host")
        for name, port in (("sport", self.sport), ("dport", self.dport)):
            if not 1 <= port <= 65535:
                raise ValueError(f"flow {self.src}->{self.dst}: {name} {port} is not in 1..65535")
        if self.size < 1:
            raise ValueError(f"flow {self.src}->{self.dst}: size {self.size} must be at least 1")
        if not 0 <= self.dscp < 64 or not 0 <= self.priority < 8:
            raise ValueError(f"flow {self.src}->{self.dst}: DSCP {self.dscp} (0..63), class {self.priority} (0..7)")
        if self.start < 0:
            raise ValueError(f"flow {self.src}->{self.dst}: start {self.start} must not be negative")
        if self.protocol == "udp":
            if self.size > MAX_UDP_PACKETS:
                raise ValueError(f"flow {self.src}->{self.dst}: {self.size} datagrams, at most {MAX_UDP_PACKETS}")
            if not UDP_HEADER_BYTES <= self.payload <= MAX_UDP_PAYLOAD:
                raise ValueError(f"flow {self.src}->{self.dst}: payload {self.payload} bytes is not in "
                                 f"{UDP_HEADER_BYTES}..{MAX_UDP_PAYLOAD}")
            if not self.rate_pps > 0:
                raise ValueError(f"flow {self.src}->{self.dst}: rate_pps {self.rate_pps} must be positive")

    @property
    def bytes(self) -> int:
        """Payload bytes the flow carries (UDP: all its datagrams' payloads; TCP: its stream)."""
        return self.size * self.payload if self.protocol == "udp" else self.size

    @property
    def duration(self) -> float | None:
        """Seconds the sender's pacing takes for a UDP flow (first to last datagram); None for TCP."""
        return (self.size - 1) / self.rate_pps if self.protocol == "udp" else None


@dataclass(frozen=True)
class WireFlow:
    """A flow as the sender process reads it: its id and destination address beside the spec.
    As JSON one flat object: ``id``, ``dst_addr`` and the `FlowSpec` fields, of which ``src``
    and ``dst`` (host names) may be left out."""

    id: int
    dst_addr: str
    spec: FlowSpec

    @classmethod
    def from_dict(cls, data: dict) -> "WireFlow":
        fields = dict(data)
        try:
            flow_id, dst_addr = fields.pop("id"), fields.pop("dst_addr")
            fields.setdefault("src", "this host")
            fields.setdefault("dst", dst_addr)
            flow = cls(flow_id, dst_addr, FlowSpec(**fields))
        except (KeyError, TypeError) as err:
            raise ValueError(f"flow {data!r}: {err}") from None
        if not 0 <= flow.id < 1 << 24:
            raise ValueError(f"flow {data!r}: id {flow.id} is not in 0..2^24-1 (it travels as a BTH queue pair)")
        return flow

    def to_dict(self) -> dict:
        return {"id": self.id, "dst_addr": self.dst_addr, **asdict(self.spec)}
