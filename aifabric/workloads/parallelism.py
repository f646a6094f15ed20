"""How a job is split over GPUs, and which global ranks form each group.

Ranks are numbered as Megatron-LM numbers them: tensor-parallel fastest, then data-parallel,
pipeline outermost, ``rank = tp_i + TP * (dp_i + DP * pp_i)``. Expert parallelism is carved out of
data parallelism (Megatron-Core's ``tp-ep-dp-pp`` order): ``EP`` consecutive data-parallel ranks
hold different experts and exchange tokens (``ep_group``); ranks holding the same experts reduce
their gradients together (``expert_dp_group``, DP/EP of them).
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.workloads.errors import WorkloadError, require_int, require_positive

SCHEDULES = ("1f1b", "gpipe")
MB = 1_000_000


@dataclass(frozen=True)
class Coords:
    """A rank's place on each axis; ``ep`` is its index inside its expert-parallel group."""
    dp: int
    pp: int
    tp: int
    ep: int


@dataclass(frozen=True)
class Parallelism:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    micro_batch: int = 1            # sequences per micro-batch
    micro_batches: int = 1          # micro-batches per iteration (per data-parallel rank)
    bucket_mb: float = 25.0         # gradient bucket, 10^6 bytes (PyTorch DDP's default)
    zero_stage: int = 0             # 0: all-reduce; 1, 2: reduce-scatter + all-gather; 3: also params gathered
    schedule: str = "1f1b"

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "ep", "micro_batch", "micro_batches"):
            require_int(f"parallelism.{name}", getattr(self, name))
        require_positive("parallelism.bucket_mb", self.bucket_mb)
        require_int("parallelism.zero_stage", self.zero_stage, minimum=0)
        if self.zero_stage > 3:
            raise WorkloadError(f"parallelism.zero_stage: must be 0, 1, 2 or 3, got {self.zero_stage}")
        if self.schedule not in SCHEDULES:
            raise WorkloadError(f"parallelism.schedule: {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.dp % self.ep:
            raise WorkloadError(f"parallelism.ep={self.ep} must divide parallelism.dp={self.dp} "
                                "(experts are spread over data-parallel ranks)")

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def bucket_bytes(self) -> int:
        return int(self.bucket_mb * MB)

    def rank(self, dp: int, pp: int, tp: int) -> int:
        return tp + self.tp * (dp + self.dp * pp)

    def coords(self, rank: int) -> Coords:
        if not 0 <= rank < self.world:
            raise WorkloadError(f"rank {rank} is outside 0..{self.world - 1}")
        tp, rest = rank % self.tp, rank // self.tp
        dp, pp = rest % self.dp, rest // self.dp
        return Coords(dp=dp, pp=pp, tp=tp, ep=dp % self.ep)

    def tp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(c.dp, c.pp, t) for t in range(self.tp))

    def dp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(d, c.pp, c.tp) for d in range(self.dp))

    def ep_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        first = c.dp - c.ep
        return tuple(self.rank(d, c.pp, c.tp) for d in range(first, first + self.ep))

    def expert_dp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(d, c.pp, c.tp) for d in range(c.ep, self.dp, self.ep))

    def stage_peer(self, rank: int, stage: int) -> int:
        """The rank with ``rank``'s dp and tp indices on pipeline stage ``stage``."""
        c = self.coords(rank)
        return self.rank(c.dp, stage, c.tp)
