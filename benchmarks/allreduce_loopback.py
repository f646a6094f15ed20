#!/usr/bin/env python3
"""AllReduce on loopback: the parameter server (in-network aggregation's fallback) next to the
ring, with the same processes the Mininet hosts run (`python -m hostagent.collectives`).

Every worker is its own process on its own 127.a.b.N address (the PS on .1); the time of a run is
the slowest rank's, algorithm bandwidth = tensor bytes / that time. One warm-up allreduce first
lines the processes up. Only the host software is measured here (no switches, no link limits):
on a shared 2-core machine both algorithms are bound by Python's per-packet cost.

    .venv/bin/python -m benchmarks.allreduce_loopback [--workers 8] [--size 262144] [--dtypes float32,int32]
        [--json out/allreduce_loopback.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import report  # noqa: E402

NET = "127.31.7."


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hostagent.collectives", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(procs: list[subprocess.Popen]) -> list[dict]:
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"a rank failed: {err.strip()}")
        reports.append(json.loads(out))
    return reports


def run(algorithm: str, workers: int, size: int, dtype: str, timeout: float) -> dict:
    common = ["--size", str(size), "--dtype", dtype, "--timeout", str(timeout)]
    ps = None
    if algorithm == "ps":
        ps = _start("ps", "--bind", NET + "1", "--job", f"1:{workers}")
        ps.stderr.readline()  # listening
        procs = [_start("worker", "--ps", NET + "1", "--job", "1", "--workers", str(workers), "--rank", str(r),
                        "--bind", NET + str(2 + r), *common) for r in range(workers)]
    else:
        peers = ",".join(NET + str(2 + r) for r in range(workers))
        procs = [_start("ring", "--peers", peers, "--rank", str(r), *common) for r in range(workers)]
    try:
        reports = _collect(procs)
    finally:
        if ps is not None:
            ps.terminate()
            ps.communicate(timeout=30)
    slowest = max(r["time_s"] for r in reports)
    return {
        "algorithm": algorithm,
        "dtype": dtype,
        "workers": workers,
        "tensor_bytes": reports[0]["tensor_bytes"],
        "time_s": slowest,
        "algbw_MBps": reports[0]["tensor_bytes"] / slowest / 1e6,
        "ok": all(r["ok"] for r in reports),
        "max_abs_error": max(r["max_abs_error"] for r in reports),
        "bytes_sent_per_worker": reports[0]["bytes_sent"],
        "packets_sent_per_worker": reports[0]["packets_sent"],
        "retransmissions": sum(r["retransmissions"] for r in reports),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--size", type=int, default=1 << 18, help="elements (1 << 18 float32 = 1 MiB)")
    ap.add_argument("--dtypes", default="float32,int32")
    ap.add_argument("--timeout", type=float, default=0.2, help="retransmission timeout of every rank")
    ap.add_argument("--json", default=str(REPO / "out/allreduce_loopback.json"))
    args = ap.parse_args(argv)

    results = [run(alg, args.workers, args.size, dtype, args.timeout)
               for dtype in args.dtypes.split(",") for alg in ("ps", "ring")]
    print(report.table(
        ["algorithm", "dtype", "time s", "algbw MB/s", "bytes sent/worker", "retransmissions", "ok"],
        [(r["algorithm"], r["dtype"], round(r["time_s"], 3), round(r["algbw_MBps"], 2),
          r["bytes_sent_per_worker"], r["retransmissions"], r["ok"]) for r in results],
        title=f"AllReduce on loopback, {args.workers} workers, {results[0]['tensor_bytes']} bytes",
    ))
    report.write_json(args.json, {"workers": args.workers, "size": args.size, "runs": results})
    print(f"figures written to {Path(args.json).resolve()}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
