"""The reference: every rank of a data-parallel run computed in one process, the same shards,
batches, initial parameters and update, the ranks' vectors added exactly or as the switches add
them (combine). For the in-network replay each step also records the largest quantisation error
bound of the summed gradient (per element, quantize.error_bound) and the largest actual error."""
from __future__ import annotations

import time

import numpy as np

from hostagent.collectives.aggregation.protocol import DEFAULT_FRAME_VALUES
from hostagent.training import combine, mlp
from hostagent.training.data import Split
from hostagent.training.step import Config, apply, local, shape_of

COMBINERS = ("exact", "in_network")


def train(split: Split, cfg: Config, ranks: int, steps: int, combiner: str = "exact",
          frame_values: int = DEFAULT_FRAME_VALUES) -> list[dict]:
    """``frame_values``: the in-network job's values per packet (the quantisation's chunks)."""
    if combiner not in COMBINERS:
        raise ValueError(f"combiner {combiner!r}: one of {COMBINERS}")
    shape = shape_of(split, cfg)
    params = mlp.init(shape, cfg.seed)
    records = []
    for t in range(steps):
        t0 = time.monotonic()
        vectors = [local(shape, params, split, cfg, r, ranks, t) for r in range(ranks)]
        record: dict = {"step": t}
        if combiner == "exact":
            summed = combine.exact(vectors)
        else:
            summed, bound = combine.in_network(vectors, frame_values)
            error = np.abs(summed.astype(np.float64) - combine.exact(vectors).astype(np.float64))
            record.update(grad_bound=float(bound[:-2].max()), grad_error=float(error[:-2].max()))
        loss, acc = apply(params, summed, cfg, ranks)
        record.update(loss=loss, train_acc=acc, test_acc=mlp.accuracy(shape, params, split.x_test, split.y_test),
                      step_s=time.monotonic() - t0)
        records.append(record)
    return records
