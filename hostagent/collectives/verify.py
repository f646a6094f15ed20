"""What each rank of a collective must end with, built from every rank's input (which every rank
can make from the seed), and the check of a result against it: int32 exact; broadcast,
all_gather and all_to_all bit-exact; float sums within arrays.sum_error_bound, in-network float32
within the quantisation bound (tensors.check_aggregated) plus the rounding back for 16-bit types."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hostagent.collectives.arrays import DTYPES, UNIT_ROUNDOFF, sum_error_bound
from hostagent.collectives.tensors import check_aggregated


def make_input(seed: int, rank: int, length: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng([seed, rank, length, list(DTYPES).index(dtype)])
    if dtype == "int32":
        return rng.integers(-1000, 1000, length, endpoint=True).astype(np.int32)
    return rng.standard_normal(length).astype(DTYPES[dtype])


def all_to_all_split(sender: int, receiver: int, length: int) -> int:
    """Uneven (and sometimes empty) splits, a few elements per pair, for the all_to_all checks."""
    return (sender + 3 * receiver + length) % 7


def inputs_for(op: str, seed: int, n: int, length: int, dtype: str, even: bool = False) -> list:
    """Every rank's input to a call of `op` with buffers of `length`: for all_to_all each rank's
    list of per-destination arrays (length // n each when `even`, else all_to_all_split's)."""
    if op == "all_to_all":
        split = (lambda s, r: length // n) if even else (lambda s, r: all_to_all_split(s, r, length))
        return [[make_input(seed, 1000 * s + r, split(s, r), dtype) for r in range(n)] for s in range(n)]
    return [make_input(seed, r, length, dtype) for r in range(n)]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    max_error: float
    bound: float


def _sum(result: np.ndarray, terms: list[np.ndarray], dtype: str, in_network: bool) -> Verdict:
    exact = np.sum([t.astype(np.float64) for t in terms], axis=0)
    if result.shape != exact.shape:
        return Verdict(False, float("inf"), 0.0)
    error = np.abs(result.astype(np.float64) - exact)
    if in_network and dtype != "int32":
        bound = check_aggregated_bound(terms) + 4 * UNIT_ROUNDOFF[dtype] * np.abs(exact)
    else:
        bound = sum_error_bound(terms, dtype)
    return Verdict(bool(np.all(error <= bound)), float(error.max(initial=0.0)), float(np.max(bound, initial=0.0)))


def check_aggregated_bound(terms: list[np.ndarray]) -> np.ndarray:
    wide = [t.astype(np.float32) for t in terms]
    exact = np.sum([t.astype(np.float64) for t in wide], axis=0)
    check = check_aggregated(exact.astype(np.float32), wide)
    return np.full(exact.shape, check.bound)


def _exact(result: object, expected: np.ndarray) -> Verdict:
    ok = isinstance(result, np.ndarray) and result.dtype == expected.dtype and result.shape == expected.shape \
        and np.array_equal(result.view(np.uint8), expected.view(np.uint8))
    return Verdict(bool(ok), 0.0 if ok else float("inf"), 0.0)


def check(op: str, algo: str, result: object, inputs: list, rank: int, root: int, dtype: str) -> Verdict:
    """inputs[r]: rank r's input (for all_to_all, its list of per-destination arrays)."""
    n = len(inputs)
    if op == "all_reduce":
        return _sum(result, inputs, dtype, algo == "in_network")
    if op == "reduce_scatter":
        idx = np.array_split(np.arange(inputs[0].size), n)[rank]
        return _sum(result, [t[idx] for t in inputs], dtype, False)
    if op == "reduce":
        return _sum(result, inputs, dtype, False) if rank == root else Verdict(result is None, 0.0, 0.0)
    if op == "all_gather":
        return _exact(result, np.concatenate(inputs))
    if op == "broadcast":
        return _exact(result, inputs[root])
    if op == "all_to_all":
        parts = [_exact(result[j], inputs[j][rank]) for j in range(n)] if isinstance(result, list) else []
        return Verdict(len(parts) == n and all(p.ok for p in parts), 0.0, 0.0)
    raise ValueError(f"no check for {op}")
