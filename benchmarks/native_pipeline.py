#!/usr/bin/env python3
"""CPU per packet of softswitch's native pipeline, no I/O: the fabric program's pipeline in C
(native/codegen/) with its objects (objects.c), one frame at a time through frame_run.c's
straight path (arrival metadata, parse, checksum check, ingress, egress, checksum update,
deparse and payload), timed in C with the thread's CPU clock. The same programs, entries and
frames as target_pps.py and softswitch_path.py: a normal routed packet (fabric) and an
in-network aggregation packet (aggregation: 64 values of 32 bits, its result multicast: timed
as its one copy to port 2). Entries are written through softswitch's own P4Runtime code into
the Python objects, which mirror them into the native ones (objects.py). Each frame of the
program's set in turn, best of several repeats; the Python path's figure alongside (the
generated Python, the same steps: pipeline_run.python_run).

    .venv/bin/python -m benchmarks.native_pipeline [--packets 200000] [--json out/native_pipeline.json]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from benchmarks.target_pps import PROGRAMS  # noqa: E402

from aifabric.lab import report  # noqa: E402
from controller.fabric_controller import Pipeline as ControllerPipeline  # noqa: E402
from softswitch.native.pipeline_run import NativePipeline, python_run  # noqa: E402
from softswitch.p4runtime import pre_entries  # noqa: E402
from softswitch.p4runtime.device import _WRITERS  # noqa: E402
from softswitch.p4runtime.pipeline import Pipeline  # noqa: E402

REPEATS = 5
EXPECTED_PORT = 2          # every program's frames leave by port 2 (target_pps.py's setups)
PYTHON_FRAMES = 2000       # the Python path is ~100x slower: fewer frames give its figure


class _Writes:
    """target_pps.py's setups write through a SwitchConnection; here through softswitch's own
    P4Runtime writers, in this process, into a Pipeline's Python objects."""

    def __init__(self, pipe: Pipeline):
        self.pipe = pipe

    def insert(self, entities) -> None:
        from p4.v1 import p4runtime_pb2
        for ent in entities:
            kind = ent.WhichOneof("entity")
            if kind == "packet_replication_engine_entry":
                pre_entries.write_pre(self.pipe.pre, p4runtime_pb2.Update.INSERT, ent.packet_replication_engine_entry)
            else:
                _WRITERS[kind](self.pipe, p4runtime_pb2.Update.INSERT, getattr(ent, kind))


def measure(program: str, packets: int) -> dict:
    build_dir, json_name, setup, make_frames = PROGRAMS[program]
    files = ControllerPipeline.from_build_dir(build_dir, json_name)
    pipe, ref = _pipeline(files), _pipeline(files)      # native (mirrored) and the Python reference
    setup(files, _Writes(pipe))
    setup(files, _Writes(ref))
    t0 = time.monotonic()
    nat = NativePipeline(pipe.program)
    build_s = time.monotonic() - t0
    frames = make_frames()
    outcomes = set()
    per = max(1, packets // len(frames))
    best = None
    for _ in range(REPEATS):
        total = 0.0
        for f in frames:
            us, outcome = nat.time_frames(f, 1, per, replica_port=EXPECTED_PORT)
            total += us * per
            outcomes.add(outcome)
        run = total / (per * len(frames))
        best = run if best is None else min(best, run)
    checked = nat.run(frames[0], 1, replica=(EXPECTED_PORT, 1))
    want = python_run(ref.program, frames[0], 1, replica=(EXPECTED_PORT, 1))
    if checked.outcome != "sent" or checked.frame != want.frame:
        raise RuntimeError(f"{program}: the native pipeline gives {checked.outcome}, not the Python path's frame")
    start = time.process_time()
    n = 0
    for i in range(PYTHON_FRAMES):
        python_run(ref.program, frames[i % len(frames)], 1, replica=(EXPECTED_PORT, 1))
        n += 1
    python_us = 1e6 * (time.process_time() - start) / n
    nat.close()
    return {"program": program, "frames": len(frames), "packets": per * len(frames), "outcomes": sorted(outcomes),
            "native_us_per_packet": round(best, 3), "python_us_per_packet": round(python_us, 2),
            "speedup": round(python_us / best, 1), "build_or_load_s": round(build_s, 1),
            "state_bytes": nat.lib.ss_state_size()}


def _pipeline(files) -> Pipeline:
    return Pipeline(files.p4info.message, files.device_config, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=200000, help="packets per timed run")
    ap.add_argument("--programs", nargs="*", default=["fabric", "aggregation"], choices=list(PROGRAMS))
    ap.add_argument("--json", default=str(REPO / "out/native_pipeline.json"))
    args = ap.parse_args(argv)
    if args.packets < 1:
        ap.error(f"--packets {args.packets}: give at least 1")
    rows = []
    for program in args.programs:
        report.progress(f"{program}: {args.packets} packets x {REPEATS} natively (built first unless cached), "
                        f"{PYTHON_FRAMES} on the Python path")
        rows.append(measure(program, args.packets))
    print(report.table(["program", "native us/packet", "Python path us/packet", "x", "packet state bytes"],
                       [(r["program"], r["native_us_per_packet"], r["python_us_per_packet"], r["speedup"],
                         r["state_bytes"]) for r in rows],
                       title=f"CPU per packet of the pipeline alone (no I/O, no queues), best of {REPEATS}"))
    report.write_json(args.json, {"results": rows})
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
