"""Bit-exact packing of the test programs' own headers (not a scenario module).

A `Layout` lists a P4 header's fields in order as (name, width) or (name, width, "signed");
`pack` builds its bytes from keyword values (missing fields are 0, signed values may be
negative), `unpack` reads them back (signed fields as Python negatives).
"""
from __future__ import annotations


class Layout:
    def __init__(self, *fields: tuple):
        self.fields = [(f[0], f[1], len(f) > 2 and f[2] == "signed") for f in fields]
        self.bits = sum(w for _, w, _ in self.fields)
        assert self.bits % 8 == 0, f"layout is {self.bits} bits, not whole bytes"
        self.size = self.bits // 8

    def pack(self, **values: int) -> bytes:
        unknown = set(values) - {n for n, _, _ in self.fields}
        assert not unknown, f"no such fields: {unknown}"
        x = 0
        for name, width, signed in self.fields:
            v = values.get(name, 0)
            if signed:
                assert -(1 << (width - 1)) <= v < 1 << (width - 1), f"{name}={v} does not fit int<{width}>"
            else:
                assert 0 <= v < 1 << width, f"{name}={v} does not fit bit<{width}>"
            x = (x << width) | (v & ((1 << width) - 1))
        return x.to_bytes(self.size, "big")

    def unpack(self, data: bytes) -> dict[str, int]:
        assert len(data) >= self.size, f"{len(data)} bytes, the header needs {self.size}"
        x = int.from_bytes(data[:self.size], "big")
        out, shift = {}, self.bits
        for name, width, signed in self.fields:
            shift -= width
            v = (x >> shift) & ((1 << width) - 1)
            if signed and v >> (width - 1):
                v -= 1 << width
            out[name] = v
        return out


def wrap(value: int, width: int, signed: bool = False) -> int:
    """``value`` reduced to ``width`` bits (two's complement when signed)."""
    v = value & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    return v


def clamp(value: int, width: int, signed: bool = False) -> int:
    """Saturating result of ``value`` in ``width`` bits."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    return max(lo, min(hi, value))
