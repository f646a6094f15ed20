"""p4c's STF packet tests on our own programs (tests/p4/stf/PROGRAM/*.stf against the compiled
tests/p4/build/PROGRAM.json), through softswitch's STF runner: on softswitch always (in this
process), on its native data path (in this process, its loop thread on socket pairs) wherever gcc
builds it, on BMv2 where simple_switch is installed. The expectations in the files were worked
out from the programs (comments in each file say how), and BMv2 passes them too. The runner's
own oracle is tested here as well: a frame that differs, is missing or is extra, a failed
check and a packet softswitch failed on each fail the run."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from softswitch.stf import StfError, parse, run_stf
from softswitch.stf.runner import Run
from softswitch.stf.names import ProgramNames
from softswitch.stf.softswitch_target import SoftswitchTarget

REPO = Path(__file__).resolve().parents[2]
STF_DIR = REPO / "tests/p4/stf"
BUILD = REPO / "tests/p4/build"
STF_FILES = sorted(STF_DIR.glob("*/*.stf"))


def _program(stf: Path) -> Path:
    return BUILD / f"{stf.parent.name}.json"


def _id(stf: Path) -> str:
    return f"{stf.parent.name}/{stf.stem}"


def test_every_program_with_stf_files_has_its_json():
    assert STF_FILES, f"no STF files under {STF_DIR}"
    assert [s for s in STF_FILES if not _program(s).exists()] == []


@pytest.mark.parametrize("stf", STF_FILES, ids=_id)
def test_stf_on_softswitch(stf: Path):
    result = run_stf(_program(stf), stf, "softswitch")
    assert result.passed, result.summary()
    assert sum(result.frames_out.values()) > 0


@pytest.mark.parametrize("stf", STF_FILES, ids=_id)
def test_stf_on_the_native_data_path(stf: Path):
    from softswitch.native.build import missing
    from softswitch.stf.errors import Unsupported

    why = missing()
    if why:
        pytest.skip(f"the native data path cannot be built here: {why}")
    try:
        result = run_stf(_program(stf), stf, "softswitch-native")
    except Unsupported as e:        # a program the native generator refuses, by name
        pytest.skip(str(e))
    assert result.passed, result.summary()
    assert sum(result.frames_out.values()) > 0


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch") is None, reason="BMv2 simple_switch is not on PATH")
@pytest.mark.parametrize("stf", STF_FILES, ids=_id)
def test_stf_on_bmv2(stf: Path):
    result = run_stf(_program(stf), stf, "bmv2")
    assert result.passed, result.summary()


# -- the runner's oracle ---------------------------------------------------------------------
ROUTER = BUILD / "basic_router.json"
ROUTE = "add ipv4_lpm hdr.ipv4.dstAddr:0x0A000000/8 ipv4_forward(dstAddr:0x0000000000AA, port:2)\n"
IN = "packet 1 000000000001 00000000000F 0800 4500 0014 0001 0000 40 11 63D2 0A000001 0A020304\n"
OUT = "000000000001 0800 4500 0014 0001 0000 3F 11 64D2 0A000001 0A020304"


def _run(text: str):
    target = SoftswitchTarget(ROUTER, {1, 2, 3})
    return Run(ProgramNames(json.loads(ROUTER.read_text())), target).run(parse(text))


def test_a_matching_frame_passes_with_dont_care_nibbles_and_exact_length():
    assert _run(ROUTE + IN + f"expect 2 0000000000AA {OUT} $").passed
    assert _run(ROUTE + IN + "expect 2 0000000000** 000000000001 08").passed       # a prefix, '*' nibbles


@pytest.mark.parametrize("expect, reason", [
    (f"expect 2 0000000000AB {OUT} $", "differs at byte 5"),             # one nibble off
    (f"expect 2 0000000000AA {OUT} 00 $", "frame shorter"),               # a byte more than came
    ("expect 2 0000000000AA 000000000001 $", "frame longer"),             # '$': the length is exact
    (f"expect 3 0000000000AA {OUT} $", "expected frame missing"),         # it came out elsewhere (port 2 ...
])
def test_a_wrong_frame_fails_naming_port_and_bytes(expect, reason):
    r = _run(ROUTE + IN + expect)
    assert not r.passed
    port = int(expect.split()[1])
    d = next(d for d in r.differences if d.port == port)
    assert reason in d.reason, str(d)
    assert d.expected == expect.split(None, 2)[2].replace(" ", "")
    if d.actual is not None:
        assert d.actual == bytes.fromhex("0000000000AA" + OUT.replace(" ", "")).hex().upper()


def test_a_frame_nobody_expected_fails():
    r = _run(ROUTE + IN + IN + f"expect 2 0000000000AA {OUT} $")      # two came, one expected
    assert not r.passed
    assert r.first_difference.port == 2 and "unexpected frame" in r.first_difference.reason
    assert r.first_difference.actual.startswith("0000000000AA")


def test_order_on_a_port_counts():
    other = IN.replace("0A020304", "0A020305").replace("63D2", "63D1")
    r = _run(ROUTE + IN + other + f"expect 2 0000000000AA {OUT.replace('0A020304', '0A020305').replace('64D2', '64D1')} $\n"
             f"expect 2 0000000000AA {OUT} $")
    assert not r.passed and r.first_difference.index == 0


def test_a_failed_check_fails_the_run():
    stateful = BUILD / "stateful.json"
    text = ("add fwd standard_metadata.ingress_port:1 set_port(port:2)\n"
            "packet 1 000000000002 000000000001 88B5 03 00000005 00000000 00000000 00 00000000 00\n"
            "expect 2 000000000002 000000000001 88B5 03 00000005 00000000 00000005\n"
            "check_register reg(3) == 5\ncheck_counter ctr(3) packets == 1\n")
    assert run_stf_text(stateful, text).passed
    r = run_stf_text(stateful, text.replace("reg(3) == 5", "reg(3) == 6").replace("packets == 1", "packets >= 2"))
    assert not r.passed and not r.differences
    assert r.failures == ["line 4: register reg[3] is 5, expected == 6",
                          "line 5: counter ctr[3] packets is 1, expected >= 2"]


def test_a_packet_softswitch_failed_on_fails_the_run():
    """An exception in the program's code drops the packet in softswitch (the switch goes on);
    a test that expected nothing from it must still fail."""
    target = SoftswitchTarget(ROUTER, {1, 2})

    def broken_ingress(F):
        raise ZeroDivisionError("generated code failed")
    target.program.ingress = broken_ingress
    target.dp.set_program(target.program)        # the packet path takes the program's functions
    r = Run(ProgramNames(json.loads(ROUTER.read_text())), target).run(parse(ROUTE + IN))
    assert not r.passed and not r.differences
    assert r.failures == ["packet processing error: ZeroDivisionError: generated code failed"]


def run_stf_text(program: Path, text: str):
    target = SoftswitchTarget(program, {1, 2})
    return Run(ProgramNames(json.loads(program.read_text())), target).run(parse(text))


@pytest.mark.parametrize("line, message", [
    ("frobnicate 1 2", "unknown command 'frobnicate'"),
    ("packet 1 0A0", "whole bytes"),
    ("expect x 00", "needs a port number"),
    ("add t k:1", "action call"),
    ("check_counter c packets == 1", "NAME(INDEX)"),
])
def test_a_line_that_is_not_a_statement_is_named(line, message):
    with pytest.raises(StfError, match=rf"t.stf:2: .*{re.escape(message)}"):
        parse("wait\n" + line, "t.stf")


def test_names_resolve_as_p4cs_runner_and_wrong_ones_are_named():
    names = ProgramNames(json.loads((BUILD / "tables.json").read_text()))
    e = names.entry("t_ternary", [("t1", "0x1*")], 7, "set_ternary", [("v", 5)])
    assert (e.table.name, e.action.name, e.match, e.priority, e.data) == \
        ("TblIngress.t_ternary", "TblIngress.set_ternary", ((0x10, 0xF0), (0, 0)), 7, (5,))
    assert names.entry("t_lpm", [("hdr.tbl.k32", "0x0A0B****")], None, "set_lpm", [("v", 1)]).match == ((0x0A0B0000, 16),)
    assert names.entry("t_range", [("r16", "0x10->0x1F")], 1, "set_range", [("v", 1)]).match == ((0x10, 0x1F),)
    with pytest.raises(StfError, match="no table 'nope'"):
        names.table("nope")
    with pytest.raises(StfError, match="has no key field 'zz'"):
        names.entry("t_lpm", [("zz", "1")], None, "set_lpm", [("v", 1)])
    with pytest.raises(StfError, match="does not fit in 16 bits"):
        names.entry("t_exact", [("k16", "0x10000")], None, "set_exact", [("v", 1)])
    with pytest.raises(StfError, match="needs parameter v"):
        names.entry("t_exact", [("k16", "1")], None, "set_exact", [])
