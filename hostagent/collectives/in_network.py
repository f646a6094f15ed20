"""all_reduce through the switches: the process group's face of the in-network aggregation worker
(aggregation.worker.AllReduceClient), in frames of the job's size (JobConfig.frame_values, 64 to
320 values a packet). The switches sum int32 and quantised float32, so float16 and
bfloat16 travel widened to float32 and come back rounded; only sums are offered (the aggregation
program adds). NaN/Inf are refused by the group before any packet leaves (headers.NonFinite).
A float call's first exponents travel in the group's header agreement (`header_exponents`, then
the max over the ranks' headers to `all_reduce`), so no priming round is sent."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.aggregation.worker import AllReduceClient, JobConfig, first_exponents
from hostagent.collectives.arrays import ReduceOp
from hostagent.collectives.transport import TransferStats


class Backend:
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self._client: AllReduceClient | None = None
        self.totals = TransferStats()  # every call's packets summed (the client keeps only its last call's)

    def header_exponents(self, x: np.ndarray) -> bytes:
        """This rank's exponents of the call's first chunks, for its call header (finite floats;
        other buffers: none)."""
        if x.dtype == np.int32 or x.size == 0:
            return b""
        return first_exponents(x, self.config).astype(np.uint8).tobytes()

    def all_reduce(self, x: np.ndarray, op: ReduceOp, exponents: list[bytes] | None = None) -> np.ndarray:
        """``exponents``: every rank's `header_exponents` for this call (None: the worker primes)."""
        if op != ReduceOp.SUM:
            raise ValueError(f"in-network aggregation only sums; {op.name.lower()} needs another algorithm")
        if self._client is None:
            self._client = AllReduceClient(self.config)
        wide = x if x.dtype in (np.float32, np.int32) else x.astype(np.float32)
        first = None
        if exponents and all(exponents):
            first = np.max([np.frombuffer(e, dtype=np.uint8) for e in exponents], axis=0).astype(np.int64)
        earlier = self._client.last_stats
        try:
            return self._client.allreduce(wide, first_exponents=first).astype(x.dtype, copy=False)
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
