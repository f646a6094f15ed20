"""Rank processes kept warm for a restart (aifabric.experiments.warm_ranks), as real processes on
this machine's own namespace: a standby takes its command line and runs the rank runner with it;
a rank without a standby on its host starts cold; standbys not taken end at close."""
from __future__ import annotations

import subprocess
import threading
import time

from aifabric.experiments.warm_ranks import WarmRanks


class LocalHost:
    def popen(self, argv, **kwargs):
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


class LocalLab:
    def host(self, name):
        return LocalHost()


def test_a_standby_runs_the_rank_it_is_given_and_the_rest_end_at_close(tmp_path) -> None:
    warm = WarmRanks(LocalLab())
    warm.prepare(["a", "b"])
    standbys = dict(warm._waiting)
    missing = tmp_path / "no-plan.json"            # the runner fails at once, naming it
    taken = warm.launch(0, "a", ["--rank", "0", "--plan", str(missing)])
    cold = warm.launch(1, "c", ["--rank", "1", "--plan", str(missing)])      # no standby on c
    assert taken is standbys[(0, "a")] and cold is not standbys[(1, "b")] and warm.warm_launches == 1
    for proc in (taken, cold):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1 and str(missing) in err.decode(), err.decode()[-500:]
    left = standbys[(1, "b")]
    warm.close()
    assert left.returncode == 0                    # its input closed: it ended by itself


def test_standbys_wait_for_their_attempt_to_begin_and_a_later_attempt_replaces_them() -> None:
    warm = WarmRanks(LocalLab())
    begun = threading.Event()
    warm.prepare_after(["a"], begun.is_set)              # an attempt that never begins
    warm.prepare_after(["b", "c"], begun.is_set)         # the next one, which does
    time.sleep(0.3)
    assert warm._waiting == {}                           # nothing before its first iteration
    begun.set()
    deadline = time.monotonic() + 30
    while len(warm._waiting) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(warm._waiting) == {(0, "b"), (1, "c")}     # the replaced attempt's never came
    warm.close()
    later = WarmRanks(LocalLab())
    later.prepare_after(["a"], lambda: False)
    later.close()                                         # ends its wait at once
    assert later._waiting == {} and not any(t.is_alive() for t in later._preparing)
