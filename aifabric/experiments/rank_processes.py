"""Processes a lab starts on hosts (workers, ranks, the fallback aggregator) and what they say.

`communicate` waits for one (killing it at its deadline), `last_json` finds the JSON report a
host program prints last, `collect_ranks` gathers every rank's report or names, by rank and
host, why there is none; with ``stop_on_failure`` it stops every rank as soon as one ends in
failure, as an elastic launcher does before it restarts the job, instead of leaving the others to
find the silence themselves. (What the CPU did meanwhile: `aifabric.lab.cpu_meter`.)
"""
from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


TERM_GRACE_S = 5.0      # after SIGTERM at a deadline: time to write its stacks and end (then SIGKILL)
STACKS_HEADER = "most recent call first"     # faulthandler's, in a thread's stack (hostagent.stack_dump)
BEGUN_POLL_S = 0.05                          # how often a kill after the first iteration looks for it
INNERMOST_FRAMES = 5                         # of the main thread, in a hung program's last words
STOPPED = "stopped by the launcher"          # a rank's error where another one's failure ended it


def communicate(proc, timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of ``proc`` once it ends, keeping what it said; at ``timeout`` s it is sent
    SIGTERM (a host program then writes its threads' stacks: hostagent.stack_dump), and killed
    TERM_GRACE_S later if it still runs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
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
    """A process's last stderr line, or its exit status when it said nothing; for one that was
    still running at its deadline and wrote its stacks, where its main thread was."""
    if STACKS_HEADER in err:
        return f"still running at its deadline (exit status {proc.returncode}); its main thread in {_innermost(err)}"
    said = err.strip().splitlines()
    if said:
        return said[-1]
    return "killed (SIGKILL)" if proc.returncode == -signal.SIGKILL else f"no output (exit status {proc.returncode})"


def _innermost(stacks: str) -> str:
    """The innermost frames of the thread that took the signal (the main thread), innermost first."""
    lines = stacks.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Current thread") and STACKS_HEADER in ln),
                 next(i for i, ln in enumerate(lines) if STACKS_HEADER in ln))
    frames = [ln.strip() for ln in lines[start + 1:] if ln.startswith("  File ")]
    return " < ".join(frames[:INNERMOST_FRAMES])


def collect_ranks(hosts: list[str], procs: list, deadline_s: float,
                  kill_rank_after: tuple[int, float] | None = None,
                  stop_on_failure: bool = False, begun: Path | None = None) -> tuple[list[dict], list[str]]:
    """Every rank process's JSON report (those that finished), and an error per rank that did not,
    by rank and host: what it reported, its last words on stderr, that it was killed
    (``kill_rank_after``: that rank's process is killed that many seconds from now, or from the
    job's first iteration where ``begun``, the file rank 0 notes each iteration's start in, is
    given: so its peers have heard it before it dies, however slowly the ranks started), or that
    it was stopped because another one failed first (``stop_on_failure``)."""
    killed = None
    if kill_rank_after is not None:
        killed, after = kill_rank_after
        if begun is not None:
            _wait_begun(begun, procs, deadline_s)
        time.sleep(after)
        procs[killed].send_signal(signal.SIGKILL)
    said, stopped_by = _wait_all(procs, deadline_s, stop_on_failure)
    reports, errors = [], []
    for r, (proc, (out, err)) in enumerate(zip(procs, said)):
        report = last_json(out)
        if report is None:
            why = ("killed" if r == killed else
                   f"{STOPPED} when rank {stopped_by} ({hosts[stopped_by]}) failed"
                   if stopped_by is not None and r != stopped_by else last_words(err, proc))
            errors.append(f"rank {r} ({hosts[r]}): {why}")
        elif not report["ok"]:
            errors.append(f"rank {r} ({hosts[r]}): {report['error']}")
        else:
            reports.append(report)
    return reports, errors


def why_ended(errors: list[str]) -> str:
    """What ended an attempt, from `collect_ranks`' errors: the ranks' own failures, the ranks
    the launcher stopped because of them counted."""
    stopped = sum(STOPPED in e for e in errors)
    own = "; ".join(e for e in errors if STOPPED not in e) or "no rank said"
    return own + (f" ({stopped} other ranks {STOPPED})" if stopped else "")


def _wait_begun(begun: Path, procs: list, deadline_s: float) -> None:
    """Until ``begun`` names an iteration, a rank ends, or ``deadline_s`` passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and all(p.poll() is None for p in procs):
        try:
            if begun.read_text().split():
                return
        except FileNotFoundError:
            pass
        time.sleep(BEGUN_POLL_S)


def _wait_all(procs: list, deadline_s: float, stop_on_failure: bool) -> tuple[list[tuple[str, str]], int | None]:
    """Every process's (stdout, stderr); with ``stop_on_failure``, the first to end with a non-zero
    status has the others terminated at once. Returns which one that was (None: none)."""
    if not stop_on_failure:
        return [communicate(p, deadline_s) for p in procs], None
    first: list[int] = []
    lock, failed = threading.Lock(), threading.Event()

    def wait(r: int) -> tuple[str, str]:
        said = communicate(procs[r], deadline_s)
        if procs[r].returncode != 0:
            with lock:
                if not first:
                    first.append(r)
                    failed.set()
        return said

    with ThreadPoolExecutor(len(procs)) as pool:
        futures = [pool.submit(wait, r) for r in range(len(procs))]
        while not all(f.done() for f in futures):
            if failed.wait(0.05):
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                break
        said = [f.result() for f in futures]
    return said, (first[0] if first else None)
