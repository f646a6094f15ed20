"""P4Runtime bytestrings <-> Python ints (specification section "Bytestrings").

Received strings may be longer than needed as long as the extra leading bits are zero (or
copies of the sign bit for ``int<W>``); the empty string and values wider than the P4Info
bitwidth are rejected with OUT_OF_RANGE. Sent strings are canonical: the shortest string
that holds the value, at least one byte.
"""
from __future__ import annotations

from .errors import P4RTError, OUT_OF_RANGE, show_bytes


def to_uint(data: bytes, bitwidth: int, what: str) -> int:
    """The value of an unsigned bytestring that must fit in ``bitwidth`` bits."""
    if not data:
        raise P4RTError(OUT_OF_RANGE, f"{what}: empty bytestring (a value needs at least one byte)")
    value = int.from_bytes(_trimmed(data, bitwidth, (0,), what), "big")
    if value.bit_length() > bitwidth:
        raise _too_wide(data, f"{bitwidth} bits", what)
    return value


def to_sint(data: bytes, bitwidth: int, what: str) -> int:
    """The value of a two's complement bytestring that must fit in ``int<bitwidth>``."""
    if not data:
        raise P4RTError(OUT_OF_RANGE, f"{what}: empty bytestring (a value needs at least one byte)")
    value = int.from_bytes(_trimmed(data, bitwidth, (0, 0xFF), what), "big", signed=True)
    if not -(1 << (bitwidth - 1)) <= value < (1 << (bitwidth - 1)):
        raise _too_wide(data, f"int<{bitwidth}>", what)
    return value


def _trimmed(data: bytes, bitwidth: int, pads: tuple[int, ...], what: str) -> bytes:
    """``data`` with the same value but at most one pad byte more than ``bitwidth`` needs; the
    leading bytes are checked without converting them, so a value far wider than its field
    costs no more than a scan of its length."""
    extra = len(data) - (bitwidth + 7) // 8
    if extra <= 0:
        return data
    if data[0] not in pads or data.count(data[0], 0, extra) != extra:
        raise _too_wide(data, f"{bitwidth} bits", what)
    return data[extra - 1:]          # one pad byte kept: it carries the sign of int<W> values


def _too_wide(data: bytes, width: str, what: str) -> P4RTError:
    return P4RTError(OUT_OF_RANGE, f"{what}: value {show_bytes(data)} does not fit in {width}")


def from_uint(value: int) -> bytes:
    """Canonical bytestring of a non-negative int."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def from_sint(value: int) -> bytes:
    """Canonical two's complement bytestring of an int."""
    n = 1
    while not -(1 << (8 * n - 1)) <= value < (1 << (8 * n - 1)):
        n += 1
    return value.to_bytes(n, "big", signed=True)


def to_signed(value: int, bitwidth: int) -> int:
    """Reinterpret the low ``bitwidth`` bits of ``value`` as two's complement."""
    value &= (1 << bitwidth) - 1
    return value - (1 << bitwidth) if value >> (bitwidth - 1) else value


def pack_fields(values: list[tuple[int, int]]) -> bytes:
    """(value, bitwidth) pairs packed MSB first, zero-padded to a whole number of bytes."""
    acc, nbits = 0, 0
    for value, width in values:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = (-nbits) % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


def unpack_fields(data: bytes, widths: list[int]) -> list[int]:
    """The inverse of `pack_fields`; ``data`` must hold at least sum(widths) bits."""
    nbits = sum(widths)
    nbytes = (nbits + 7) // 8
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - nbits)
    out = []
    shift = nbits
    for w in widths:
        shift -= w
        out.append((acc >> shift) & ((1 << w) - 1))
    return out
