"""The generated struct code that reads and writes fixed headers (header_codec.py) against the
reference, one integer as wide as the header: on random header types (fields of 1 to 2048 bits,
some signed, cut anywhere), random bytes at a random offset and random field values."""
from __future__ import annotations

import random

import pytest

from softswitch.pipeline.codegen import pack_header
from softswitch.pipeline.expressions import two_comp_mod
from softswitch.pipeline.header_codec import chunks, extract_lines, header_struct, pack_source
from softswitch.pipeline.layout import FieldInfo, HeaderType

WIDTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 19, 20, 24, 32, 40, 48, 64, 72, 96, 128, 136, 2048]


def random_type(rng: random.Random) -> HeaderType:
    widths = [rng.choice(WIDTHS) for _ in range(rng.randint(1, 14))]
    if sum(widths) % 8:
        widths.append(8 - sum(widths) % 8)
    return HeaderType("h", tuple(FieldInfo(f"f{i}", w, rng.random() < 0.2, i) for i, w in enumerate(widths)),
                      None, None)


def generated(htype: HeaderType, fits: bool) -> tuple:
    """(extract(F, pkt, o), pack(F)) made from header_codec's source, fields in F[1:]; ``fits``:
    unsigned fields written unmasked (a program's own headers)."""
    def slot(i):
        return 1 + i
    first, packed = pack_source(htype, slot, "_st", fits=fits)
    src = "\n".join(["def extract(F, pkt, o):", *("    " + ln for ln in extract_lines(htype, slot, "_st")),
                     "    return F",
                     "def pack(F):", *("    " + ln for ln in first), f"    return {packed}"])
    ns = {"_st": header_struct(htype), "_tcm": two_comp_mod}
    exec(compile(src, "<header_codec>", "exec"), ns)
    return ns["extract"], ns["pack"]


def reference_fields(htype: HeaderType, data: bytes) -> list:
    v, shift, out = int.from_bytes(data, "big"), htype.fixed_bits, []
    for f in htype.fields:
        shift -= f.width
        x = (v >> shift) & ((1 << f.width) - 1)
        out.append(two_comp_mod(x, f.width) if f.signed else x)
    return out


@pytest.mark.parametrize("fits", [True, False])
@pytest.mark.parametrize("seed", range(300))
def test_struct_code_reads_and_writes_as_the_reference(seed: int, fits: bool):
    rng = random.Random(seed)
    htype = random_type(rng)
    nbytes = htype.fixed_bits // 8
    extract, pack = generated(htype, fits)
    assert header_struct(htype).size == nbytes
    assert [f for c in chunks(htype) for f in c.fields] == list(htype.fields)

    o = rng.randrange(8)
    pkt = rng.randbytes(o) + bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(nbytes)) + rng.randbytes(4)
    F = extract([None] * (1 + len(htype.fields)), pkt, o)
    assert F[1:] == reference_fields(htype, pkt[o:o + nbytes])
    assert pack(F) == pkt[o:o + nbytes]          # what was read writes back unchanged

    # any values a packet state may hold (signed fields negative), written as pack_header writes
    F = [1] + [rng.choice([0, (1 << f.width) - 1, rng.getrandbits(f.width)])
               - (rng.getrandbits(f.width - 1) if f.signed and f.width > 1 else 0) for f in htype.fields]
    assert pack(F) == pack_header(F, 0, htype)
