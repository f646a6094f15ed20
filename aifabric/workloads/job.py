"""A training job: a model's shape, its parallelism and the GPUs' sustained speed, checked
against each other (every degree must divide what it splits)."""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.workloads.errors import WorkloadError, require_divides, require_positive
from aifabric.workloads.flops import iteration_flops, model_params
from aifabric.workloads.parallelism import Parallelism
from aifabric.workloads.shape import ModelShape

DEFAULT_TFLOPS = 150.0
"""Sustained TFLOP/s per GPU: about half an A100's bf16 peak (312), what Megatron-LM sustains at
scale (Narayanan et al. 2021 report 138-163 TFLOP/s per GPU)."""


@dataclass(frozen=True)
class Job:
    shape: ModelShape
    parallelism: Parallelism
    sustained_tflops: float = DEFAULT_TFLOPS

    def __post_init__(self) -> None:
        require_positive("sustained_tflops", self.sustained_tflops)
        m, p = self.shape, self.parallelism
        require_divides("parallelism.pp", p.pp, "model.layers", m.layers)
        require_divides("parallelism.tp", p.tp, "model.heads", m.heads)
        require_divides("parallelism.tp", p.tp, "model.ffn", m.ffn)
        if p.ep > 1 and not m.is_moe:
            raise WorkloadError(f"parallelism.ep={p.ep} needs model.experts > 0 (a dense model has no experts)")
        if m.is_moe:
            require_divides("parallelism.ep", p.ep, "model.experts", m.experts)

    @property
    def layers_per_stage(self) -> int:
        return self.shape.layers // self.parallelism.pp

    @property
    def global_batch(self) -> int:
        """Sequences per iteration over all data-parallel ranks."""
        p = self.parallelism
        return p.dp * p.micro_batch * p.micro_batches

    def to_dict(self) -> dict:
        return {"model": {**vars(self.shape), "parameters": model_params(self.shape),
                          "iteration_flops": iteration_flops(self.shape, self.global_batch)},
                "parallelism": {**vars(self.parallelism), "world": self.parallelism.world},
                "sustained_tflops": self.sustained_tflops}
