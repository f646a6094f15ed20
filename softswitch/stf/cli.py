"""``softswitch stf PROGRAM.json TEST.stf [--target softswitch|softswitch-native|bmv2] [--json OUT]``: run one
STF test; exit status 0 passed, 1 failed, 2 the test could not run (bad file, missing target,
a feature the target lacks)."""
from __future__ import annotations

import argparse
import json
import sys

from ..pipeline.errors import ProgramError
from .errors import StfError, Unsupported
from .runner import run_stf

TARGETS = ("softswitch", "softswitch-native", "bmv2")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="softswitch stf", description="Run a p4c STF packet test on a target.")
    p.add_argument("program", help="BMv2 JSON of the P4 program (p4c-bm2-ss output)")
    p.add_argument("test", help="the STF file")
    p.add_argument("--target", choices=TARGETS, default="softswitch",
                   help="softswitch (in this process, default), softswitch-native (its native data path, "
                        "in this process) or bmv2 (simple_switch)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON to FILE")
    p.add_argument("--show-frames", action="store_true", help="print every frame that came out, per port")
    args = p.parse_args(argv)
    try:
        result = run_stf(args.program, args.test, args.target)
    except (StfError, Unsupported, ProgramError) as e:
        print(f"softswitch stf: {args.target}: cannot run: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"softswitch stf: cannot read {e.filename}: no such file", file=sys.stderr)
        return 2
    print(result.summary())
    if args.show_frames:
        for port, frames in sorted(result.outputs.items()):
            for i, frame in enumerate(frames):
                print(f"  out port {port} #{i}: {frame.hex().upper()}")
    for note in result.not_run:
        print(f"  not run: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=1)
    return 0 if result.passed else 1
