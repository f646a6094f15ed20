"""The order a pipeline stage runs its micro-batches' forward and backward passes.

``1f1b`` is Megatron-LM's non-interleaved schedule (PipeDream-Flush, Narayanan et al. 2021,
section 2.2.1): stage s of P runs ``min(P-s-1, M)`` forwards to fill the pipeline, then
alternates one forward and one backward, then drains the remaining backwards; at most P
micro-batches' activations are alive. ``gpipe`` runs every forward, then every backward (Huang et
al. 2019). Both have the same bubble, ``(P-1)/M`` of the ideal time.
"""
from __future__ import annotations

from typing import Literal

Pass = tuple[Literal["F", "B"], int]


def stage_order(schedule: str, stage: int, stages: int, micro_batches: int) -> list[Pass]:
    if schedule == "gpipe":
        return [("F", m) for m in range(micro_batches)] + [("B", m) for m in range(micro_batches)]
    warmup = min(stages - stage - 1, micro_batches)
    order: list[Pass] = [("F", m) for m in range(warmup)]
    for i in range(micro_batches - warmup):
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", m) for m in range(micro_batches - warmup, micro_batches)]
