"""`python -m hostagent.workload_runner.standby`: a rank of a workload started ahead of need, as
an elastic launcher keeps a warm standby for a restart. It imports the rank runner (numpy, the
collectives: about 0.6 s of CPU; eight ranks starting at once on two cores took 3 s to reach
their first iteration) at a low priority so the running job keeps the CPU, then waits for one
line on stdin: the runner's arguments as a JSON list. Given them, it takes its priority back and
runs as ``python -m hostagent.workload_runner`` would; at end of input (not needed) it exits 0.
"""
from __future__ import annotations

import json
import os
import sys

STANDBY_NICE = 10


def main() -> int:
    os.nice(STANDBY_NICE)
    from hostagent.workload_runner.__main__ import main as run_rank      # the imports a launch waits on
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        os.nice(-STANDBY_NICE)
    except PermissionError:          # only root raises a priority again: the rank then runs niced
        print("standby: running at nice +10 (not root)", file=sys.stderr)
    return run_rank(json.loads(line))


if __name__ == "__main__":
    raise SystemExit(main())
