"""One rank's operations of an iteration, and what each kind of collective costs on a link.

A rank's ops are a list in issue order; ``Op.id`` is the op's index in that list and ``deps`` are
ids of earlier ops of the same rank that must have finished. Ops run on streams
(``Op.stream``): one at a time in list order on each stream, streams side by side (compute on
one, tensor-, pipeline-, data- and expert-parallel traffic each on its own, as frameworks put
them on separate CUDA streams). The members of a collective, and the two ends of a send/recv,
find each other by ``Op.key``, the same on every rank taking part. A send does not wait for its
receive to be posted (an eager, buffered send), so 1F1B's crossing sends cannot deadlock.

Sizes follow nccl-tests: ``bytes`` is the buffer a rank passes in (all-reduce, all-to-all,
broadcast, send/recv) or the whole of what is scattered or gathered (reduce-scatter: the input,
all-gather: the output). ``BUSBW_FACTOR[kind](n)`` turns it into what crosses each rank's link:
time on a link of rate R is ``bytes * factor / R`` (nccl-tests' bus bandwidth, PERFORMANCE.md).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class Kind(str, Enum):
    COMPUTE = "compute"
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    SEND = "send"
    RECV = "recv"


class Stream(str, Enum):
    COMPUTE = "compute"
    TP = "tp"
    PP = "pp"
    DP = "dp"
    EP = "ep"


BUSBW_FACTOR: dict[Kind, Callable[[int], float]] = {
    Kind.ALL_REDUCE: lambda n: 2 * (n - 1) / n,
    Kind.REDUCE_SCATTER: lambda n: (n - 1) / n,
    Kind.ALL_GATHER: lambda n: (n - 1) / n,
    Kind.ALL_TO_ALL: lambda n: (n - 1) / n,
    Kind.BROADCAST: lambda n: 1.0,
    Kind.SEND: lambda n: 1.0,
    Kind.RECV: lambda n: 1.0,
}


@dataclass(frozen=True)
class Op:
    id: int
    rank: int
    kind: Kind
    stream: Stream
    name: str                       # what it is, e.g. "fwd mb0 L3 attn"
    deps: tuple[int, ...] = ()
    flops: float = 0.0              # compute: FLOPs on this rank
    seconds: float = 0.0            # compute: real-scale duration, flops / sustained FLOP/s
    bytes: int = 0                  # communication: real-scale size (see the module doc)
    group: tuple[int, ...] = ()     # global ranks taking part; send/recv: (sender, receiver)
    key: str = ""                   # the same on every member of one collective or send/recv pair
    emulated_bytes: int = 0         # after scaling (aifabric.workloads.scale)
    emulated_seconds: float = 0.0
    layers: tuple[int, ...] = field(default=())     # model layers whose gradients a DP op carries

    @property
    def is_compute(self) -> bool:
        return self.kind is Kind.COMPUTE

    @property
    def peer(self) -> int | None:
        """The other end of a send or recv."""
        if self.kind is Kind.SEND:
            return self.group[1]
        if self.kind is Kind.RECV:
            return self.group[0]
        return None

    def to_dict(self) -> dict:
        return {"id": self.id, "rank": self.rank, "kind": self.kind.value, "stream": self.stream.value,
                "name": self.name, "deps": list(self.deps), "flops": self.flops, "seconds": self.seconds,
                "bytes": self.bytes, "group": list(self.group), "key": self.key,
                "emulated_bytes": self.emulated_bytes, "emulated_seconds": self.emulated_seconds,
                "layers": list(self.layers)}
