"""The element types a process group carries, their wire codes, reductions and error bounds.

bfloat16 is ml_dtypes' numpy dtype. Sums are taken in the array's own type, in whatever order
the algorithm reaches the terms, so a float result is within gamma_(n-1) * sum|x_i| of the exact
sum (recursive summation of n terms, gamma_k = k*u / (1 - k*u), u the unit roundoff of the type);
int32 wraps on overflow like two's complement hardware (NCCL does the same).
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int32": np.dtype(np.int32),
}
CODES = {name: i for i, name in enumerate(DTYPES)}  # the dtype's number in call headers
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "int32": 0.0}


class ReduceOp(enum.IntEnum):
    SUM = 0
    MAX = 1
    MIN = 2


_UFUNCS = {ReduceOp.SUM: np.add, ReduceOp.MAX: np.maximum, ReduceOp.MIN: np.minimum}


def dtype_name(array: np.ndarray) -> str:
    """The name of a supported dtype, or ValueError naming the unsupported one."""
    for name, dt in DTYPES.items():
        if array.dtype == dt:
            return name
    raise ValueError(f"dtype {array.dtype} is not one of {sorted(DTYPES)}")


def combine(op: ReduceOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a op b elementwise in a's type (int32 sums wrap instead of warning)."""
    with np.errstate(over="ignore"):
        return _UFUNCS[op](a, b).astype(a.dtype, copy=False)


def to_bytes(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def from_bytes(data: bytes, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(data, dtype=dtype).copy()


def sum_error_bound(terms: list[np.ndarray], dtype: str) -> np.ndarray:
    """Per element, how far a sum of `terms` in `dtype` may be from the exact sum (0 for int32)."""
    n, u = len(terms), UNIT_ROUNDOFF[dtype]
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    return gamma * np.sum([np.abs(t.astype(np.float64)) for t in terms], axis=0)
