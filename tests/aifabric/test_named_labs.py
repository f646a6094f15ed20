"""Named labs (aifabric.lab.named_labs): their names, what the command inside is given, and
the command run again inside a namespace of its own, whose status comes back and whose
namespace goes with it. A whole named lab beside another: tests/fabric/test_teardown.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aifabric.lab import named_labs
from aifabric.lab.named_labs import NamedLab
from emulation.procs import LAB_MARKER

AIFABRIC = str(Path(sys.executable).parent / "aifabric")


@pytest.mark.parametrize("name", ["", "Big", "a b", "-x", "x" * 33, "../up", "a/b"])
def test_a_bad_name_is_refused_naming_it(name):
    with pytest.raises(ValueError, match="lab name"):
        NamedLab(name)


def test_the_command_inside_gets_the_labs_run_directory_socket_and_marker():
    lab = NamedLab("second")
    env = lab.env({"PATH": "/bin"})
    assert env["AIFABRIC_RUN_DIR"] == "/tmp/aifabric-labs/second"
    assert env["AIFABRIC_CONTROL_SOCKET"] == "/run/aifabric/labs/second/control.sock"
    assert env[LAB_MARKER] == str(Path("/tmp/aifabric-labs/second").resolve())
    assert env[named_labs.INSIDE_ENV] == env[named_labs.NAME_ENV] == "second" and env["PATH"] == "/bin"
    assert lab.netns == "aifabric-second" and not lab.is_current()


def test_existing_labs_are_found_by_namespace_or_run_directory(tmp_path, monkeypatch):
    (tmp_path / "netns").mkdir()
    (tmp_path / "netns" / "aifabric-one").touch()
    (tmp_path / "netns" / "other").touch()
    (tmp_path / "runs" / "two").mkdir(parents=True)
    (tmp_path / "runs" / "Not A Lab").mkdir()
    monkeypatch.setattr(named_labs, "NETNS_DIR", tmp_path / "netns")
    monkeypatch.setattr(named_labs, "RUN_DIRS", tmp_path / "runs")
    assert [lab.name for lab in named_labs.existing()] == ["one", "two"]


def _wait_exec(pid: int, program: str, within_s: float = 10.0) -> None:
    """Until process ``pid`` runs ``program`` (a child just forked still has its parent's environment)."""
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != program.encode():
        assert time.monotonic() < deadline, f"process {pid} did not exec {program} within {within_s:g} s"
        time.sleep(0.01)


def test_a_lab_with_its_logs_alone_has_nothing_to_clean_and_one_with_a_process_has(tmp_path, monkeypatch):
    """`aifabric clean` goes into the named labs that have something left, and names the others
    in one line: a lab's run directory (its logs) outlives it."""
    (tmp_path / "netns").mkdir()
    monkeypatch.setattr(named_labs, "NETNS_DIR", tmp_path / "netns")
    monkeypatch.setattr(named_labs, "RUN_DIRS", tmp_path / "runs")
    lab = NamedLab("old")
    lab.run_dir.mkdir(parents=True)
    assert not lab.has_anything()
    (tmp_path / "netns" / lab.netns).touch()
    assert lab.has_anything()
    (tmp_path / "netns" / lab.netns).unlink()
    marked = subprocess.Popen(["sleep", "30"], env=lab.env({"PATH": os.environ["PATH"]}))
    try:
        _wait_exec(marked.pid, "sleep")     # its environment is the lab's from its exec on
        assert lab.has_anything()       # a process of the lab's, its namespace gone
    finally:
        marked.kill()
        marked.wait()
    assert not lab.has_anything()


def test_commands_that_bring_up_no_lab_refuse_a_lab_name():
    done = subprocess.run([AIFABRIC, "--lab", "x", "workload", "show", "--preset", "llama2-7b"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "brings none up" in done.stderr, done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_the_command_runs_inside_the_labs_namespace_and_the_namespace_goes_after():
    lab = NamedLab(f"t{os.getpid()}")
    done = subprocess.run([AIFABRIC, "--lab", lab.name, "fail", "switch", "s0"], capture_output=True, text=True,
                          timeout=60)
    # the request went to the lab's own socket, from inside its namespace, and its status came back
    assert done.returncode == 2 and "no fabric running" in done.stderr, done.stderr
    assert str(lab.control_socket) in done.stderr
    assert lab.netns_inode() is None
