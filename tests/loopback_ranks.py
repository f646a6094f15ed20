"""Ranks as threads on loopback, for the host-side collective tests: a fresh 127.x.y. prefix per
group (Linux answers on all of 127/8, so every rank binds its own address and concurrent runs
never share one) and a runner of one function per rank."""
from __future__ import annotations

import random
import threading
from typing import Callable

JOIN_SECONDS = 60


def fresh_net() -> str:
    rng = random.SystemRandom()
    return f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}."


def run_parallel(fns: list[Callable[[], object]]) -> list[object]:
    """Run every function in its own thread; results (or the exceptions raised) in order."""
    results: list[object] = [None] * len(fns)

    def call(i: int) -> None:
        try:
            results[i] = fns[i]()
        except BaseException as exc:  # handed back to the test
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
        assert not t.is_alive(), "a rank's thread did not finish"
    return results
