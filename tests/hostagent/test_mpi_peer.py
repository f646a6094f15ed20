"""Open MPI's collectives as the benchmark runs them (hostagent.collectives.mpi_peer): mpirun with
three local processes over TCP, every rank checking each result against numpy with the runner's
bounds (int32 exact, float32 sums within the roundoff bound). The fabric test runs it across hosts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from hostagent.collectives.mpi_peer import OPS

N = 3


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_every_rank_checks_mpi_against_numpy(dtype: str) -> None:
    assert shutil.which("mpirun"), "mpirun not found: scripts/bootstrap.sh installs openmpi-bin"
    out = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(N), "--mca", "btl", "tcp,self",
         "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "--mca", "mpi_yield_when_idle", "1",
         sys.executable, "-m", "hostagent.collectives.mpi_peer", "--ops", *OPS, "--dtype", dtype,
         "--elements", "1", "65", "1000", "--repeat", "2"],
        capture_output=True, text=True, timeout=120)
    assert out.stdout.strip(), f"no report (exit status {out.returncode}): {out.stderr[-2000:]}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r["rank"] for r in report["ranks"]] == list(range(N)) and report["library"].startswith("Open MPI")
    for r in report["ranks"]:
        assert [(c["op"], c["elements"]) for c in r["calls"]] == [(op, e) for op in OPS for e in (1, 65, 1000)]
        for c in r["calls"]:
            assert c["ok"], f"rank {r['rank']} {c['op']} {c['elements']}: error {c['max_error']} > bound {c['bound']}"
            assert c["median_s"] > 0
    assert out.returncode == 0, out.stderr[-2000:]
