"""Generated source that reads a fixed-size header from bytes and writes it back, by struct.

A header's fields are cut into chunks at byte boundaries (a chunk: the fewest consecutive
fields that end on one); a chunk is read and written as big-endian struct items (B, H, I, Q;
a 6-byte MAC address is I+H, a 16-byte IPv6 address Q+Q; a chunk over 16 bytes as raw bytes
and int.from_bytes), and a chunk of several fields is shifted apart like any packed value.

One ``unpack_from`` or ``pack`` per header replaces one integer as wide as the whole header
(int.from_bytes, then a shift and a mask of a 160-bit integer per IPv4 field).
benchmarks/softswitch_path.py, µs a packet on the Python path / the compiled path: the fabric
program's parser 1.44 -> 0.97 / 1.02 -> 0.65, its deparser 0.97 -> 0.72 / 0.96 -> 0.65; an
aggregation packet's (64 values of 32 bits) parser 4.8 -> 1.9 / 3.7 -> 1.3, deparser
4.8 -> 2.7 / 4.2 -> 2.0.

Fields of signed types are stored as their signed value (_tcm) and written back masked to
their width.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .layout import FieldInfo, HeaderType

ITEM_CODES = {8: "Q", 4: "I", 2: "H", 1: "B"}     # struct item by size in bytes
MAX_ITEMS_BYTES = 16     # a larger chunk is one raw item: its value is not built from dozens of items


@dataclass(frozen=True)
class Chunk:
    fields: tuple[FieldInfo, ...]
    bits: int
    items: tuple[int, ...]      # sizes in bytes of its struct items, most significant first

    @property
    def raw(self) -> bool:
        """Read and written as bytes (one ``Ns`` item)."""
        return self.bits > 8 * MAX_ITEMS_BYTES


def chunks(htype: HeaderType) -> list[Chunk]:
    """The header type's fields cut at byte boundaries (its fixed bits are whole bytes)."""
    out: list[Chunk] = []
    run: list[FieldInfo] = []
    bits = 0
    for f in htype.fields:
        run.append(f)
        bits += f.width
        if bits % 8 == 0:
            out.append(Chunk(tuple(run), bits, _item_sizes(bits // 8)))
            run, bits = [], 0
    return out


def _item_sizes(nbytes: int) -> tuple[int, ...]:
    if nbytes > MAX_ITEMS_BYTES:
        return (nbytes,)
    sizes = []
    for size in ITEM_CODES:
        while nbytes >= size:
            sizes.append(size)
            nbytes -= size
    return tuple(sizes)


def header_struct(htype: HeaderType) -> struct.Struct:
    return struct.Struct("!" + "".join(f"{c.items[0]}s" if c.raw else ITEM_CODES[size]
                                       for c in chunks(htype) for size in c.items))


def _mask(width: int) -> str:
    return f"{(1 << width) - 1:#x}"


def extract_lines(htype: HeaderType, slot, struct_name: str) -> list[str]:
    """Lines that read the header at ``pkt[o:]`` (its length already checked) into its slots;
    ``slot(i)`` is the source of the slot of field index ``i``, ``struct_name`` the name bound
    to ``header_struct(htype)``."""
    parts = chunks(htype)
    names = [f"_u{i}" for i in range(sum(len(c.items) for c in parts))]
    if not names:
        return []
    targets = ", ".join(names) if len(names) > 1 else names[0] + ","
    lines = [f"{targets} = {struct_name}.unpack_from(pkt, o)"]
    at = 0
    for c in parts:
        value = f"int.from_bytes({names[at]}, 'big')" if c.raw else names[at]
        for name, size in zip(names[at + 1:at + len(c.items)], c.items[1:]):
            value = f"(({value} << {8 * size}) | {name})"
        at += len(c.items)
        if len(c.fields) > 1 and (len(c.items) > 1 or c.raw):     # built once, then shifted apart
            lines.append(f"_w = {value}")
            value = "_w"
        shift = c.bits
        for f in c.fields:
            shift -= f.width
            val = f"({value} >> {shift})" if shift else value
            if shift + f.width < c.bits:
                val = f"({val} & {_mask(f.width)})"
            if f.signed:
                val = f"_tcm({val}, {f.width})"
            lines.append(f"F[{slot(f.index)}] = {val}")
    return lines


def pack_source(htype: HeaderType, slot, struct_name: str, *, fits: bool) -> tuple[list[str], str]:
    """(lines to run first, an expression) giving the bytes of the header whose fields are in
    ``slot(i)``. Signed fields are masked to their width (two's complement); so are unsigned
    ones unless ``fits``: the header's slots only ever hold values that fit their fields
    (extracted, or stored through a mask: expressions.TARGET_WRITTEN_HEADERS)."""
    first: list[str] = []
    args: list[str] = []
    for n, c in enumerate(chunks(htype)):
        terms = []
        shift = c.bits
        for f in c.fields:
            shift -= f.width
            v = f"F[{slot(f.index)}]" if fits and not f.signed else f"(F[{slot(f.index)}] & {_mask(f.width)})"
            terms.append(f"({v} << {shift})" if shift else v)
        value = " | ".join(terms)
        if c.raw:
            args.append(f"({value}).to_bytes({c.items[0]}, 'big')")
            continue
        if len(c.items) == 1:
            args.append(value)
            continue
        first.append(f"_w{n} = {value}")
        rest = c.bits
        for size in c.items:
            rest -= 8 * size
            part = f"(_w{n} >> {rest})" if rest else f"_w{n}"
            args.append(f"({part} & {_mask(8 * size)})" if rest < c.bits - 8 * size else part)
    return first, f"{struct_name}.pack({', '.join(args)})"
