"""How SIGINT, SIGTERM and SIGHUP stop a lab: the first one interrupts, the rest wait.

`SignalGate` is the policy of a process that runs a lab (the ``aifabric`` command installs it
for its whole run): the first signal raises in the main thread (KeyboardInterrupt for SIGINT,
`Terminated` for SIGTERM/SIGHUP), which unwinds into the lab's teardown; every later signal is
only recorded and the user told, once, to wait. So a second Ctrl-C can never cut a teardown
short, however early or late it comes.

`shielded()` is what a teardown runs under: signals arriving meanwhile are recorded, not
raised, whether or not a gate is installed; the caller decides afterwards what to do with them.

Notices are written with ``os.write`` on file descriptor 2: a signal handler may run while the
main thread is inside a ``print`` to stderr, and Python's buffered streams refuse re-entry.

Python runs signal handlers in the main thread, but the kernel hands a process's signal to any
of its threads that does not block it, and a lab has many (gRPC's, the controller's pool). A
signal taken by another thread does not interrupt the main thread's blocking call (reading
Mininet's prompt, waiting on a future), so its handler would wait for that call to end, maybe
forever. `main_thread_woken()` closes that gap: the C-level handler writes every signal's
number to a wakeup pipe, whichever thread it runs in, and a small thread reading that pipe
sends `WAKE` to the main thread; the interrupted call then runs the pending handlers.
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WAKE = signal.SIGUSR2        # only ever sent to the main thread, by `main_thread_woken`
WAKE_AFTER_S = (0.0, 0.05, 0.2, 0.5, 1.0, 2.0)
WAIT_NOTICE = "aifabric: tearing down, please wait"


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived. Not a KeyboardInterrupt: Mininet's CLI swallows those (there,
    Ctrl-C stops the command being run), and a termination must not be swallowed."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exception_for(signum: int) -> BaseException:
    """The exception a signal turns into: KeyboardInterrupt for SIGINT, else `Terminated`."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def exit_status(exc: BaseException) -> int:
    """The shell's convention, 128 + signal number (130 for Ctrl-C)."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)


def stderr_notice(message: str) -> None:
    try:
        os.write(2, (message + "\n").encode())
    except OSError:
        pass


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class SignalGate:
    """The first SIGINT/SIGTERM/SIGHUP raises; later ones, and any arriving while the gate is
    held (`holding`), are recorded in ``received`` and announced once with ``notice``."""

    def __init__(self, notice: Callable[[str], None] = stderr_notice):
        self.notice = notice
        self.received: list[int] = []
        self.stopping = False       # a signal has raised: the process is on its way out
        self._holds = 0
        self._noticed = False
        self._previous: dict[int, object] = {}

    def handle(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        if self.stopping or self._holds:
            if not self._noticed:
                self._noticed = True
                self.notice(f"{WAIT_NOTICE} ({signal.Signals(signum).name})")
            return
        self.stopping = True
        raise exception_for(signum)

    @contextmanager
    def installed(self, temporary: bool = False) -> Iterator["SignalGate"]:
        """Route the signals to this gate for the block, with the main thread woken for them
        (`main_thread_woken`). Once a signal has come, the gate stays installed after the
        block: the process is on its way out and the rest of that way must not be cut short.
        A ``temporary`` gate (one teardown's) only records, is always removed afterwards and
        needs no waking."""
        if not _in_main_thread():
            yield self
            return
        self._previous = {s: signal.signal(s, self.handle) for s in SIGNALS}
        try:
            if temporary:
                yield self
            else:
                with main_thread_woken():
                    yield self
        finally:
            if temporary or not self.stopping:
                for s, handler in self._previous.items():
                    signal.signal(s, handler)  # type: ignore[arg-type]

    @contextmanager
    def holding(self) -> Iterator[list[int]]:
        """Signals arriving in the block are recorded (the yielded list fills), never raised."""
        start = len(self.received)
        self._holds += 1
        held: list[int] = []
        try:
            yield held
        finally:
            self._holds -= 1
            held.extend(self.received[start:])
            if held:
                self.stopping = True

    @contextmanager
    def sigint_passed_on(self) -> Iterator[None]:
        """Python's own SIGINT handling for the block (Mininet's CLI: Ctrl-C stops the command
        it runs); SIGTERM and SIGHUP still come to the gate."""
        if not _in_main_thread() or signal.getsignal(signal.SIGINT) != self.handle:
            yield
            return
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, self.handle)


@contextmanager
def shielded(notice: Callable[[str], None] = stderr_notice) -> Iterator[list[int]]:
    """Run the block with SIGINT/SIGTERM/SIGHUP recorded instead of raised; the yielded list
    holds the signals that arrived once the block is left. Uses the installed `SignalGate`
    when there is one, else installs a temporary gate."""
    current = signal.getsignal(signal.SIGINT) if _in_main_thread() else None
    gate = getattr(current, "__self__", None)
    if isinstance(gate, SignalGate):
        with gate.holding() as held:
            yield held
        return
    gate = SignalGate(notice)
    with gate.installed(temporary=True), gate.holding() as held:
        yield held


@contextmanager
def main_thread_woken() -> Iterator[None]:
    """For the block, a SIGINT/SIGTERM/SIGHUP taken by any thread interrupts the main thread's
    blocking call (see the module docstring). `WAKE` is sent a few times over two seconds
    (`WAKE_AFTER_S`): one may land while the main thread is between two blocking calls, where
    it interrupts nothing, and a spare one costs the main thread a retried system call. `WAKE`'s
    handler does nothing and stays: a late `WAKE` must never meet its default action, which
    ends the process."""
    if not _in_main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    main, wanted = threading.main_thread().ident, {int(s) for s in SIGNALS}
    active = True

    def forward() -> None:
        schedule: list[float] = []      # when the next wakes are due (time.monotonic)
        try:
            while True:
                timeout = max(0.0, schedule[0] - time.monotonic()) if schedule else None
                if select.select([read_end], [], [], timeout)[0]:
                    data = os.read(read_end, 64)
                    if not data:
                        return
                    if wanted.intersection(data):
                        now = time.monotonic()
                        schedule = [now + after for after in WAKE_AFTER_S]
                while schedule and schedule[0] <= time.monotonic():
                    schedule.pop(0)
                    if active:
                        signal.pthread_kill(main, WAKE)  # type: ignore[arg-type]
        finally:
            os.close(read_end)

    signal.signal(WAKE, lambda signum, frame: None)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=forward, name="signal-waker", daemon=True).start()
    try:
        yield
    finally:
        active = False
        signal.set_wakeup_fd(previous)
        os.close(write_end)         # the forwarding thread reads the end of the pipe and stops
