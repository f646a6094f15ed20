"""Functions the generated module calls for what is not worth writing out per program:
headers with a varbit field (read and written at their current width) and the validity of a
header union's members."""
from __future__ import annotations

from ..helpers import ParserFault
from ..layout import HeaderType


def set_valid_union(F: list, base: int, siblings: dict) -> None:
    F[base] = 1
    for s in siblings.get(base, ()):
        F[s] = 0


def pack_header(F: list, base: int, htype: HeaderType) -> bytes:
    """Serialize one valid header (varbit fields at their current width)."""
    x, n = 0, 0
    for f in htype.fields:
        width = F[base + 1 + len(htype.fields)] if f.width is None else f.width
        x = (x << width) | (F[base + 1 + f.index] & ((1 << width) - 1))
        n += width
    return x.to_bytes(n // 8, "big")


def extract_varbit(F: list, base: int, htype: HeaderType, pkt: bytes, o: int, nbits: int,
                   max_bytes: int, errors: dict) -> int:
    """extract_VL: a header whose varbit field is ``nbits`` long; returns the new offset."""
    if nbits % 8:
        raise ParserFault(errors["ParserInvalidArgument"])
    nbytes = htype.fixed_bits // 8 + nbits // 8
    if len(pkt) - o < nbytes:
        raise ParserFault(errors["PacketTooShort"])
    if max_bytes and max_bytes < nbytes:
        raise ParserFault(errors["HeaderTooShort"])
    v = int.from_bytes(pkt[o:o + nbytes], "big")
    shift = nbytes * 8
    for f in htype.fields:
        width = nbits if f.width is None else f.width
        shift -= width
        F[base + 1 + f.index] = (v >> shift) & ((1 << width) - 1)
    F[base + 1 + len(htype.fields)] = nbits
    return o + nbytes
