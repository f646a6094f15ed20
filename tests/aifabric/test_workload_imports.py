"""aifabric.workloads is pure Python over descriptions: importing it brings in no Mininet, no
lab, no controller and no emulation (a fresh interpreter, so nothing else imported them first)."""
from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("mininet", "aifabric.lab", "aifabric.cli", "controller", "emulation", "hostagent")


def test_importing_workloads_imports_no_fabric():
    code = ("import sys, aifabric.workloads, aifabric.workloads.summary; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m.startswith({FORBIDDEN!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
