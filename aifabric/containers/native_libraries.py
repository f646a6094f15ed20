"""The native libraries the lab's containers run, built in an image's stage that has a C compiler:
softswitch's native data path for each program (the committed fabric program by default) and the
hosts' native engine (hostagent.collectives.native), into the build caches under ~/.cache/aifabric.
The fabric image copies those caches and not the compiler (docker/aifabric.Dockerfile): a cached
library needs none, so its switches and hosts run natively, as on a machine with gcc.

    python3 -m aifabric.containers.native_libraries [PROGRAM_JSON ...]

Prints what it built; exits 1 when one of them could not be built (the reason named).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.fabric_controller import DEFAULT_BUILD_DIR
from hostagent.collectives.native import binding
from softswitch.build_ahead import build_ahead

FABRIC_PROGRAM = DEFAULT_BUILD_DIR / "fabric.json"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="native_libraries", description=__doc__.split("\n\n")[0])
    p.add_argument("programs", nargs="*", type=Path, default=[FABRIC_PROGRAM],
                   help=f"BMv2 JSON programs the switches will run (default {FABRIC_PROGRAM})")
    args = p.parse_args(argv)
    failed = False
    for program in args.programs:
        said = build_ahead(program.read_bytes(), lambda msg: print(f"{program.name}: {msg}", flush=True))
        print(f"{program.name}: {said}")
        failed |= not said.startswith("native data path")
    try:
        _, built = binding.library()
        print(f"hosts' native engine: {built}")
    except binding.BuildError as e:
        print(f"hosts' native engine: not built: {e}", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
