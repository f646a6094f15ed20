"""The controller stands on pure descriptions only: no module under controller/ imports Mininet,
directly or through what it imports (emulation/ is the Mininet layer; topologies/ is pure data).

Each check imports in a fresh interpreter, so what this test process has imported already
(Mininet, through fixtures or other tests) cannot hide an import."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports every module of the named packages, then prints which of them pulled in Mininet.
_PROBE = """
import importlib, json, pkgutil, sys
found, errors = {}, {}
for package in sys.argv[1:]:
    top = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(top.__path__, package + ".")]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as err:
            errors[name] = f"{type(err).__name__}: {err}"
        if "mininet" in sys.modules and not found:
            found["first"] = name
print(json.dumps({"modules": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1:]),
                  "mininet": found.get("first"), "errors": errors}))
"""


def _probe(*packages: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, *packages], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_controller_module_imports_mininet() -> None:
    result = _probe("controller", "topologies")
    assert not result["errors"], result["errors"]
    assert "controller.fabric_controller" in result["modules"]     # the walk reached the core
    assert result["mininet"] is None, f"importing {result['mininet']} imports mininet"


def test_the_probe_sees_mininet_where_it_is_imported() -> None:
    """The same probe on the emulation layer, which does import Mininet: the check can fail."""
    assert _probe("emulation")["mininet"] is not None
