"""A stop flag set by signals, for a process's main loop::

    stop = SignalStop((signal.SIGTERM, signal.SIGINT))
    while not stop.wait(interval):
        ...

It answers ``is_set()`` and ``wait(timeout)`` like `threading.Event`, which it replaces where a
signal handler sets the flag: ``Event.set()`` in a handler can deadlock, because the handler runs
in the main thread, which may be inside ``Event.wait()`` holding the very lock ``set()`` takes (a
host agent SIGTERMed that way never exited). Here the handler only stores a bool and writes a
byte to a pipe; ``wait`` sleeps in ``select`` on that pipe, from any thread.
"""
from __future__ import annotations

import os
import select
import signal
from typing import Iterable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class SignalStop:
    def __init__(self, signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
        self._set = False
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        for sig in signals:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.set()

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._write, b"\0")
        except OSError:                  # full of earlier wake-ups (one is enough), or closed
            pass

    def is_set(self) -> bool:
        return self._set

    def close(self) -> None:
        """The pipe's ends (the handlers stay: a signal after close still sets the flag)."""
        for fd in (self._read, self._write):
            os.close(fd)
        self._read = self._write = -1

    def wait(self, timeout: float | None = None) -> bool:
        """Until set or ``timeout`` seconds (None: no limit); whether it is set."""
        if not self._set:
            select.select([self._read], [], [], timeout)
        return self._set
