#!/usr/bin/env python3
"""The workload generator on the presets: how many ops one iteration is, how long generating
them and timing them analytically takes, and the analytic link-bound step time (real scale:
400 Gb/s links, 150 TFLOP/s per GPU) with its exposed communication, per parallelism.

No fabric is brought up (aifabric.workloads is pure Python). Times are wall clock
(perf_counter) of one run each; the machine may be shared.

    .venv/bin/python -m benchmarks.workload_estimates [--json out/workload_estimates.json]
"""
from __future__ import annotations

import argparse
import time

from aifabric.lab import report
from aifabric.workloads import Job, Parallelism, estimate, generate, preset

CASES: list[tuple[str, Parallelism]] = [
    ("llama2-7b", Parallelism(dp=8, micro_batches=4)),
    ("llama2-7b", Parallelism(dp=4, tp=2, micro_batches=4)),
    ("llama2-7b", Parallelism(dp=2, tp=2, pp=2, micro_batches=8)),
    ("llama2-7b", Parallelism(dp=8, micro_batches=4, zero_stage=3)),
    ("mixtral-8x7b", Parallelism(dp=8, ep=8, micro_batches=4)),
    ("mixtral-8x7b", Parallelism(dp=8, ep=4, tp=2, micro_batches=4, zero_stage=1)),
    ("gpt3-175b", Parallelism(dp=4, tp=8, pp=8, micro_batches=16)),
]


def run_case(name: str, par: Parallelism) -> dict:
    job = Job(preset(name), par)
    t0 = time.perf_counter()
    w = generate(job)
    t1 = time.perf_counter()
    est = estimate(w)
    t2 = time.perf_counter()
    slow = est.slowest
    return {"preset": name, "dp": par.dp, "tp": par.tp, "pp": par.pp, "ep": par.ep, "zero": par.zero_stage,
            "micro_batches": par.micro_batches, "ranks": par.world, "ops": len(w.all_ops()),
            "generate_s": t1 - t0, "estimate_s": t2 - t1, "step_s": slow.step_s, "compute_s": slow.compute_s,
            "exposed_comm_s": slow.exposed_comm_s, "comm_s_by_kind": slow.comm_s_by_kind}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default="out/workload_estimates.json")
    args = ap.parse_args()
    results = []
    for name, par in CASES:
        report.progress(f"{name} dp={par.dp} tp={par.tp} pp={par.pp} ep={par.ep} zero={par.zero_stage}")
        results.append(run_case(name, par))
    rows = [[r["preset"], f"{r['dp']}/{r['tp']}/{r['pp']}/{r['ep']}", r["zero"], r["micro_batches"], r["ranks"],
             r["ops"], r["generate_s"], r["estimate_s"], r["step_s"], r["compute_s"],
             f"{100 * r['exposed_comm_s'] / r['step_s']:.1f}%"] for r in results]
    print(report.table(["preset", "dp/tp/pp/ep", "zero", "micro-batches", "ranks", "ops", "generate s",
                        "estimate s", "step s", "compute s", "exposed"], rows,
                       title="analytic link-bound step, 400 Gb/s links, 150 TFLOP/s per GPU"))
    report.write_json(args.json, {"cases": results})
    report.progress(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
