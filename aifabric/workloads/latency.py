"""What an op costs on a fabric with latency: the alpha-beta model NCCL's tuner and the network
simulators use, with the lab's own constants.

A collective runs as steps; in a step every member sends one message to a peer and waits for
one. A message of m bytes costs ``alpha + m_wire / link rate``: alpha is a fixed software cost
per message at its two ends (`Costs.message_s`) plus a per-switch-hop latency (`Costs.hop_s`)
times the switch hops between the two ranks; m_wire is m plus each packet's headers and
Ethernet overhead and the acknowledgements the receiver sends back (`Costs.frame_overhead_bytes`,
per ``Costs.payload_per_frame`` bytes of message). A call also pays `Costs.call_s` (entering and
leaving the library, waking its threads) and first agrees on a header with all members: a
dissemination all-gather of a few bytes, ceil(log2 n) messages (hostagent.collectives.headers).
A message's and a call's fixed costs depend on how many ranks take part (on a few cores, a step
of eight processes waits for more of them to be scheduled than a step of two): `Costs.by_group`
holds them for the group sizes a calibration measured, other sizes take the general ones.

Steps of each kind, as the lab's ranks run them (hostagent.workload_runner: ring algorithms,
pairwise all-to-all), for a buffer of B bytes in nccl-tests' sense (`ops`) among n ranks:

* all_reduce: 2(n-1) steps of B/n (reduce-scatter, then all-gather around the ring);
* reduce_scatter, all_gather, all_to_all: n-1 steps of B/n;
* broadcast: the buffer pipelined down a tree of depth ceil(log2 n): its alpha that many times,
  its bytes once;
* send/recv: one message of B, no header agreement;
* all_reduce in the switches: the buffer up once and the sums down once in aggregation frames
  (`Costs.agg_frame_overhead_bytes` per `Costs.agg_values_per_frame` values), the first frame's
  round trip to the tree's root (alpha over twice its hops), at most `Costs.agg_window_frames`
  frames in flight: bytes then move at min(link, window / round trip). The first chunks' shared
  exponents travel in the header agreement (hostagent.collectives.headers), no frame of their own.

With every latency 0 and no per-frame overhead (`LINK_BOUND`) the model is the link-bound
estimate: B times nccl-tests' bus-bandwidth factor over the link rate.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import combinations

import networkx as nx

from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.ops import Kind
from aifabric.workloads.placement import Placement
from topologies.fabric import Fabric

ITEM_BYTES = 4            # the ranks move float32 (hostagent.workload_runner)


@dataclass(frozen=True)
class Costs:
    """The model's constants; a calibration run on the fabric at hand measures the latencies."""

    link_bytes_per_s: float                 # one link direction's rate, in bytes of wire a second
    message_s: float = 0.0                  # a message's fixed cost, sender and receiver together
    hop_s: float = 0.0                      # one switch hop, one way
    call_s: float = 0.0                     # a call's fixed cost beyond its messages
    payload_per_frame: int = 1              # message bytes a data frame carries (1: costed per byte)
    frame_overhead_bytes: float = 0.0       # wire bytes a data frame adds to its payload, acks included
    agg_values_per_frame: int = 1           # in-network: values a frame carries
    agg_frame_overhead_bytes: float = 0.0   # in-network: wire bytes a frame adds to its values
    agg_window_frames: int = 0              # in-network: frames in flight per worker (0: no limit)
    by_group: tuple[tuple[int, float, float], ...] = ()   # (ranks, message_s, call_s) measured for that size

    def __post_init__(self) -> None:
        if not self.link_bytes_per_s > 0:
            raise WorkloadError(f"costs: link rate {self.link_bytes_per_s} bytes/s must be positive")
        for name in ("message_s", "hop_s", "call_s", "frame_overhead_bytes", "agg_frame_overhead_bytes"):
            if getattr(self, name) < 0:
                raise WorkloadError(f"costs: {name} {getattr(self, name)} must not be negative")
        for n, message_s, call_s in self.by_group:
            if n < 2 or message_s < 0 or call_s < 0:
                raise WorkloadError(f"costs: a group of {n} with message {message_s} s and call {call_s} s: "
                                    "a group has two ranks or more, its costs are not negative")

    @classmethod
    def link_bound(cls, link_bytes_per_s: float) -> "Costs":
        """No latency, no framing: the link-bound figure."""
        return cls(link_bytes_per_s)

    @property
    def latency_free(self) -> bool:
        return not (self.message_s or self.hop_s or self.call_s or self.by_group)

    def _group(self, n: int) -> tuple[float, float]:
        """A message's and a call's fixed costs in a group of ``n`` ranks."""
        for size, message_s, call_s in self.by_group:
            if size == n:
                return message_s, call_s
        return self.message_s, self.call_s

    def call(self, n: int) -> float:
        return self._group(n)[1]

    def alpha(self, hops: int, n: int = 0) -> float:
        """A message's latency ``hops`` switch hops apart, in a group of ``n`` ranks (0: any)."""
        return self._group(n)[0] + hops * self.hop_s

    def wire_seconds(self, nbytes: float) -> float:
        """A message's bytes on a link: payload and every frame's overhead."""
        frames = math.ceil(nbytes / self.payload_per_frame) if nbytes else 0
        return (nbytes + frames * self.frame_overhead_bytes) / self.link_bytes_per_s

    def message(self, nbytes: float, hops: int, n: int = 0) -> float:
        return self.alpha(hops, n) + self.wire_seconds(nbytes)

    def header_agreement(self, n: int, hops: int) -> float:
        """ceil(log2 n) messages of a few bytes each: their alpha and a frame's overhead (the
        bytes themselves, 16 a rank, are left out with the buffer's other metadata)."""
        rounds = math.ceil(math.log2(n)) if n > 1 else 0
        return rounds * (self.alpha(hops, n) + self.frame_overhead_bytes / self.link_bytes_per_s)

    def to_dict(self) -> dict:
        return asdict(self)


def collective_seconds(costs: Costs, kind: Kind, nbytes: float, n: int, hops: int, in_network: bool = False,
                       root_hops: int = 0) -> float:
    """One call of ``kind`` on a buffer of ``nbytes`` among ``n`` ranks at most ``hops`` switch
    hops apart (``root_hops``: to the aggregation tree's root, for ``in_network``)."""
    if kind in (Kind.SEND, Kind.RECV):
        return costs.call(2) + costs.message(nbytes, hops, 2)
    if n < 2:
        return costs.call(n)
    head = costs.call(n) + costs.header_agreement(n, hops)
    if kind is Kind.ALL_REDUCE and in_network:
        return head + _in_network(costs, nbytes, root_hops, n)
    if kind is Kind.ALL_REDUCE:
        return head + 2 * (n - 1) * costs.message(nbytes / n, hops, n)
    if kind in (Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.ALL_TO_ALL):
        return head + (n - 1) * costs.message(nbytes / n, hops, n)
    if kind is Kind.BROADCAST:
        return head + math.ceil(math.log2(n)) * costs.alpha(hops, n) + costs.wire_seconds(nbytes)
    raise WorkloadError(f"no cost model for {kind.value}")


def _in_network(costs: Costs, nbytes: float, root_hops: int, n: int) -> float:
    values = nbytes / ITEM_BYTES
    frames = math.ceil(values / costs.agg_values_per_frame) if values else 0
    frame_s = (costs.agg_values_per_frame * ITEM_BYTES + costs.agg_frame_overhead_bytes) / costs.link_bytes_per_s
    round_trip = 2 * costs.alpha(root_hops, n) + frame_s
    if frames == 0:
        return 0.0
    per_frame = max(frame_s, round_trip / costs.agg_window_frames) if costs.agg_window_frames else frame_s
    return round_trip + (frames - 1) * per_frame


def fabric_hops(fabric: Fabric, placement: Placement) -> Callable[[tuple[int, ...]], int]:
    """The most switch hops between two ranks of a group, on ``fabric`` where ``placement`` put them
    (the switches on a shortest path; the ranks of one host: 0)."""
    graph = fabric.to_graph()
    known: dict[tuple[str, str], int] = {}

    def between(a: str, b: str) -> int:
        if a == b:
            return 0
        key = (a, b) if a < b else (b, a)
        if key not in known:
            known[key] = nx.shortest_path_length(graph, a, b) - 1
        return known[key]

    def hops(group: tuple[int, ...]) -> int:
        hosts = sorted({placement.host(r) for r in group})
        return max((between(a, b) for a, b in combinations(hosts, 2)), default=0)
    return hops
