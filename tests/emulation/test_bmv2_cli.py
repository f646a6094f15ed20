"""BMv2's Thrift CLI runs with the project's Python, whatever ``python3`` comes first on PATH
(emulation.bmv2_cli).

BMv2 built from source installs ``simple_switch_CLI`` as ``#!/usr/bin/env python3``. Here the
first ``python3`` on PATH is a venv of Debian's Python without system packages, so without
``thrift``: a queue rate set through the CLI on a running BMv2 still takes effect (a burst
leaves at that rate, read from the queueing program's egress timestamps); and where the
project's own interpreter lacks ``thrift``, the CLI's failure is one line naming the module
and the interpreter, not a traceback.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scenarios.queueing import Q, Q_AT, _frame, _setup
from scenarios.runner import Scenario, Send, Step, program_files, run

REPO = Path(__file__).resolve().parents[2]
RATE_PPS = 50
BURST = 8

needs_cli = pytest.mark.skipif(shutil.which("simple_switch_CLI") is None,
                               reason="BMv2's simple_switch_CLI is not on PATH")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """``python3`` of a venv made from /usr/bin/python3 without system packages: no thrift."""
    venv = tmp_path_factory.mktemp("no-thrift") / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)
    python = venv / "bin" / "python3"
    has = subprocess.run([str(python), "-c", "import thrift"], capture_output=True, timeout=30)
    assert has.returncode != 0, f"{python} imports thrift: it cannot stand for a python3 without it"
    return python


def _cli(*commands: str) -> Step:
    def step(s) -> bytes:
        s.switch_cli(*commands)
        return " / ".join(commands).encode()
    return Step(step)


@pytest.mark.bmv2
@needs_cli
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="BMv2 simple_switch_grpc is not on PATH")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)")
def test_queue_rate_takes_effect_whatever_python3_comes_first_on_path(bare_python, monkeypatch):
    if not program_files("queueing")[0].exists():
        pytest.skip("tests/p4/build/queueing.json is not built (run `make p4` where p4c is installed)")
    monkeypatch.setenv("PATH", f"{bare_python.parent}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("python3") == str(bare_python)
    burst = Send(1, _frame(700), repeat=BURST)
    sc = Scenario("rate-with-bare-python3", "queueing",
                  [_cli(f"set_queue_rate {RATE_PPS} 2"), burst, _cli("set_queue_rate 0 2")],
                  setup=_setup, ports=2, timeout=2.0)
    outputs = run("bmv2", sc)
    left = sorted((Q.unpack(f[Q_AT:]) for port, f in outputs[1] if port == 2),
                  key=lambda q: q["egress_global_timestamp"])
    assert len(left) >= BURST - 1, f"{len(left)} of {BURST} frames left port 2"
    span = left[-1]["egress_global_timestamp"] - left[0]["egress_global_timestamp"]
    want = (len(left) - 1) * 1e6 / RATE_PPS * 0.8
    assert span >= want, f"{len(left)} departures within {span} us: the rate of {RATE_PPS}/s was not applied"


@needs_cli
def test_missing_thrift_in_the_projects_python_is_named_in_one_line(bare_python):
    code = ("from emulation.bmv2_cli import Bmv2CliError, run_cli\n"
            "try:\n    run_cli(9, ['set_queue_rate 100 2'])\n"
            "except Bmv2CliError as err:\n    print(err)\n")
    res = subprocess.run([str(bare_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0 and not res.stderr, f"not a one-line error:\n{res.stdout}{res.stderr}"
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1, f"{len(lines)} lines: {res.stdout}"
    assert "thrift" in lines[0] and str(bare_python) in lines[0] and "make setup" in lines[0], lines[0]
