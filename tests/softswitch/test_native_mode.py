"""softswitch --native: off runs nothing natively; a program the native path cannot run is
refused with the reason named (auto: the Python path runs it, the reason counted and shown by
softswitch-ctl's packet_path; on: the push or the start fails saying why)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulation.testbed import free_tcp_port
from softswitch.options import CliError, parse_config
from softswitch.build_ahead import build_ahead
from softswitch.ctl import send_command
from softswitch.native import build, codegen
from softswitch.native.mode import NativePath, NativeUnavailable
from softswitch.pipeline.compiled import PATH_PREFIX
from softswitch.pipeline.program import Program
from softswitch.switch import Switch, SwitchConfig

BUILD = Path(__file__).resolve().parents[1] / "p4/build"
VARBIT = BUILD / "parser_features.json"          # a varbit field: the native generator refuses it


def test_off_builds_nothing_and_refuses_nothing():
    path = NativePath("off")
    assert path.prepare(Program(VARBIT.read_bytes())) is None
    assert path.status() == {"native_mode": "off", "native": False, "native_refused": None, "native_refusals": 0}


def test_a_refused_program_runs_on_the_python_path_with_the_reason_named():
    path = NativePath("auto")
    assert path.prepare(Program(VARBIT.read_bytes())) is None
    status = path.status()
    assert "native generator cannot do this program" in status["native_refused"]
    assert "variable-length field" in status["native_refused"] and status["native_refusals"] == 1


def test_on_fails_naming_the_reason():
    with pytest.raises(NativeUnavailable, match="variable-length field"):
        NativePath("on").prepare(Program(VARBIT.read_bytes()))


def test_the_flag_and_its_environment_default(monkeypatch):
    monkeypatch.delenv("SOFTSWITCH_NATIVE", raising=False)
    cfg, _ = parse_config(["--no-p4", "--native", "auto"])
    assert cfg.native == "auto"
    assert parse_config(["--no-p4"])[0].native == "auto"
    monkeypatch.setenv("SOFTSWITCH_NATIVE", "sometimes")
    with pytest.raises(CliError, match="SOFTSWITCH_NATIVE='sometimes' is not one of auto, on, off"):
        parse_config(["--no-p4"])


def test_a_switch_shows_why_its_program_is_not_native():
    ctl = f"127.0.0.1:{free_tcp_port()}"
    switch = Switch(SwitchConfig(grpc_addr=f"127.0.0.1:{free_tcp_port()}", runtime_addr=ctl,
                                 json_path=str(VARBIT), native="auto", compiled="off"))
    switch.start()
    try:
        status = json.loads(send_command(ctl, "packet_path"))
        assert status["program"] and status["native"] is False and status["native_refusals"] == 1
        assert "variable-length field" in status["native_refused"]
    finally:
        switch.stop()


FABRIC = Path(__file__).resolve().parents[2] / "p4src/build/fabric.json"


@pytest.mark.skipif(build.missing() is not None, reason=f"native data path: {build.missing()}")
def test_a_fabric_s_program_is_built_ahead_natively_and_its_switches_start_native(tmp_path: Path, monkeypatch):
    """build_ahead (what a Lab of softswitches does before any switch starts): the native library
    built once and found cached after, no compiled build beside it; a program the native path
    refuses gets its compiled path instead (off here: said, nothing built); a switch then runs
    the fabric program natively from the start."""
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    monkeypatch.delenv("SOFTSWITCH_NATIVE", raising=False)
    said: list[str] = []
    assert build_ahead(FABRIC.read_bytes(), said.append).startswith("native data path built in ")
    assert len(said) == 1 and "native data path" in said[0]
    source = codegen.generate(Program(FABRIC.read_bytes())).source
    assert build.NativeBuilder().path(source).exists()
    assert build_ahead(FABRIC.read_bytes(), said.append) == "native data path cached" and len(said) == 1
    assert not any(p.name.startswith(PATH_PREFIX) for p in tmp_path.iterdir())   # no compiled build
    monkeypatch.setenv("SOFTSWITCH_COMPILED", "off")
    refused = build_ahead(VARBIT.read_bytes(), said.append)
    assert refused.startswith("no native data path: the native generator cannot do this program")
    assert refused.endswith("; compiled packet path off (SOFTSWITCH_COMPILED=off)")
    switch = Switch(SwitchConfig(grpc_addr=f"127.0.0.1:{free_tcp_port()}", json_path=str(FABRIC)))
    switch.start()
    try:
        assert switch.native_path.status() == {"native_mode": "auto", "native": True, "native_refused": None,
                                               "native_refusals": 0}
    finally:
        switch.stop()


@pytest.mark.skipif(build.missing() is not None, reason=f"native data path: {build.missing()}")
def test_a_cached_library_runs_where_no_compiler_is(tmp_path: Path, monkeypatch):
    """An image carries the native libraries built in a stage with a compiler, not the compiler
    (docker/aifabric.Dockerfile): the program's cached library is used with no compiler on PATH,
    and build_ahead finds it; where nothing is cached, the missing compiler is named."""
    program = Program(FABRIC.read_bytes())
    assert NativePath("on", cache_dir=tmp_path).prepare(program) is not None        # built here
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert build.missing() is not None
    assert NativePath("on", cache_dir=tmp_path).prepare(program) is not None        # loaded, not built
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    assert build_ahead(FABRIC.read_bytes()) == "native data path cached"
    with pytest.raises(NativeUnavailable, match="no C compiler"):
        NativePath("on", cache_dir=tmp_path / "empty").prepare(program)
