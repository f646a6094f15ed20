"""aifabric's pytest plugin (aifabric.testing) and `aifabric up --controller none --describe`, run
as a user runs them: pytest in a directory of its own, finding the `fabric` fixture through the
installed entry point; a fabric with no controller that the firewall example programs alone; a
failing user assertion that still leaves nothing behind."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aifabric.lab import description
from emulation.cleanup import leftovers

REPO = Path(__file__).resolve().parents[2]
AIFABRIC = str(Path(sys.executable).parent / "aifabric")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")]

USER_TESTS = '''
import sys
import pytest
sys.path.insert(0, {firewall_dir!r})
import firewall

pytestmark = pytest.mark.fabric(k=2, controller="none", targets=["softswitch"])


def test_the_user_controller_owns_bare_switches(fabric):
    assert fabric.description.controller.kind == "none" and fabric.controller is None
    assert all(fabric.reader(s.name).pipeline_cookie() is None for s in fabric.switches), "a pipeline was pushed"
    firewall.block(fabric.description.to_dict(), "udp", 5000)       # pushes the pipeline, then its entries
    edges = [s.name for s in fabric.switches if s.role == "edge"]
    assert [len(fabric.read_table(e, firewall.ACL)) for e in edges] == [1] * len(edges)
    assert all(fabric.read_table(e, "FabricIngress.forwarding.routing_v4") == [] for e in edges)
    print("DESCRIPTION", fabric.description_path)


def test_a_failing_user_assertion(fabric):
    assert fabric.ping("p0e0h0", "p1e0h0"), "USER ASSERTION: no routes without a controller"
'''


def test_a_failing_user_test_still_tears_the_fabric_down(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS.format(firewall_dir=str(REPO / "examples" / "firewall")))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          "--basetemp", str(tmp_path / "bt"), "test_user.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in out and "USER ASSERTION" in out, out[-3000:]
    described = Path(next(ln.split()[1] for ln in out.splitlines() if ln.startswith("DESCRIPTION")))
    assert not described.exists(), "the description of a fabric that is gone was left"
    left = leftovers()
    assert not left, f"teardown left {left.describe()}"


def test_up_with_no_controller_writes_the_description(tmp_path):
    path = tmp_path / "fabric.json"
    script = f"sh test -s {path} && echo DESCRIBED-WHILE-UP\nexit\n"
    res = subprocess.run([AIFABRIC, "up", "--topo", "leafspine", "--leaves", "2", "--spines", "1",
                          "--hosts-per-leaf", "1", "--target", "softswitch", "--controller", "none",
                          "--describe", str(path)], input=script, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "DESCRIBED-WHILE-UP" in res.stdout
    desc = description.load(path)
    assert desc.controller.kind == "none" and desc.target == "softswitch"
    assert [(s.name, s.device_id, s.p4runtime_address) for s in desc.switches] == [
        ("l0", 1, "127.0.0.1:50001"), ("l1", 2, "127.0.0.1:50002"), ("s0", 3, "127.0.0.1:50003")]
    assert Path(desc.pipeline.device_config).is_file() and Path(desc.pipeline.p4info).is_file()
    assert not leftovers()
