"""Processes a lab starts on hosts (workers, ranks, the fallback aggregator) and what they say.

`communicate` waits for one (killing it at its deadline), `last_json` finds the JSON report a
host program prints last, `collect_ranks` gathers every rank's report or names, by rank and
host, why there is none. (What the CPU did meanwhile: `aifabric.lab.cpu_meter`.)
"""
from __future__ import annotations

import json
import signal
import time


def communicate(proc, timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of ``proc`` once it ends; killed after ``timeout`` s, keeping what it said."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except Exception:     # noqa: BLE001 - TimeoutExpired: kill it and keep what it said
        proc.kill()
        out, err = proc.communicate()
    decode = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")   # noqa: E731
    return decode(out), decode(err)


def last_json(text: str) -> dict | None:
    """The last line of ``text`` that is JSON, or None."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def last_words(err: str, proc) -> str:
    """A process's last stderr line, or its exit status when it said nothing."""
    said = err.strip().splitlines()
    return said[-1] if said else f"no output (exit status {proc.returncode})"


def collect_ranks(hosts: list[str], procs: list, deadline_s: float,
                  kill_rank_after: tuple[int, float] | None = None) -> tuple[list[dict], list[str]]:
    """Every rank process's JSON report (those that finished), and an error per rank that did not,
    by rank and host: what it reported, its last words on stderr, or that it was killed
    (``kill_rank_after``: that rank's process is killed that many seconds from now)."""
    killed = None
    if kill_rank_after is not None:
        killed, after = kill_rank_after
        time.sleep(after)
        procs[killed].send_signal(signal.SIGKILL)
    reports, errors = [], []
    for r, proc in enumerate(procs):
        out, err = communicate(proc, deadline_s)
        report = last_json(out)
        if report is None:
            errors.append(f"rank {r} ({hosts[r]}): {'killed' if r == killed else last_words(err, proc)}")
        elif not report["ok"]:
            errors.append(f"rank {r} ({hosts[r]}): {report['error']}")
        else:
            reports.append(report)
    return reports, errors
