"""Rank processes kept warm for a restart (hostagent.workload_runner.standby): while an attempt
runs, one standby a rank waits on that rank's host, the runner imported; a restart hands each
its command line instead of starting eight Python processes from nothing, which on two cores
took about 3 s before the job's first iteration. A rank whose host changed (a lost host's, moved
to a spare) or whose standby is gone starts cold.

    warm = WarmRanks(lab)
    procs = [warm.launch(r, h, args) for r, h in enumerate(hosts)]     # cold the first time
    warm.prepare_after(hosts, began)       # for the next attempt, once this one's first iteration began
    ...
    warm.close()

Standbys start only once the attempt they wait beside has begun its first iteration: started
with the launch, their imports (niced) took the CPU from it, and a rank moved to a spare host,
which starts cold, took 2.8 s instead of 0.6 s to reach the first iteration.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Callable

RUNNER = "hostagent.workload_runner"
STANDBY = "hostagent.workload_runner.standby"
BEGUN_POLL_S = 0.05          # how often a deferred prepare looks whether the attempt has begun


class WarmRanks:
    def __init__(self, lab) -> None:
        self.lab = lab
        self._waiting: dict[tuple[int, str], subprocess.Popen] = {}
        self.warm_launches = 0          # launches a standby took
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._preparing: list[threading.Thread] = []
        self._generation = 0            # the latest prepare_after's

    def prepare_after(self, hosts: list[str], began: Callable[[], bool]) -> None:
        """`prepare` in a thread once ``began()`` is true; never after `close`, nor once a later
        `prepare_after` (the next attempt's) replaced it."""
        with self._lock:
            self._generation += 1
            mine = self._generation

        def wait_then_prepare() -> None:
            while not began():
                if self._closed.wait(BEGUN_POLL_S) or self._generation != mine:
                    return
            if self._generation == mine:
                self.prepare(hosts)

        self._preparing.append(threading.Thread(target=wait_then_prepare, name="warm-ranks", daemon=True))
        self._preparing[-1].start()

    def prepare(self, hosts: list[str]) -> None:
        """A standby for every rank on its host (``hosts``, by rank), where none waits yet."""
        with self._lock:
            for r, host in enumerate(hosts):
                proc = self._waiting.get((r, host))
                if not self._closed.is_set() and (proc is None or proc.poll() is not None):
                    self._waiting[(r, host)] = self.lab.host(host).popen([sys.executable, "-m", STANDBY],
                                                                         stdin=subprocess.PIPE)

    def launch(self, rank: int, host: str, args: list[str]) -> subprocess.Popen:
        """Rank ``rank`` on ``host`` with the runner's ``args``: its standby where one waits
        there, else a new process."""
        with self._lock:
            proc = self._waiting.pop((rank, host), None)
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.write((json.dumps(args) + "\n").encode())
                proc.stdin.flush()          # left open: communicate() closes it
                self.warm_launches += 1
                return proc
            except BrokenPipeError:         # it ended meanwhile
                pass
        return self.lab.host(host).popen([sys.executable, "-m", RUNNER, *args])

    def close(self) -> None:
        """Every standby not taken ended (its input closed: it exits; killed if it does not)."""
        self._closed.set()
        for thread in self._preparing:
            thread.join()
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for proc in waiting:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in waiting:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
