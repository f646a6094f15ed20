"""The lab's rank processes gathered: reports, the reasons of those without one, and the
launcher that stops every rank once one has failed (real processes, no fabric)."""
from __future__ import annotations

import subprocess
import sys
import time

from aifabric.experiments.rank_processes import collect_ranks

HOSTS = ["h0", "h1", "h2"]


def _ranks(*programs: str) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for p in programs]


def test_every_rank_reports_or_is_named_with_its_last_words():
    procs = _ranks('print(\'{"ok": true, "rank": 0}\')',
                   'import sys; print("lost the peer", file=sys.stderr); sys.exit(1)',
                   'print(\'{"ok": false, "error": "PeerSilent: rank 1"}\'); raise SystemExit(1)')
    reports, errors = collect_ranks(HOSTS, procs, deadline_s=30.0)
    assert reports == [{"ok": True, "rank": 0}]
    assert errors == ["rank 1 (h1): lost the peer", "rank 2 (h2): PeerSilent: rank 1"]


def test_the_launcher_stops_every_rank_once_one_has_failed():
    """Two ranks that would wait 60 s and one that dies at once: with stop_on_failure the two are
    stopped within a few seconds and named as stopped because of it; without, they run on."""
    started = time.monotonic()
    procs = _ranks("import time; time.sleep(60)", "import os; os._exit(137)", "import time; time.sleep(60)")
    reports, errors = collect_ranks(HOSTS, procs, deadline_s=120.0, stop_on_failure=True)
    assert time.monotonic() - started < 30.0
    assert reports == []
    assert errors == ["rank 0 (h0): stopped by the launcher when rank 1 (h1) failed",
                      "rank 1 (h1): no output (exit status 137)",
                      "rank 2 (h2): stopped by the launcher when rank 1 (h1) failed"]
    assert all(p.returncode is not None for p in procs)
    alone = _ranks("import time; time.sleep(60)", "import os; os._exit(137)")
    reports, errors = collect_ranks(HOSTS[:2], alone, deadline_s=3.0)      # no launcher: the deadline ends it
    assert errors[1] == "rank 1 (h1): no output (exit status 137)" and "stopped" not in errors[0]


def test_a_rank_still_running_at_the_deadline_is_named_with_where_it_hung():
    """A host program (hostagent.stack_dump) still running at the deadline gets SIGTERM, writes
    its threads' stacks and ends; its error names the call its main thread was in."""
    hung = ("from hostagent.stack_dump import dump_stacks_on_term\n"
            "import threading, time\n"
            "dump_stacks_on_term()\n"
            "def waiting_for_a_peer():\n"
            "    threading.Event().wait(60)\n"
            "print('started', flush=True)\n"
            "waiting_for_a_peer()\n")
    started = time.monotonic()
    procs = _ranks(hung)
    assert procs[0].stdout.readline() == b"started\n"      # its handler is in place
    reports, errors = collect_ranks(HOSTS[:1], procs, deadline_s=1.0)
    assert time.monotonic() - started < 30.0
    assert reports == [] and len(errors) == 1, errors
    assert errors[0].startswith("rank 0 (h0): still running at its deadline (exit status -15); its main thread in "), errors
    assert "in wait" in errors[0] and "in waiting_for_a_peer" in errors[0], errors



def test_a_rank_is_killed_its_seconds_after_the_first_iteration_began_not_after_the_launch(tmp_path):
    """Ranks that start slowly (here rank 0 notes iteration 0 after 1.5 s) must have been heard
    by their peers before one of them is killed, else none can tell it silent. Rank 1 notes the
    time every 10 ms until it dies."""
    begun, alive = tmp_path / "progress", tmp_path / "alive"
    procs = _ranks(f"import time; time.sleep(1.5); open({str(begun)!r}, 'w').write(f'0 {{time.time()}}'); "
                   "time.sleep(3); print('{\"ok\": true}')",
                   f"import time\nwhile True:\n    open({str(alive)!r}, 'a').write(f'{{time.time()}}\\n'); time.sleep(0.01)")
    reports, errors = collect_ranks(HOSTS[:2], procs, deadline_s=30.0, kill_rank_after=(1, 0.5), begun=begun)
    assert reports == [{"ok": True}] and errors == ["rank 1 (h1): killed"]
    began_at, died_at = float(begun.read_text().split()[1]), float(alive.read_text().split()[-1])
    assert died_at - began_at >= 0.5 - 0.05, (began_at, died_at)     # 0.05: the poll's and the note's steps


def test_what_ended_an_attempt_is_the_ranks_own_failures_the_stopped_ones_counted():
    from aifabric.experiments.rank_processes import why_ended
    errors = ["rank 0 (h0): stopped by the launcher when rank 1 (h1) failed", "rank 1 (h1): killed (SIGKILL)",
              "rank 2 (h2): stopped by the launcher when rank 1 (h1) failed"]
    assert why_ended(errors) == "rank 1 (h1): killed (SIGKILL) (2 other ranks stopped by the launcher)"
    assert why_ended(["rank 0 (h0): PeerSilent: rank 1"]) == "rank 0 (h0): PeerSilent: rank 1"
