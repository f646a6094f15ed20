"""The benchmarks that read switch processes from /proc (benchmarks/scale.py,
benchmarks/target_pps.py) read a live process and name one that is gone, exited or left a
zombie, instead of reading it as 0 CPU seconds and 0 MiB (which pulled every mean down)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import scale, target_pps


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def zombie():
    """A child that has exited and is not reaped yet."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while _state(proc.pid) != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    yield proc.pid
    proc.wait()


@pytest.fixture
def reaped() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_process_is_read():
    me = os.getpid()
    assert scale.cpu_seconds(me) > 0
    assert target_pps.cpu_seconds([me])[me] > 0
    assert scale.gone({"me": me}) == []


@pytest.mark.parametrize("which", ["zombie", "reaped"])
def test_a_gone_process_is_named_not_read_as_zero(which, request):
    pid = request.getfixturevalue(which)
    assert scale.gone({"me": os.getpid(), "it": pid}) == ["it"]
    with pytest.raises(target_pps.TargetGone, match=f"process {pid} is gone"):
        target_pps.cpu_seconds([pid])
    if which == "reaped":          # a zombie's stat still reads: gone() names it
        with pytest.raises(scale.ProcessGone, match=f"process {pid} is gone"):
            scale.cpu_seconds(pid)
