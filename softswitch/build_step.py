"""One build step that dies with the switch that runs it.

`build_cache.Runner` starts ``python -m softswitch.build_step CMD...`` at the head of a process
group of its own. It asks the kernel for SIGTERM when the switch (its parent) is gone, however it
went (a failure injection SIGKILLs switches), runs CMD in its group and, on that SIGTERM, kills
the whole group: the compiler's own children (cc1, as) included, which would otherwise go on for
minutes, orphaned, while the next build of the same program starts over beside them.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1          # <linux/prctl.h>


def _kill_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    parent = os.getppid()
    signal.signal(signal.SIGTERM, _kill_group)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        print(f"build step: prctl(PR_SET_PDEATHSIG): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 126
    if os.getppid() != parent:          # the switch went before the kernel was asked
        _kill_group()
    try:
        return subprocess.call(argv)
    except OSError as e:
        print(f"cannot run {argv[0]}: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
