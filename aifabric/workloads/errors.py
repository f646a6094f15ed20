"""The one error the workload generator raises: a bad model, parallelism, file or placement,
with the offending field named in the message (``model.hidden: ...``)."""
from __future__ import annotations


class WorkloadError(ValueError):
    """A workload that cannot be built; the message starts with the field that is wrong."""


def require_int(field: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, else WorkloadError naming ``field``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise WorkloadError(f"{field}: must be an integer >= {minimum}, got {value!r}")
    return value


def require_positive(field: str, value: object) -> float:
    """``value`` as a float > 0, else WorkloadError naming ``field``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise WorkloadError(f"{field}: must be a number > 0, got {value!r}")
    return float(value)


def require_divides(field: str, divisor: int, what: str, total: int) -> None:
    """WorkloadError naming ``field`` unless ``divisor`` divides ``total`` (``what``)."""
    if total % divisor:
        raise WorkloadError(f"{field}={divisor} must divide {what}={total}")
