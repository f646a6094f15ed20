"""The bounds softswitch's code generator keeps on expression values (expressions.Compiled.bits).

A mask is left out of the generated code when the value is known to fit the field: a bound
that is too small would silently drop bits, so every rule is checked against every value of
small operands here.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from softswitch.pipeline.expressions import TARGET_WRITTEN_HEADERS, Compiled, _binary
from softswitch.pipeline.layout import FieldInfo
from softswitch.pipeline.program import Program

OPS = ["&", "|", "^", "+", "*", ">>", "<<"]
CONSTANT_SHIFTS = [0, 1, 3]


def _operand(bits: int | None, value: int, const: bool) -> Compiled:
    return Compiled(str(value), "data", value if const else None, bits)


@pytest.mark.parametrize("op", OPS)
def test_every_bound_holds_for_every_small_operand(op):
    checked = 0
    for xbits, ybits in itertools.product([0, 1, 2, 3, None], repeat=2):
        xs = range(1 << xbits) if xbits is not None else range(-4, 9)
        ys = range(1 << ybits) if ybits is not None else range(-4, 9)
        for x, y, const in itertools.product(xs, ys, (False, True)):
            if op in ("<<", ">>") and (y < 0 or (const and y not in CONSTANT_SHIFTS)):
                continue
            c = _binary(op, _operand(xbits, x, False), _operand(ybits, y, const))
            value = eval(c.src)
            if c.bits is not None:
                checked += 1
                assert 0 <= value < 1 << c.bits, f"{c.src} = {value} claimed to fit {c.bits} bits"
    assert checked > 0


def test_a_mask_that_keeps_every_bit_of_the_value_is_left_out():
    field = Compiled("F[3]", "data", bits=16)
    assert _binary("&", field, Compiled("65535", "data", 0xFFFF, 16)).src == "F[3]"
    assert _binary("&", Compiled("4294967295", "data", 0xFFFFFFFF, 32), field).src == "F[3]"


@pytest.mark.parametrize("mask", [0xFF, 0xFF00, 0xFFFE])
def test_a_mask_that_drops_bits_stays(mask):
    c = _binary("&", Compiled("F[3]", "data", bits=16), Compiled(str(mask), "data", mask, mask.bit_length()))
    assert c.src == f"(F[3] & {mask})" and c.bits == mask.bit_length()


def test_a_value_of_unknown_sign_keeps_its_mask():
    unknown = Compiled("(F[3] - F[4])", "data", bits=None)
    c = _binary("&", unknown, Compiled("255", "data", 255, 8))
    assert c.src == "((F[3] - F[4]) & 255)" and c.bits == 8
    assert _binary("+", unknown, Compiled("1", "data", 1, 1)).bits is None


REPO = Path(__file__).resolve().parents[2]
PROGRAMS = [p for p in sorted([*REPO.glob("tests/p4/build/*.json"), REPO / "p4src/build/fabric.json"]) if p.exists()]
PLAIN_COPY = re.compile(r"^\s*F\[(\d+)\] = F\[(\d+)\]$")
MASKED_COPY = re.compile(r"^\s*F\[(\d+)\] = F\[(\d+)\] & 0x[0-9a-f]+$")


def _fields_by_slot(prog: Program) -> dict[int, tuple[str, FieldInfo]]:
    return {hdr.base + 1 + f.index: (hdr.name, f) for hdr in prog.layout.headers.values() for f in hdr.type.fields}


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_a_field_copied_without_a_mask_fits_where_it_goes(path: Path):
    """Every unmasked ``F[a] = F[b]`` in a program's generated code copies an unsigned field the
    program alone writes into a field at least as wide; a field the target writes (ingress
    port, lengths...) is always copied through a mask."""
    prog = Program(path.read_text())
    fields = _fields_by_slot(prog)
    plain = masked_target_reads = 0
    varbit_widths = {hdr.varbit_len_slot for hdr in prog.layout.headers.values() if hdr.type.varbit}
    for line in prog.source.splitlines():
        if m := PLAIN_COPY.match(line):
            if int(m[1]) in varbit_widths or int(m[2]) in varbit_widths:    # a varbit's current width
                assert int(m[1]) in varbit_widths and int(m[2]) in varbit_widths, line
                continue
            (_, dst), (src_header, src) = fields[int(m[1])], fields[int(m[2])]
            assert src_header not in TARGET_WRITTEN_HEADERS and not src.signed, line
            if src.width is None or dst.width is None:      # a varbit goes into a varbit only
                assert src.width is None and dst.width is None, line
                continue
            assert src.width <= dst.width, line
            plain += 1
        elif (m := MASKED_COPY.match(line)) and fields.get(int(m[2]), ("",))[0] in TARGET_WRITTEN_HEADERS:
            masked_target_reads += 1
    if path.stem == "fabric":        # the program that exercises both rules
        assert plain > 20 and masked_target_reads > 0
