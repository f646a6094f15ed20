#!/usr/bin/env python3
"""Memory of native data planes in one process: what each more switch costs when many are
served by one process (issue 31's alternative to a process per switch).

The fabric program's native library is built (cached) and loaded once; then N data planes are
made from it (native/dataplane.py, no ports: no traffic, queues empty), first alone (the C
state: the data plane, its buffers and the program's objects, tables still empty), then each
with a Python Program of its own mirrored into its objects (what a switch's P4Runtime side
adds: the reference objects that answer reads). The process's private memory and PSS are read
from /proc/self/smaps_rollup before and after each step; per data plane = growth / N.

    .venv/bin/python -m benchmarks.native_memory [--switches 16] [--json out/native_memory.json]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import report  # noqa: E402
from benchmarks.target_pps import memory_mib  # noqa: E402
from softswitch.native import codegen  # noqa: E402
from softswitch.native.build import NativeBuilder  # noqa: E402
from softswitch.native.dataplane import NativeDataplane  # noqa: E402
from softswitch.native.objects import NativeObjects  # noqa: E402
from softswitch.pipeline.program import Program  # noqa: E402

FABRIC = REPO / "p4src/build/fabric.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--switches", type=int, default=16)
    ap.add_argument("--json", default=str(REPO / "out/native_memory.json"))
    args = ap.parse_args(argv)
    n = args.switches
    source = FABRIC.read_bytes()
    before = memory_mib("self")
    program = Program(source)
    native = codegen.generate(program)
    library = NativeBuilder().load(native.source)
    loaded = memory_mib("self")
    alone = [NativeDataplane(library, {}) for _ in range(n)]
    after_alone = memory_mib("self")
    mirrored = []
    for _ in range(n):
        dp = NativeDataplane(library, {})
        prog = Program(source)
        NativeObjects(prog, native, library, dp.objects).attach()
        mirrored.append((dp, prog))
    after_mirrored = memory_mib("self")

    def grown(a: dict, b: dict, per: int = 1) -> dict:
        return {k: round((b[k] - a[k]) / per, 2) for k in ("private_mib", "pss_mib")}
    rows = {"program, generated C and library (once)": grown(before, loaded),
            "per data plane, C state alone": grown(loaded, after_alone, n),
            "per data plane with its Python program mirrored": grown(after_alone, after_mirrored, n)}
    print(report.table(["what", "private MiB", "PSS MiB"],
                       [(k, v["private_mib"], v["pss_mib"]) for k, v in rows.items()],
                       title=f"Native data planes of the fabric program in one process ({n} of each)"))
    report.write_json(args.json, {"switches": n, "rows": rows, "before": before, "after": after_mirrored})
    print(f"JSON: {args.json}")
    for dp in alone:
        dp.stop()
    for dp, _ in mirrored:
        dp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
