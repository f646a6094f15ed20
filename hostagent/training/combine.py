"""What all_reduce makes of the ranks' vectors, computed in one process: the exact sum, or the sum
the switches make (SwitchML block quantisation, hostagent.collectives.aggregation.quantize: per
chunk of the job's frame_values values the largest exponent over the ranks, every rank's values rounded to
int32 at that scale, the integers added exactly, the total scaled back). Integer addition does
not depend on order, so the in-network result is reproduced bit for bit here."""
from __future__ import annotations

import numpy as np

from hostagent.collectives.aggregation import quantize as q
from hostagent.collectives.aggregation.protocol import DEFAULT_FRAME_VALUES, split_chunks


def exact(vectors: list[np.ndarray]) -> np.ndarray:
    """The sum in float64, rounded once to float32."""
    return np.sum(np.stack(vectors).astype(np.float64), axis=0).astype(np.float32)


def in_network(vectors: list[np.ndarray], frame_values: int = DEFAULT_FRAME_VALUES) -> tuple[np.ndarray, np.ndarray]:
    """(the switches' sum in frames of ``frame_values``, its per-element error bound against the exact sum)."""
    n, size = len(vectors), vectors[0].size
    chunks = [split_chunks(np.asarray(v, dtype=np.float32), frame_values) for v in vectors]
    agreed = np.max([q.chunk_exponents(c) for c in chunks], axis=0)
    sums = np.sum([q.quantize(c, agreed, n).astype(np.int64) for c in chunks], axis=0).astype(np.int32)
    result = q.dequantize(sums, agreed, n)
    bound = q.error_bound(n, agreed, result)
    return result.reshape(-1)[:size], bound.reshape(-1)[:size]
