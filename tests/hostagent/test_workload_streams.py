"""A rank of a workload (hostagent.workload_runner) whose stream failed stops waiting for its
other streams once a silent peer would have been named, instead of until their ops' own
deadlines (an op on a peer never heard from waits the whole call timeout)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from hostagent.workload_runner.__main__ import Rank

SILENT_AFTER_S = 0.5


def _streams(*waits: float) -> list[threading.Thread]:
    threads = [threading.Thread(target=time.sleep, args=(w,), daemon=True) for w in waits]
    for t in threads:
        t.start()
    return threads


def test_after_a_failed_stream_the_others_are_waited_for_at_most_silent_after():
    started = time.monotonic()
    Rank._join(SimpleNamespace(silent_after=SILENT_AFTER_S), _streams(60.0, 0.1), ["op 3: PeerSilent: rank 5"])
    assert time.monotonic() - started < 10 * SILENT_AFTER_S


def test_without_a_failure_every_stream_is_waited_for():
    threads = _streams(1.0, 0.1)
    Rank._join(SimpleNamespace(silent_after=SILENT_AFTER_S), threads, [])
    assert not any(t.is_alive() for t in threads)


def test_a_close_that_does_not_return_is_named_and_not_waited_for():
    """A transport whose close never returns (a native engine whose thread had stopped) is named
    in the rank's error; the rank still reports."""
    class Stuck:
        def close(self) -> None:
            threading.Event().wait()

    rank = SimpleNamespace(groups={(0, 1): Stuck()}, host_paths=lambda: ["native"])
    rank.close = lambda: Rank.close(rank)
    started = time.monotonic()
    said = Rank.close_within(rank, SILENT_AFTER_S)
    assert time.monotonic() - started < 10 * SILENT_AFTER_S
    assert said is not None and f"did not close within {SILENT_AFTER_S:g} s (host path native)" in said, said
    closed = SimpleNamespace(groups={(0, 1): SimpleNamespace(close=lambda: None)}, host_paths=lambda: ["native"])
    closed.close = lambda: Rank.close(closed)
    assert Rank.close_within(closed, SILENT_AFTER_S) is None
