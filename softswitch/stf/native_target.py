"""softswitch's native data path as an STF target, in this process, without root.

The program's native library (softswitch.native, built as a pushed program's is) runs its own
loop thread, as in a switch process; each port the test names is one end of a datagram socket
pair (a frame is a datagram), the other end is the test's. Table writes, replication and
stateful objects go to the same Python objects as on the Python target, which mirror every
write into the library's objects under the loop's lock; counters and registers are read back
from the library. After each packet the target waits until the loop took it in and its queues
are empty and nothing moved for a while (its copies, recirculations and departures are done).
A program the native generator cannot do is Unsupported, named.
"""
from __future__ import annotations

import select
import socket
import time
from pathlib import Path

from ..pipeline.program import Program
from .errors import Unsupported
from .names import ResolvedEntry
from .softswitch_target import SoftswitchTarget

QUIET_S = 0.01          # nothing moved for this long after the packet was taken in: it is through
SETTLE_LIMIT_S = 5.0    # a packet not through by then is reported (a loop, or a stuck queue)
MAX_FRAME = 16384


class NativeTarget(SoftswitchTarget):
    name = "softswitch-native"

    def __init__(self, json_path: Path, ports: set[int]):
        from ..native.dataplane import NativeDataplane
        from ..native.mode import NativePath, NativeUnavailable

        program = Program(json_path.read_bytes())
        try:
            prepared = NativePath("on").prepare(program)
        except NativeUnavailable as e:
            raise Unsupported(f"native data path: {e}") from None
        self._start_run(program, ports)
        self._pairs = {p: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for p in sorted(ports)}
        try:
            # socketpairs, not interfaces: no AF_XDP socket can open on them
            self.dp = NativeDataplane(prepared.library, {p: pair[0] for p, pair in self._pairs.items()},
                                      port_io="packet")
        except Exception:
            self._close_sockets()
            raise
        with self.dp.lock:
            self.dp.set_program(program)
            prepared.mirror(self.dp, prepared)
        self._poller = select.poll()
        self._port_of_fd = {}
        for port, (_, test_end) in self._pairs.items():
            test_end.setblocking(False)
            self._poller.register(test_end.fileno(), select.POLLIN)
            self._port_of_fd[test_end.fileno()] = port
        self._sent = 0
        self._errors_seen = 0
        self.dp.start()

    # -- packets ---------------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> None:
        self._pairs[port][1].send(frame)
        self._sent += 1
        self._wait_through()

    def _collect(self, timeout_ms: int) -> bool:
        """Frames the switch sent so far, per port in order; whether any came."""
        got = False
        for fd, _ in self._poller.poll(timeout_ms):
            sock = self._pairs[self._port_of_fd[fd]][1]
            while True:
                try:
                    frame = sock.recv(MAX_FRAME)
                except BlockingIOError:
                    break
                self.out.setdefault(self._port_of_fd[fd], []).append(frame)
                got = True
        return got

    def _moved(self) -> tuple:
        c = self.dp.counters
        return c.rx, c.tx, c.dropped, c.queue_drops, c.errors

    def _wait_through(self) -> None:
        deadline = time.monotonic() + SETTLE_LIMIT_S
        last, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline:
            got = self._collect(1)
            now = self._moved()
            queued = any(self.dp.queue_length(p) for p in self._pairs)
            if got or now != last or queued or now[0] < self._sent:
                last, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET_S:
                self._note_errors()
                return
        self._error_messages.append(f"packet {self._sent}: still in the switch after {SETTLE_LIMIT_S:g} s "
                                    "(a loop, or a stuck queue)")

    def _note_errors(self) -> None:
        c = self.dp.counters
        if c.errors > self._errors_seen:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(c.error_kinds.items()))
            self._error_messages.append(f"packet {self._sent}: the native pipeline failed ({kinds})")
            self._errors_seen = c.errors

    def finish(self) -> dict[int, list[bytes]]:
        self._collect(0)
        return self.out

    def close(self) -> None:
        self.dp.stop()
        self._close_sockets()

    def _close_sockets(self) -> None:
        for a, b in self._pairs.values():
            a.close()
            b.close()

    # -- control: under the loop's lock, so a write is seen whole --------------------------
    def add(self, e: ResolvedEntry) -> int:
        with self.dp.lock:
            return super().add(e)

    def set_default(self, table: str, action: str, data: tuple) -> None:
        with self.dp.lock:
            super().set_default(table, action, data)

    def clear_tables(self) -> None:
        with self.dp.lock:
            super().clear_tables()

    def _replication_changed(self) -> None:
        self.dp.pre = self.dp.pre       # the engine's groups and sessions into the library, whole

    def direct_counter(self, table: str, handle: int) -> tuple[int, int]:
        self.program.tables[table].sync()
        return super().direct_counter(table, handle)

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        with self.dp.lock:
            super().counter_write(name, index, packets, nbytes)

    def register_write(self, name: str, index: int, value: int) -> None:
        with self.dp.lock:
            super().register_write(name, index, value)

    def register_reset(self, name: str) -> None:
        with self.dp.lock:
            super().register_reset(name)
