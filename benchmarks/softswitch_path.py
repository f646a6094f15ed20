#!/usr/bin/env python3
"""Where softswitch's own time goes per packet: the packet path in-process, no sockets.

A softswitch device runs in this process with no ports; its pipeline and entries are set
over P4Runtime (gRPC), the same programs and frames as target_pps.py. Its packet loop is not
started: this script hands it the frames one at a time (the arrival, then the drain of the
egress queues the loop does after every packet) with the send replaced by a count per port,
so what is timed is softswitch's Python alone (target_pps.py measures it with the sockets
and the kernel). Then each stage of the packet path is timed on the state one of the
frames has there:

    state copy          a fresh packet state (the program's template list)
    parse               parser (+ payload slice)            verify checksums
    ingress             the ingress pipeline                egress    the egress pipeline
    update checksums    deparse (+ payload)

Stages are net of the state copy each timing needs; "loop and path" is the whole minus the
stages (timestamps, queueing, the loop's own steps). Best of several repeats, µs per packet.

    .venv/bin/python benchmarks/softswitch_path.py [--packets 20000] [--json out/softswitch_path.json]
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from target_pps import PROGRAMS  # noqa: E402

from aifabric import report  # noqa: E402
from controller.fabric_controller import Pipeline  # noqa: E402
from controller.switch import SwitchConnection  # noqa: E402
from softswitch.switch import Switch, SwitchConfig  # noqa: E402
from topologies.testbed import free_tcp_port  # noqa: E402

REPEATS = 5
EXPECTED_PORT = 2      # every program's frames leave by port 2 (target_pps.py's setups)


def best_us(stmt, packets: int) -> float:
    """Best per-call time of ``stmt`` over REPEATS runs of ``packets`` calls, in µs."""
    return 1e6 * min(timeit.repeat(stmt, number=packets, repeat=REPEATS)) / packets


def measure(program: str, packets: int) -> dict:
    build_dir, json_name, setup, make_frames = PROGRAMS[program]
    pipe = Pipeline.from_build_dir(build_dir, json_name)
    addr = f"127.0.0.1:{free_tcp_port()}"
    sw = Switch(SwitchConfig(device_id=1, grpc_addr=addr, cpu_port=255, priority_queues=8))
    sw.start()
    conn = SwitchConnection(program, addr, device_id=1)
    try:
        dp = sw.dataplane
        dp.stop()                          # this script is the loop now
        sent: Counter = Counter()
        dp.transmit = lambda port, frame: sent.update((port,))   # bound by the packet path when the program is set
        conn.connect()
        conn.set_pipeline(pipe.p4info, pipe.device_config)
        setup(pipe, conn)
        return _timings(program, dp, make_frames(), sent, packets)
    finally:
        conn.close()
        sw.stop()


def _timings(program: str, dp, frames: list[bytes], sent: Counter, packets: int) -> dict:
    path, prog = dp._path, dp.program
    arrival, drain = path.arrival, dp._drain_queues
    n_frames = len(frames)

    def whole() -> None:
        for i in range(packets):
            arrival(1, frames[i % n_frames])
            drain()

    whole()
    if sent[EXPECTED_PORT] != packets or dp.counters.errors:
        raise RuntimeError(f"{program}: {dict(sent)} of {packets} frames sent by port, "
                           f"{dp.counters.errors} errors: the setup does not forward them")
    total = 1e6 * min(timeit.repeat(whole, number=1, repeat=REPEATS)) / packets

    # one frame's state at each stage, as the path leaves it there
    s, h = prog.intrinsics, prog.layout.hidden
    frame = frames[0]
    arrived = prog.new_packet_state()
    arrived[s["ingress_port"]] = 1
    parsed = arrived[:]
    parsed[h["payload"]] = frame[prog.parse(parsed, frame):]
    after_ingress = parsed[:]
    prog.ingress(after_ingress)
    at_egress = after_ingress[:]
    at_egress[s["egress_port"]] = EXPECTED_PORT
    after_egress = at_egress[:]
    prog.egress(after_egress)
    copy_template = best_us(prog.new_packet_state, packets)
    copy_state = best_us(lambda: after_ingress[:], packets)    # a state with headers: the dearer copy
    stages = {
        "state copy": copy_template,
        "parse": best_us(lambda: prog.parse(arrived[:], frame), packets) - copy_template,
        "verify checksums": best_us(lambda: prog.verify_checksums(parsed), packets),
        "ingress": best_us(lambda: prog.ingress(parsed[:]), packets) - copy_state,
        "egress": best_us(lambda: prog.egress(at_egress[:]), packets) - copy_state,
        "update checksums": best_us(lambda: prog.update_checksums(after_egress[:]), packets) - copy_state,
        "deparse": best_us(lambda: prog.deparse(after_egress) + after_egress[h["payload"]], packets),
    }
    stages["loop and path"] = total - sum(stages.values())
    return {"program": program, "packets": packets, "state_slots": len(arrived),
            "us_per_packet": round(total, 2), "stages_us": {k: round(v, 2) for k, v in stages.items()}}


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
    stages = list(rows[0]["stages_us"])
    print(report.table(["stage (us / packet)", *(r["program"] for r in rows)],
                       [(st, *(r["stages_us"][st] for r in rows)) for st in stages]
                       + [("whole path", *(r["us_per_packet"] for r in rows)),
                          ("packet state slots", *(r["state_slots"] for r in rows))],
                       title="softswitch's Python per packet, in-process (no sockets, no kernel), best of "
                             f"{REPEATS}"))
    report.write_json(args.json, {"results": rows})
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
