"""softswitch's compiled packet path (softswitch/pipeline/compiled.py, softswitch/fastpath.py):
built from the generated Python by Cython and a C compiler, it must compute what the Python
does; it must never let the JSON's text reach the C compiler as code, nor load a module
someone else could have written; without a compiler the switch goes on in Python, and
``--compiled now`` fails saying what is missing. (Packets through the compiled path on every
test program, against the Python path: tests/softswitch/test_packet_scenarios.py.)"""
from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import re
import shutil
import sys
import textwrap
import time
import tokenize
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from softswitch.ctl import send_command
from softswitch.pipeline import compiled
from softswitch.pipeline.compiled import CompileError, PathCompiler, factory_source
from softswitch.pipeline.program import Program
from softswitch.pipeline.helpers import assign_header, zeros_source
from softswitch.pipeline.unchecked_slots import without_index_checks, without_index_checks_in
from softswitch.runtime.tables import Entry
from softswitch.switch import Switch, SwitchConfig
from emulation.testbed import free_tcp_port

REPO = Path(__file__).resolve().parents[2]
BASIC_JSON = REPO / "tests/p4/build/basic_router.json"
SOFTSWITCH = str(Path(sys.executable).parent / "softswitch")
MISSING = PathCompiler().missing()
needs_compiler = pytest.mark.skipif(MISSING is not None, reason=f"compiled packet path: {MISSING}")

# what a name or a log_msg format would hold to break out of a C comment or string constant
HOSTILE = '*/ int pwned = 1; /* " \\" \n#include "/etc/shadow" ??/ \x00 \u2028'


def hostile_program() -> bytes:
    """basic_router with every table and action named HOSTILE, wherever the name is used, and
    its drop action logging a HOSTILE format (the JSON text that stays a string literal)."""
    js = json.loads(BASIC_JSON.read_text())
    for a in js["actions"]:
        if any(p["op"] == "mark_to_drop" for p in a["primitives"]):
            a["primitives"].append({"op": "log_msg", "parameters": [
                {"type": "string", "value": HOSTILE},
                {"type": "parameters_vector", "value": []}]})
    names = {a["name"] for a in js["actions"]} | {t["name"] for p in js["pipelines"] for t in p["tables"]}
    text = json.dumps(js)
    for i, name in enumerate(sorted(names)):
        text = text.replace(json.dumps(name), json.dumps(f"{HOSTILE}{i}"))
    return text.encode()


def frame(dst: str = "10.9.9.9") -> bytes:
    return raw(Ether(dst="00:00:00:00:00:aa") / IP(src="10.0.0.1", dst=dst, ttl=9) / UDP(sport=1, dport=2))


def run_packet(prog: Program, data: bytes) -> tuple[list, bytes]:
    """One frame through parser, ingress, egress and deparser: the state and the bytes."""
    F = prog.new_packet_state()
    prog.parse(F, data)
    prog.verify_checksums(F)
    prog.ingress(F)
    prog.egress(F)
    prog.update_checksums(F)
    return F, prog.deparse(F)


@pytest.fixture(scope="module")
def basic_built(tmp_path_factory) -> Path:
    """A cache holding basic_router's build (and softswitch's own compiled modules), made once:
    the tests that start from such a cache take a copy of it (a build costs seconds of CPU)."""
    cache = tmp_path_factory.mktemp("basic_built") / "cache"
    PathCompiler(cache).build(Program(BASIC_JSON.read_bytes()))
    return cache


def copy_of(built: Path, to: Path) -> Path:
    """``built``'s files, with their modes, in ``to``."""
    shutil.copytree(built, to, dirs_exist_ok=True)
    return to


@needs_compiler
def test_json_text_reaches_the_compiled_source_only_as_a_string_constant(tmp_path: Path):
    data = hostile_program()
    python, fast = Program(data), Program(data)
    source = factory_source(fast)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    assert not [t for t in tokens if t.type == tokenize.COMMENT], "comments reach the compiler"
    in_strings = sum(t.string.count("pwned") for t in tokens if t.type == tokenize.STRING)
    assert in_strings == source.count("pwned") > 0       # the log_msg format (drop actions, inlined too)
    fast.use_compiled(PathCompiler(tmp_path).build(fast))
    assert fast.compiled and type(fast.ingress).__name__ == "cython_function_or_method"
    # the dropping action runs (and logs the hostile format) the same way in both
    assert run_packet(fast, frame()) == run_packet(python, frame())


def test_only_constant_slots_of_lists_of_known_length_go_unchecked():
    """The fabric program has every kind of subscript: constant slots of F, computed slots
    (its INT header stack), action data, an aggregation action's locals list, slices."""
    prog = Program((REPO / "p4src/build/fabric.json").read_bytes())
    tree = ast.parse(factory_source(prog))
    unchecked, checked = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            assert ast.unparse(node.items[0]) + ast.unparse(node.items[1]) == \
                "cython.boundscheck(False)cython.wraparound(False)"
            unchecked += [n for n in ast.walk(node) if isinstance(n, ast.Subscript)]
    ids = {id(n) for n in unchecked}
    checked = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and id(n) not in ids]
    size = prog.layout.size
    locals_lengths = {int(m) for m in re.findall(r"_L = \[0\] \* (\d+)", prog.source)}
    for n in unchecked:
        text = ast.unparse(n)
        assert isinstance(n.slice, ast.Constant), text
        assert (n.value.id, n.slice.value < size) == ("F", True) or \
            (n.value.id, n.slice.value < min(locals_lengths)) == ("_L", True), text
    assert len(unchecked) > 5 * len(checked) > 0
    kinds = {ast.unparse(n.value) + ("[k]" if isinstance(n.slice, ast.Constant) else "[...]") for n in checked}
    assert {"D[k]", "F[...]"} <= kinds                 # action data and computed slots stay checked
    assert any(ast.unparse(n.value) == "_L" for n in unchecked)


def test_a_list_that_may_be_replaced_is_not_indexed_unchecked():
    source = textwrap.dedent("""
        def f(F, D):
            F[1] = D[0]
            F[2] = F[3]
            _L = [0] * 4
            _L[3] = F[5]
            if F[6]:
                _L = D
            _L[2] = F[7]
            F[8] = F[-1]
        def g(F):
            F = [0]
            F[1] = 2
    """)
    tree = ast.parse(source)
    for fn in tree.body:
        without_index_checks(fn, 8)
    unchecked = [ast.unparse(stmt) for block in ast.walk(tree) if isinstance(block, ast.With) for stmt in block.body]
    # F's 8 slots alone in f (_L may become D, F[8] is past the end); nothing in g (F replaced)
    assert unchecked == ["F[2] = F[3]", "_L = [0] * 4", "if F[6]:\n    _L = D"]


@pytest.mark.parametrize("store", ["F[b + 1:b + 3] = _ZEROS[:1]", "F[b + 1:c + 3] = _ZEROS[:2]",
                                   "F[1:3] = D", "F[1:5000] = _ZEROS[:4999]", "del F[2]", "F[1:3] += D"])
def test_a_module_that_could_change_the_state_length_keeps_every_check(store: str):
    ok = "def f(F, D):\n    F[b + 1:b + 3] = _ZEROS[:2]\n    F[1:5000] = [0] * 4999\n    F[2] = F[3]\n"
    for source, unchecked in ((ok, True), (ok + f"def g(F, D):\n    {store}\n", False)):
        tree = ast.parse(source)
        without_index_checks_in(tree, 8)
        assert ("with cython.boundscheck(False)" in ast.unparse(tree)) == unchecked, source


def test_header_copies_never_change_the_state_length():
    F = list(range(10))
    with pytest.raises(IndexError, match="slots 8..11 to 1..4 outside the packet state"):
        assign_header(F, 1, 8, 3)             # a run past the end would shorten F by one
    assert F == list(range(10))
    assign_header(F, 1, 7, 3)
    assert F == [0, 7, 8, 9, 4, 5, 6, 7, 8, 9]
    assert zeros_source(4096) == "_ZEROS[:4096]" and zeros_source(4097) == "[0] * 4097"


@needs_compiler
def test_one_build_per_program_text_and_each_program_its_own_objects(tmp_path: Path):
    a, b = Program(BASIC_JSON.read_bytes()), Program(BASIC_JSON.read_bytes())
    pc = PathCompiler(tmp_path)
    assert pc.cached(a) is None
    a.use_compiled(pc.build(a))
    built = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".so")
    b.use_compiled(pc.cached(b))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".so") == built
    assert len(built) == 1 + len(compiled.SUPPORT_SOURCES)      # the program's, softswitch's own modules
    assert len([name for name in built if name.startswith(compiled.PATH_PREFIX)]) == 1
    # the same module, yet a's tables are not b's: a routes 10.9.0.0/16, b does not
    table = a.tables["MyIngress.ipv4_lpm"]
    spec = next(s for s in a.actions.values() if s.name == "MyIngress.ipv4_forward")
    table.insert(Entry(((0x0A090000, 16),), 0, spec, (0x000000000002, 2)))
    F_a, _ = run_packet(a, frame())
    F_b, _ = run_packet(b, frame())
    egress_spec = a.intrinsics["egress_spec"]
    assert (F_a[egress_spec], F_b[egress_spec]) == (2, 511)


@needs_compiler
def test_the_cache_keeps_the_most_recently_used_builds(tmp_path: Path, monkeypatch, basic_built: Path):
    monkeypatch.setattr(compiled, "KEEP_BUILDS", 2)
    suffix = compiled._ext_suffix()
    copy_of(basic_built, tmp_path)
    (used,) = tmp_path.glob(f"softswitch_path_*{suffix}")
    now = time.time()
    old = []
    for age in (300, 200, 100):          # three older builds, as another program text left them
        stale = tmp_path / f"softswitch_path_{age:024d}{suffix}"
        stale.write_bytes(b"")
        (tmp_path / f"{stale.name[:-len(suffix)]}.lock").write_bytes(b"")
        os.utime(stale, (now - age, now - age))
        old.append(stale)
    os.utime(used, (now - 400, now - 400))   # built first, then loaded again below: used last
    monkeypatch.setattr(compiled, "_loaded", {})
    assert PathCompiler(tmp_path).cached(Program(BASIC_JSON.read_bytes())) is not None
    other = Program(hostile_program())       # another program text: a build, then the pruning
    PathCompiler(tmp_path).build(other)
    kept = sorted(p.name for p in tmp_path.glob(f"softswitch_path_*{suffix}"))
    assert len(kept) == 2 and used.name in kept and not any(p.exists() for p in old)
    assert not any((tmp_path / f"{p.name[:-len(suffix)]}.lock").exists() for p in old)


@needs_compiler
@pytest.mark.parametrize("what", ["directory", "module", "parent"])
def test_code_someone_else_could_have_written_is_not_loaded(tmp_path: Path, monkeypatch, what: str,
                                                           basic_built: Path):
    prog = Program(BASIC_JSON.read_bytes())
    cache = copy_of(basic_built, tmp_path / "parent" / "cache")
    monkeypatch.setattr(compiled, "_loaded", {})          # as a new process would find it
    target = {"directory": cache, "module": next(cache.glob("*.so")), "parent": cache.parent}[what]
    os.chmod(target, 0o666 if what == "module" else 0o777)
    with pytest.raises(CompileError, match="could have been written by another user|could be changed by another"):
        PathCompiler(cache).cached(prog)
    os.chmod(target, {"directory": 0o700, "module": 0o600, "parent": 0o1777}[what])   # sticky, as /tmp: fine
    assert PathCompiler(cache).cached(prog) is not None


def test_without_a_compiler_now_fails_naming_it_and_auto_goes_on_in_python(tmp_path: Path):
    env = {**os.environ, "CC": "no-such-cc", "SOFTSWITCH_CACHE": str(tmp_path)}
    res = subprocess.run([SOFTSWITCH, str(BASIC_JSON), "--compiled", "now"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 2
    assert "no C compiler: 'no-such-cc' is not on PATH" in res.stderr
    assert PathCompiler(tmp_path, cc="no-such-cc").missing() is not None


def _wait_compiled(sw: Switch, timeout: float) -> None:
    """Until the background build is over: the program switched to its build and the builder
    done (it clears ``building`` just after the switch-over), or the build failed."""
    deadline = time.monotonic() + timeout
    while (not sw.program.compiled or sw.fast_path.building) and sw.fast_path.last_error is None:
        assert time.monotonic() < deadline, f"no compiled path after {timeout} s"
        time.sleep(0.1)


@needs_compiler
def test_auto_builds_in_the_background_and_switches_over(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    ctl_port = free_tcp_port()
    grpc_port = next(p for p in iter(free_tcp_port, None) if p != ctl_port)   # both free until bound
    ctl = f"127.0.0.1:{ctl_port}"
    sw = Switch(SwitchConfig(json_path=str(BASIC_JSON), native="off", grpc_addr=f"127.0.0.1:{grpc_port}",
                             runtime_addr=ctl, compiled="auto"))
    sw.start()
    try:
        assert not sw.program.compiled         # nothing cached: Python first
        _wait_compiled(sw, 120)
        status = json.loads(send_command(ctl, "packet_path"))
        assert status == {"program": True, "compiled": True, "batched_io": True, "mode": "auto", "building": False,
                          "error": None, "native": False, "native_mode": "off", "native_refused": None,
                          "native_refusals": 0, "port_io_mode": "auto", "port_io": "no ports",
                          "port_io_ports": {}, "port_io_fallbacks": 0}
        assert sw.dataplane.batched_io
        F, _ = run_packet(sw.program, frame())
        assert F[sw.program.intrinsics["egress_spec"]] == 511      # no route: dropped, compiled
    finally:
        sw.stop()
    # the next switch with this program runs compiled from the start
    again = Switch(SwitchConfig(json_path=str(BASIC_JSON), native="off", grpc_addr=f"127.0.0.1:{free_tcp_port()}",
                                compiled="auto"))
    again.start()
    try:
        assert again.program.compiled
    finally:
        again.stop()


@needs_compiler
def test_a_fabric_s_program_is_built_ahead_and_its_switches_start_compiled(tmp_path: Path, monkeypatch):
    """build_compiled_ahead (what a Lab of softswitches does before any switch starts when the
    native path does not run the program): built once, found cached after, nothing built when
    the compiled path is off; a switch then runs it compiled from its first packet, with no
    build in its background."""
    from softswitch.fastpath import build_compiled_ahead

    def build_ahead(program_json: bytes, progress) -> str:
        return build_compiled_ahead(Program(program_json), progress)

    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    said: list[str] = []
    monkeypatch.setenv("SOFTSWITCH_COMPILED", "off")
    assert build_ahead(BASIC_JSON.read_bytes(), said.append) == "compiled packet path off (SOFTSWITCH_COMPILED=off)"
    assert not PathCompiler().is_built(Program(BASIC_JSON.read_bytes())) and said == []
    monkeypatch.delenv("SOFTSWITCH_COMPILED")
    assert build_ahead(BASIC_JSON.read_bytes(), said.append).startswith("compiled packet path built in ")
    assert len(said) == 1 and "once per machine" in said[0]
    assert PathCompiler().is_built(Program(BASIC_JSON.read_bytes()))
    assert build_ahead(BASIC_JSON.read_bytes(), said.append) == "compiled packet path cached" and len(said) == 1
    sw = Switch(SwitchConfig(json_path=str(BASIC_JSON), native="off", grpc_addr=f"127.0.0.1:{free_tcp_port()}", compiled="auto"))
    sw.start()
    try:
        assert sw.program.compiled and sw.fast_path.status()["building"] is False
    finally:
        sw.stop()


@needs_compiler
def test_a_failed_background_build_leaves_the_python_path_running(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "false")               # a compiler that fails every build
    sw = Switch(SwitchConfig(json_path=str(BASIC_JSON), native="off", grpc_addr=f"127.0.0.1:{free_tcp_port()}"))
    sw.start()
    try:
        _wait_compiled(sw, 60)
        assert not sw.program.compiled
        assert "false failed (exit 1)" in sw.fast_path.status()["error"]
        reference = Program(BASIC_JSON.read_bytes())
        assert run_packet(sw.program, frame()) == run_packet(reference, frame())
    finally:
        sw.stop()


def test_bad_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="'fast' is not one of auto, now, off"):
        Switch(SwitchConfig(compiled="fast"))
    res = subprocess.run([SOFTSWITCH, str(BASIC_JSON), "--compiled", "fast"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "--compiled: invalid choice: 'fast'" in res.stderr
    res = subprocess.run([SOFTSWITCH, str(BASIC_JSON)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "SOFTSWITCH_COMPILED": "fast"})
    assert res.returncode == 2 and "SOFTSWITCH_COMPILED='fast' is not one of auto, now, off" in res.stderr



SLOW_CC_SLEEP = "60.0123"      # a sleep no other process has


@needs_compiler
def test_a_stopping_switch_leaves_no_compiler_running(tmp_path: Path, monkeypatch):
    slow_cc = tmp_path / "slow-cc"
    slow_cc.write_text(f"#!/bin/sh\nsleep {SLOW_CC_SLEEP}\n")
    slow_cc.chmod(0o755)
    monkeypatch.setenv("SOFTSWITCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(slow_cc))
    sw = Switch(SwitchConfig(json_path=str(BASIC_JSON), native="off", grpc_addr=f"127.0.0.1:{free_tcp_port()}"))
    sw.start()
    deadline = time.monotonic() + 60
    while len(_compiler_processes(slow_cc)) < 2:       # cython done; the script and its sleep run
        assert time.monotonic() < deadline and sw.fast_path.building, sw.fast_path.status()
        time.sleep(0.1)
    program = sw.program
    sw.stop()
    deadline = time.monotonic() + 5
    while (_compiler_processes(slow_cc) or sw.fast_path.building) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _compiler_processes(slow_cc)
    assert not program.compiled and "cancelled" in sw.fast_path.status()["error"]


@needs_compiler
def test_a_killed_switch_leaves_no_compiler_running(tmp_path: Path, monkeypatch):
    """SIGKILLed mid-build (as a failure injection kills a switch), the switch can cancel
    nothing: its build step (softswitch.build_step) kills its own group when the switch is gone."""
    slow_cc = tmp_path / "slow-cc"
    slow_cc.write_text(f"#!/bin/sh\nsleep {SLOW_CC_SLEEP}\n")
    slow_cc.chmod(0o755)
    env = {**os.environ, "SOFTSWITCH_CACHE": str(tmp_path / "cache"), "CC": str(slow_cc)}
    switch = ("import threading\n"
              "from softswitch.switch import Switch, SwitchConfig\n"
              f"Switch(SwitchConfig(json_path={str(BASIC_JSON)!r}, native='off', grpc_addr='127.0.0.1:{free_tcp_port()}')).start()\n"
              "threading.Event().wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", switch], env=env)
    try:
        deadline = time.monotonic() + 60
        while SLOW_CC_SLEEP not in " ".join(map(str, _compiler_processes(slow_cc, names=True))):
            assert time.monotonic() < deadline and proc.poll() is None, "the switch never started its compiler"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while _compiler_processes(slow_cc) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _compiler_processes(slow_cc, names=True)


def _compiler_processes(cc: Path, names: bool = False) -> list:
    """The fake compiler's shell and its sleep."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(cc).encode() in cmdline or cmdline == f"sleep\0{SLOW_CC_SLEEP}\0".encode():
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace") if names else int(pid))
    return found
