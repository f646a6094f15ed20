#!/usr/bin/env python3
"""Where softswitch's own time goes per packet: the packet path in-process, no sockets.

A softswitch device runs in this process with no ports; its pipeline and entries are set
over P4Runtime (gRPC), the same programs and frames as target_pps.py. Its packet loop is not
started: this script hands it the frames in batches as the loop does after a read (each
arrival, then the drain of the egress queues if any packet waits) with the send replaced by a
count per port, so what is timed is softswitch's own work alone (target_pps.py measures it with the sockets
and the kernel), on the generated Python and, where Cython and a C compiler are, on the
compiled path (softswitch/pipeline/compiled.py, with the packet path's own code compiled
too). Then each stage of the packet path is timed
on the state a frame had when the path reached that stage (recorded while one frame went
through it):

    state copy          a fresh packet state (the program's template list)
    parse               parser (+ payload slice)            verify checksums
    ingress             the ingress pipeline                egress    the egress pipeline
    update checksums    deparse (+ payload)

Stages are net of the state copy each timing needs; "loop and path" is the whole minus the
stages: timestamps, queueing, the loop's own steps, and what a stage timed on one frame's
state over and over does not pay (the whole path cycles through 64 flows: about 1 µs of the
fabric program's residual). Best of several repeats, µs per packet.

    .venv/bin/python -m benchmarks.softswitch_path [--packets 20000] [--json out/softswitch_path.json]
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from benchmarks.target_pps import PROGRAMS  # noqa: E402

from aifabric.lab import report  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from softswitch.packet_path import build_packet_path  # noqa: E402
from softswitch.port_io import BATCH  # noqa: E402
from softswitch.pipeline.compiled import PathCompiler  # noqa: E402
from softswitch.switch import Switch, SwitchConfig  # noqa: E402
from emulation.testbed import free_tcp_port  # noqa: E402

REPEATS = 5
EXPECTED_PORT = 2      # every program's frames leave by port 2 (target_pps.py's setups)
COMPILER_MISSING = PathCompiler().missing()    # None: the compiled path is measured too
STAGES = ("parse", "verify_checksums", "ingress", "egress", "update_checksums", "deparse")


def best_us(stmt, packets: int) -> float:
    """Best per-call time of ``stmt`` over REPEATS runs of ``packets`` calls, in µs."""
    return 1e6 * min(timeit.repeat(stmt, number=packets, repeat=REPEATS)) / packets


def measure(program: str, packets: int, compiled: bool = False) -> dict:
    """One program on a fresh switch (fresh registers), on the Python or the compiled path."""
    build_dir, json_name, setup, make_frames = PROGRAMS[program]
    pipe = Pipeline.from_build_dir(build_dir, json_name)
    addr = f"127.0.0.1:{free_tcp_port()}"
    sw = Switch(SwitchConfig(device_id=1, grpc_addr=addr, cpu_port=255, priority_queues=8, compiled="off"))
    sw.start()
    conn = SwitchConnection(program, addr, device_id=1)
    try:
        dp = sw.dataplane
        dp.stop()                          # this script is the loop now
        sent = [0] * 512

        def count(port: int, frame: bytes) -> None:
            sent[port] += 1

        dp.transmit = count            # bound by the packet path when the program is set
        conn.connect()
        conn.set_pipeline(pipe.p4info, pipe.device_config)
        setup(pipe, conn)
        if compiled:
            dp.adopt_compiled(dp.program, PathCompiler().build(dp.program))
        return dict(_timings(program, dp, make_frames(), sent, packets), path="compiled" if compiled else "python")
    finally:
        conn.close()
        sw.stop()


def _timings(program: str, dp, frames: list[bytes], sent: list[int], packets: int) -> dict:
    path, prog = dp._path, dp.program
    arrivals = path.arrivals
    batches = [[frames[i % len(frames)] for i in range(start, min(start + BATCH, packets))]
               for start in range(0, packets, BATCH)]

    def whole() -> None:
        for batch in batches:
            arrivals(1, batch)

    whole()
    if sent[EXPECTED_PORT] != packets or dp.counters.errors:
        by_port = {port: n for port, n in enumerate(sent) if n}
        raise RuntimeError(f"{program}: {by_port} of {packets} frames sent by port, "
                           f"{dp.counters.errors} errors: the setup does not forward them")
    total = 1e6 * min(timeit.repeat(whole, number=1, repeat=REPEATS)) / packets

    at = _states_at_stages(dp, frames[0])
    frame, payload = frames[0], prog.layout.hidden["payload"]

    def net(stage: str, run) -> float:
        """µs of ``run`` on a copy of the stage's state, less the copy."""
        state = at[stage]
        return best_us(lambda: run(state[:]), packets) - best_us(lambda: state[:], packets)

    stages = {
        "state copy": best_us(prog.new_packet_state, packets),
        "parse": net("parse", lambda F: prog.parse(F, frame)),
        "verify checksums": net("verify_checksums", prog.verify_checksums),
        "ingress": net("ingress", prog.ingress),
        "egress": net("egress", prog.egress),
        "update checksums": net("update_checksums", prog.update_checksums),
        "deparse": net("deparse", lambda F: prog.deparse(F) + F[payload]),
    }
    stages["loop and path"] = total - sum(stages.values())
    return {"program": program, "packets": packets, "state_slots": prog.layout.size,
            "us_per_packet": round(total, 2), "stages_us": {k: round(v, 2) for k, v in stages.items()}}


def _states_at_stages(dp, frame: bytes) -> dict[str, list]:
    """The packet state with which ``frame`` entered each stage of the path (its program's
    stage functions wrapped for one frame, the path built again around them, then restored)."""
    prog, at = dp.program, {}
    originals = {name: getattr(prog, name) for name in STAGES}

    def recording(name: str, fn):
        def stage(F: list, *args):
            at.setdefault(name, F[:])
            return fn(F, *args)
        return stage

    for name, fn in originals.items():
        setattr(prog, name, recording(name, fn))
    path = dp._path
    try:
        dp._path = build_packet_path(dp, prog)
        dp._path.arrival(1, frame)
        dp._drain_queues()
    finally:
        for name, fn in originals.items():
            setattr(prog, name, fn)
        dp._path = path
    missing = [name for name in STAGES if name not in at]
    if missing:
        raise RuntimeError(f"{prog}: the frame did not reach {', '.join(missing)}")
    return at


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=20000, help="packets per timed run")
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS), choices=list(PROGRAMS))
    ap.add_argument("--json", default=str(REPO / "out/softswitch_path.json"))
    args = ap.parse_args(argv)
    if args.packets < 1:
        ap.error(f"--packets {args.packets}: give at least 1")
    rows = []
    for program in args.programs:
        report.progress(f"{program}: {args.packets} packets x {REPEATS}, then each stage")
        rows.append(measure(program, args.packets))
        if COMPILER_MISSING is None:
            report.progress(f"{program}: the same on the compiled path (built first unless cached)")
            rows.append(measure(program, args.packets, compiled=True))
    if COMPILER_MISSING:
        print(f"no compiled path here: {COMPILER_MISSING}")
    stages = list(rows[0]["stages_us"])
    print(report.table(["stage (us / packet)", *(r["program"] + ("" if r["path"] == "python" else " (compiled)")
                                                 for r in rows)],
                       [(st, *(r["stages_us"][st] for r in rows)) for st in stages]
                       + [("whole path", *(r["us_per_packet"] for r in rows)),
                          ("packet state slots", *(r["state_slots"] for r in rows))],
                       title="softswitch's own work per packet, in-process (no sockets, no kernel), best of "
                             f"{REPEATS}"))
    report.write_json(args.json, {"results": rows})
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
