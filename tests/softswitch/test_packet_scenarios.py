"""Packets through a real target, port by port and byte by byte.

Every scenario in tests/scenarios/ (one module per P4 test program, plus the fabric) runs on
softswitch over veth pairs: its explicit expectations must hold. Where BMv2's
simple_switch_grpc is installed the same scenario runs on it too, and softswitch must send
the same frames out of the same ports for every packet (the differential test). Where
softswitch's compiled packet path can be built (Cython, a C compiler), the scenario runs on it
as well and must give what the generated Python, the reference, gives; so must the native data
path (a C compiler), meeting the scenario's explicit expectations too, for every program its
generator can do (the others are skipped, the reason named), on both its port I/Os: the ports'
AF_PACKET sockets and AF_XDP sockets.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import shutil

import pytest

import scenarios
from scenarios.runner import NATIVE_TARGETS, Scenario, build_compiled, comparable, describe, program_files, run
from softswitch.build_cache import BUILD_TIMEOUT_S
from softswitch.pipeline.compiled import PathCompiler

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, raw sockets)")


def _all_scenarios() -> list[Scenario]:
    found = []
    for mod in pkgutil.iter_modules(scenarios.__path__):
        if mod.name != "runner" and not mod.name.startswith("_"):     # _fields: helpers
            found += importlib.import_module(f"scenarios.{mod.name}").SCENARIOS
    return found


SCENARIOS = _all_scenarios()
_results: dict[tuple[str, str], list] = {}      # a worker's runs, each compared by several tests


def _params(scenarios: list[Scenario]) -> list:
    """The scenarios as parameters, a program's on one pytest-xdist worker: the softswitch run
    the comparisons share and the program's compiled build are then made once (spread over the
    workers they cost a third more)."""
    return [pytest.param(sc, id=sc.name, marks=pytest.mark.xdist_group(f"program-{sc.program}"))
            for sc in scenarios]


def _outputs(target: str, sc: Scenario):
    key = (target, sc.name)
    if key not in _results:
        json_path, _ = program_files(sc.program)
        if not json_path.exists():
            pytest.skip(f"{json_path} is not built (run `make p4` where p4c is installed)")
        _results[key] = run(target, sc)
    return _results[key]


@pytest.mark.parametrize("sc", _params(SCENARIOS))
def test_softswitch(sc: Scenario):
    outputs = _outputs("softswitch", sc)
    if sc.expect is None:
        pytest.skip("no explicit expectation: covered by the differential test")
    sc.expect(outputs)


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")
@pytest.mark.parametrize("sc", _params(SCENARIOS))
def test_same_as_bmv2(sc: Scenario):
    if sc.not_bmv2:
        pytest.skip(sc.not_bmv2)
    soft = comparable(sc, _outputs("softswitch", sc))
    bmv2 = comparable(sc, _outputs("bmv2", sc))
    assert soft == bmv2, f"softswitch:\n{describe(soft)}\nBMv2:\n{describe(bmv2)}"


_COMPILER_MISSING = PathCompiler().missing()


# The first build of the fabric program from an empty cache: ~75 s on a quiet machine, 469 s and
# over 600 s (the suite's default timeout) beside a busy build; a build step is stopped after
# build_cache.BUILD_TIMEOUT_S (900 s), so that is the hang this timeout leaves to it.
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
@pytest.mark.skipif(_COMPILER_MISSING is not None, reason=f"compiled packet path: {_COMPILER_MISSING}")
@pytest.mark.parametrize("sc", _params(SCENARIOS))
def test_compiled_same_as_python(sc: Scenario):
    if program_files(sc.program)[0].exists():
        build_compiled(sc.program)        # once per program text (cached); the first fabric build takes ~75 s
    python = comparable(sc, _outputs("softswitch", sc))
    compiled = comparable(sc, _outputs("softswitch-compiled", sc))
    assert compiled == python, f"compiled:\n{describe(compiled)}\nPython:\n{describe(python)}"


def _native_refusal(program: str) -> str | None:
    """Why the native path cannot run ``program`` (None: it can)."""
    from softswitch.native import build, codegen
    from softswitch.pipeline.program import Program
    why = build.missing()
    if why:
        return why
    try:
        codegen.generate(Program(program_files(program)[0].read_bytes()))
    except codegen.Unsupported as e:
        return f"the native generator cannot do {program}: {e}"
    return None


# The native data plane in a real switch process, on the scenarios that exercise its loop (queues,
# copies, the CPU port, stateful objects, the fabric's multicast, ECN and INT metadata). Every
# scenario's frames also go through the native pipeline in-process, against the Python path, in
# tests/softswitch/test_native_pipeline.py: a switch process per scenario here would cost ~110 s.
NATIVE_LOOP_SCENARIOS = ("queueing", "classes", "pfc", "replication", "packetio", "stateful", "fabric_agg",
                         "fabric_ecn", "fabric_int_transit")


@pytest.mark.parametrize("port_io", list(NATIVE_TARGETS))
@pytest.mark.parametrize("sc", _params([sc for sc in SCENARIOS if sc.name in NATIVE_LOOP_SCENARIOS]))
def test_native_same_as_python(sc: Scenario, port_io: str):
    if not program_files(sc.program)[0].exists():
        pytest.skip(f"{program_files(sc.program)[0]} is not built")
    why = _native_refusal(sc.program)
    if why:
        pytest.skip(why)
    target = NATIVE_TARGETS[port_io]
    if sc.expect is not None:            # what the comparison blanks (queue depths, timestamps) too
        sc.expect(_outputs(target, sc))
    python = comparable(sc, _outputs("softswitch", sc))
    native = comparable(sc, _outputs(target, sc))
    assert native == python, f"native:\n{describe(native)}\nPython:\n{describe(python)}"
