"""SwitchML-style block quantisation of float32 chunks to int32 and back.

One exponent per frame: a chunk is one frame's values (a row: the job's frame_values, 64 to 320),
as SwitchML's exponent is one per packet and the header has room for one. A 320-value frame thus
shares one scale where five 64-value frames had five: a value far below its frame's largest gets
a coarser quantum than it would in a smaller frame (every function here works on rows of any
width, and `error_bound` is per row, so it states that cost exactly).

Per chunk of frame_values floats: e = the exponent of the largest magnitude (math.frexp: |x| < 2**e),
the workers agree on E = max over workers (the biased value E + 127 travels in the header), and
every worker quantises with scale = (2**31 - 1) / (n * 2**E), q = round(x * scale). Exponents
are clamped to [-127, 128] so they fit the header's 8 bits: a chunk of zeros or denormals gets
-127, which still bounds its magnitudes (only its quantum is coarser than it could be).

No int32 sum can overflow: a float32 magnitude is at most (1 - 2**-24) * 2**E, so each
|q| <= (2**31 - 1)/n - 128/n + 1/2 and n of them stay below 2**31 - 1 for n <= 256.

Error bound (`error_bound`), per element, of dequantise(sum of the n quantised chunks) against the
exact sum of the n float32 inputs:
    n * (1/2 + 2**-20) / scale      rounding to integers (plus the float64 product's rounding)
  + 2**-23 * |result|               the float64 quotient rounded to float32 (half an ulp, and some)
"""

from __future__ import annotations

import math

import numpy as np

from hostagent.collectives.aggregation.protocol import EXPONENT_BIAS, INT32_MAX

MIN_EXPONENT = -127  # biased 0: also the exponent of an all-zero chunk
MAX_EXPONENT = 128  # the largest float32 is just below 2**128
MAX_WORKERS = 255  # num_workers is 8 bits on the wire; the overflow argument holds to 256
_ROUNDING_SLACK = 2.0**-20  # float64 rounding of x * scale, in quanta, generously
_F32_RESULT_ROUNDING = 2.0**-23


def check_finite(values: np.ndarray, what: str = "tensor") -> None:
    """Raise ValueError naming the first (flat) index holding inf or nan."""
    flat = np.asarray(values).reshape(-1)
    bad = ~np.isfinite(flat)
    if bad.any():
        index = int(np.argmax(bad))
        raise ValueError(f"{what} element {index} is {flat[index]}: inf and nan cannot be quantised")


def _check_workers(num_workers: int) -> None:
    if not 1 <= num_workers <= MAX_WORKERS:
        raise ValueError(f"num_workers {num_workers} is outside 1..{MAX_WORKERS}")


def chunk_exponents(chunks: np.ndarray) -> np.ndarray:
    """Biased block exponent (e + 127, clamped) of every row; rows must be finite float32."""
    chunks = np.asarray(chunks, dtype=np.float32)
    check_finite(chunks)
    peak = np.abs(chunks).max(axis=1)
    _, exps = np.frexp(peak)
    exps = np.where(peak == 0, MIN_EXPONENT, exps)
    return (np.clip(exps, MIN_EXPONENT, MAX_EXPONENT) + EXPONENT_BIAS).astype(np.int64)


def scales(num_workers: int, biased_exponents: np.ndarray) -> np.ndarray:
    """(2**31 - 1) / (n * 2**E) per chunk, in float64 (it exceeds float32 for small E)."""
    _check_workers(num_workers)
    exps = np.asarray(biased_exponents, dtype=np.int64) - EXPONENT_BIAS
    if exps.size and (exps.min() < MIN_EXPONENT or exps.max() > MAX_EXPONENT):
        raise ValueError(f"biased exponents must lie in 0..{MAX_EXPONENT + EXPONENT_BIAS}")
    return np.ldexp(INT32_MAX / num_workers, -exps)


def quantize(chunks: np.ndarray, biased_exponents: np.ndarray, num_workers: int) -> np.ndarray:
    """int32 rows of round(x * scale); ValueError names a chunk whose magnitudes exceed 2**E
    (its own exponent is above the agreed one, i.e. the workers did not agree)."""
    chunks = np.asarray(chunks, dtype=np.float32)
    check_finite(chunks)
    exps = np.asarray(biased_exponents)
    return _rounded(chunks.astype(np.float64), scales(num_workers, exps), num_workers, exps)


def quantize_row(row: np.ndarray, biased_exponent: int, num_workers: int, index: int = 0) -> np.ndarray:
    """Chunk `index`, already checked finite and in float64: the worker's per-packet path."""
    _check_workers(num_workers)
    exps = np.array([biased_exponent])
    scale = math.ldexp(INT32_MAX / num_workers, EXPONENT_BIAS - biased_exponent)
    return _rounded(row[None, :], np.array([scale]), num_workers, exps, index)[0]


def _rounded(rows: np.ndarray, row_scales: np.ndarray, num_workers: int, exps: np.ndarray, first: int = 0) -> np.ndarray:
    q = np.rint(rows * row_scales[:, None])
    over = np.abs(q).max(axis=1) > INT32_MAX / num_workers
    if over.any():
        row = int(np.argmax(over))
        raise ValueError(
            f"chunk {first + row}: magnitude exceeds the agreed exponent {int(exps[row]) - EXPONENT_BIAS}"
        )
    return q.astype(np.int32)


def dequantize(sums: np.ndarray, biased_exponents: np.ndarray, num_workers: int) -> np.ndarray:
    """float32 rows of sum / scale (computed in float64)."""
    scaled = np.asarray(sums, dtype=np.float64) / scales(num_workers, biased_exponents)[:, None]
    return scaled.astype(np.float32)


def error_bound(num_workers: int, biased_exponents: np.ndarray, result: np.ndarray) -> np.ndarray:
    """Per element of `result` (rows of chunks, float32), the bound on |result - exact sum|."""
    quantum = 1.0 / scales(num_workers, biased_exponents)
    rows = np.abs(np.asarray(result, dtype=np.float64))
    return num_workers * (0.5 + _ROUNDING_SLACK) * quantum[:, None] + _F32_RESULT_ROUNDING * rows
