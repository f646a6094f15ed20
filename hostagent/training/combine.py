"""What all_reduce makes of the ranks' vectors, computed in one process: the exact sum, or the sum
the switches make (SwitchML block quantisation, hostagent.collectives.aggregation.quantize: per
chunk of AGG_VALUES values the largest exponent over the ranks, every rank's values rounded to
int32 at that scale, the integers added exactly, the total scaled back). Integer addition does
not depend on order, so the in-network result is reproduced bit for bit here."""
from __future__ import annotations

import numpy as np

from hostagent.collectives.aggregation import quantize as q
from hostagent.collectives.aggregation.protocol import AGG_VALUES


def exact(vectors: list[np.ndarray]) -> np.ndarray:
    """The sum in float64, rounded once to float32."""
    return np.sum(np.stack(vectors).astype(np.float64), axis=0).astype(np.float32)


def _chunks(v: np.ndarray) -> np.ndarray:
    rows = -(-v.size // AGG_VALUES)
    padded = np.zeros(rows * AGG_VALUES, dtype=np.float32)
    padded[:v.size] = v
    return padded.reshape(rows, AGG_VALUES)


def in_network(vectors: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the switches' sum, its per-element error bound against the exact sum)."""
    n, size = len(vectors), vectors[0].size
    chunks = [_chunks(v) for v in vectors]
    agreed = np.max([q.chunk_exponents(c) for c in chunks], axis=0)
    sums = np.sum([q.quantize(c, agreed, n).astype(np.int64) for c in chunks], axis=0).astype(np.int32)
    result = q.dequantize(sums, agreed, n)
    bound = q.error_bound(n, agreed, result)
    return result.reshape(-1)[:size], bound.reshape(-1)[:size]
