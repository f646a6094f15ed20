"""all_reduce through the switches: the process group's face of the in-network aggregation worker
(aggregation.worker.AllReduceClient). The switches sum int32 and quantised float32, so float16 and
bfloat16 travel widened to float32 and come back rounded; only sums are offered (the aggregation
program adds). NaN/Inf are refused by the group before any packet leaves (headers.NonFinite)."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.aggregation.worker import AllReduceClient, JobConfig
from hostagent.collectives.arrays import ReduceOp


class Backend:
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._client: AllReduceClient | None = None

    def all_reduce(self, x: np.ndarray, op: ReduceOp) -> np.ndarray:
        if op != ReduceOp.SUM:
            raise ValueError(f"in-network aggregation only sums; {op.name.lower()} needs another algorithm")
        if self._client is None:
            self._client = AllReduceClient(self.config)
        wide = x if x.dtype in (np.float32, np.int32) else x.astype(np.float32)
        return self._client.allreduce(wide).astype(x.dtype, copy=False)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
