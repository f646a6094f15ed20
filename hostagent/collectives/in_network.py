"""all_reduce through the switches: the process group's face of the in-network aggregation worker
(aggregation.worker.AllReduceClient), in frames of the job's size (JobConfig.frame_values, 64 to
320 values a packet). The switches sum int32 and quantised float32, so float16 and
bfloat16 travel widened to float32 and come back rounded; only sums are offered (the aggregation
program adds). NaN/Inf are refused by the group before any packet leaves (headers.NonFinite)."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.aggregation.worker import AllReduceClient, JobConfig
from hostagent.collectives.arrays import ReduceOp
from hostagent.collectives.transport import TransferStats


class Backend:
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._client: AllReduceClient | None = None
        self.totals = TransferStats()  # every call's packets summed (the client keeps only its last call's)

    def all_reduce(self, x: np.ndarray, op: ReduceOp) -> np.ndarray:
        if op != ReduceOp.SUM:
            raise ValueError(f"in-network aggregation only sums; {op.name.lower()} needs another algorithm")
        if self._client is None:
            self._client = AllReduceClient(self.config)
        wide = x if x.dtype in (np.float32, np.int32) else x.astype(np.float32)
        earlier = self._client.last_stats
        try:
            return self._client.allreduce(wide).astype(x.dtype, copy=False)
        finally:
            last = self._client.last_stats
            if last is not earlier:  # the same object: refused before it sent anything
                for name in ("packets_sent", "packets_received", "retransmissions", "duplicates", "stale", "dropped_on_purpose"):
                    setattr(self.totals, name, getattr(self.totals, name) + getattr(last, name))

    def stats(self) -> dict[str, float]:
        return self.totals.as_dict()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
