#!/usr/bin/env python3
"""Ctrl-C to a clean machine: how long ``aifabric demo`` takes to leave nothing behind.

Runs the demo (fat-tree k, softswitch) several times and sends SIGINT at a point of its run,
found from its progress lines: while the switch targets start, while the pipeline is pushed,
during the iperf3 step. Measures from the signal to the process's exit and to the moment
nothing of the fabric is left (`emulation.cleanup.leftovers`: switch processes, node shells,
host namespaces, interfaces, listening ports), and prints the median, minimum and maximum.

    .venv/bin/python -m benchmarks.teardown [--k 4] [--runs 5] [--points switch-start traffic] [--json PATH]
"""
from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import report  # noqa: E402
from emulation.cleanup import leftovers  # noqa: E402

AIFABRIC = str(Path(sys.executable).parent / "aifabric")
POINTS = {                          # progress line (stderr) -> the signal goes right after it
    "switch-start": "links made; starting the switch targets",
    "pipeline-push": "pushing the pipeline",
    "traffic": "(iperf3",
}


def measure(k: int, point: str, timeout: float = 300.0) -> dict:
    """One run: demo until ``point``, SIGINT, then seconds to exit and to a clean machine."""
    before = leftovers()
    if before:      # a fabric's names and ports are the machine's: never measure beside another
        raise RuntimeError(f"a fabric is running or was left here (`aifabric clean`): {before.describe()}")
    proc = subprocess.Popen([AIFABRIC, "demo", "--k", str(k), "--target", "softswitch"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if POINTS[point] in line:
                break
        else:
            raise RuntimeError(f"the demo ended (status {proc.wait()}) before {POINTS[point]!r}")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        code = proc.wait(timeout=timeout)
        exit_s = time.monotonic() - t0
        while leftovers() and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
        clean_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = leftovers()
    return {"point": point, "k": k, "status": code, "exit_s": round(exit_s, 2), "clean_s": round(clean_s, 2),
            "said_torn_down": "everything was torn down" in rest, "left": left.describe() if left else ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--points", nargs="+", choices=sorted(POINTS), default=["switch-start", "traffic"])
    ap.add_argument("--json", default=str(REPO / "out/teardown.json"))
    args = ap.parse_args(argv)
    runs = [measure(args.k, point) for point in args.points for _ in range(args.runs)]
    rows = []
    for point in args.points:
        mine = [r for r in runs if r["point"] == point]
        clean = [r["clean_s"] for r in mine]
        rows.append((point, len(mine), statistics.median(r["exit_s"] for r in mine), statistics.median(clean),
                     min(clean), max(clean), sum(1 for r in mine if r["said_torn_down"] and not r["left"])))
    print(report.table(["Ctrl-C during", "runs", "to exit, median (s)", "to clean, median (s)", "min (s)",
                        "max (s)", "clean and said so"], rows,
                       title=f"Ctrl-C to a clean machine, fat-tree k={args.k}, softswitch"))
    report.write_json(args.json, {"k": args.k, "runs": runs})
    print(f"JSON: {args.json}")
    return 0 if all(r["said_torn_down"] and not r["left"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
