"""Where a host program was when its launcher gave up on it: on SIGTERM the program writes every
thread's Python stack to stderr (faulthandler) and then ends as SIGTERM would end it. A launcher
that reaches its deadline sends SIGTERM first and reads the stacks before it kills
(aifabric.experiments.rank_processes), so a hung rank is named with the call it hung in."""
from __future__ import annotations

import faulthandler
import signal


def dump_stacks_on_term() -> None:
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
