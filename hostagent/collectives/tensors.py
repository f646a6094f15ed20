"""Reproducible test tensors and the check of an allreduce result against the exact sum.

Every worker can build every other worker's tensor from (seed, rank, size, dtype), so each one
checks its own result without talking to anyone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hostagent.collectives.aggregation import quantize as q
from hostagent.collectives.aggregation.protocol import AGG_VALUES, DEFAULT_FRAME_VALUES, split_chunks

DTYPES = {"float32": np.dtype(np.float32), "int32": np.dtype(np.int32)}
DEFAULT_INT_MAX = 1 << 20
FLOAT_EXPONENT_SPREAD = 16  # chunks of a float tensor span 2**-16 .. 2**16 in magnitude
_F32_UNIT = 2.0**-24


def make_tensor(seed: int, rank: int, size: int, dtype: str, int_max: int = DEFAULT_INT_MAX) -> np.ndarray:
    """int32 uniform in [-int_max, int_max]; float32 normal with a random power-of-two
    magnitude per chunk of AGG_VALUES (so the block exponents differ across chunks and workers)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    rng = np.random.default_rng([seed, rank])
    if dtype == "int32":
        return rng.integers(-int_max, int_max, size, endpoint=True, dtype=np.int64).astype(np.int32)
    chunks = -(-size // AGG_VALUES)
    magnitude = np.repeat(np.ldexp(1.0, rng.integers(-FLOAT_EXPONENT_SPREAD, FLOAT_EXPONENT_SPREAD + 1, chunks)), AGG_VALUES)
    return (rng.standard_normal(size) * magnitude[:size]).astype(np.float32)


def make_tensors(seed: int, workers: int, size: int, dtype: str, int_max: int = DEFAULT_INT_MAX) -> list[np.ndarray]:
    return [make_tensor(seed, rank, size, dtype, int_max) for rank in range(workers)]


@dataclass(frozen=True)
class Check:
    max_abs_error: float
    bound: float  # the largest per-element bound (0 for int32: exact)
    ok: bool  # every element within its own bound


def _check(result: np.ndarray, exact: np.ndarray, bound: np.ndarray | float) -> Check:
    error = np.abs(result.astype(np.float64) - exact)
    ok = bool(result.shape == exact.shape and np.all(error <= bound))
    return Check(float(error.max(initial=0.0)), float(np.max(bound, initial=0.0)), ok)


def check_aggregated(result: np.ndarray, tensors: list[np.ndarray], frame_values: int = DEFAULT_FRAME_VALUES) -> Check:
    """In-network / parameter-server result: int32 exact, float32 within quantize.error_bound
    with the exponents the workers agreed on (the max over workers per chunk of the job's
    frame_values)."""
    exact = np.sum([t.astype(np.float64) for t in tensors], axis=0)
    if result.dtype == np.int32:
        return _check(result, exact, 0.0)
    exps = np.max([q.chunk_exponents(split_chunks(t, frame_values)) for t in tensors], axis=0)
    bound = q.error_bound(len(tensors), exps, split_chunks(result, frame_values)).reshape(-1)[: result.size]
    return _check(result, exact, bound)


def ring_error_bound(tensors: list[np.ndarray]) -> np.ndarray:
    """Float32 recursive summation of n terms, in any order: gamma_(n-1) * sum |x|."""
    n = len(tensors)
    gamma = (n - 1) * _F32_UNIT / (1 - (n - 1) * _F32_UNIT)
    return gamma * np.sum([np.abs(t.astype(np.float64)) for t in tensors], axis=0)


def check_ring(result: np.ndarray, tensors: list[np.ndarray]) -> Check:
    exact = np.sum([t.astype(np.float64) for t in tensors], axis=0)
    if result.dtype == np.int32:
        return _check(result, exact, 0.0)
    return _check(result, exact, ring_error_bound(tensors))
