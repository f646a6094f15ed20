"""Mininet's logger class does not leak into ours (emulation/__init__.py): a logger created after
the lab is imported is a plain one whose records go to the root's handlers, one line each."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["aifabric.lab.lab", "emulation.p4switch"])
def test_loggers_created_after_mininet_are_plain(module):
    code = (f"import logging, {module}\n"
            "logging.basicConfig(format='%(name)s: %(message)s')\n"
            "logging.getLogger('controller.created.later').warning('one')\n"
            "logging.getLogger('controller.created.later').warning('two')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == ["controller.created.later: one", "controller.created.later: two"], run.stderr
