"""One switch on real veths for the traffic-class and PFC tests, on either packet path: the Python
data plane running tests/p4/queueing.p4 (its fwd table: ingress port -> egress port and priority;
egress inserts a header with the queue id), or the native data plane with test_native_dataplane's
stub pipeline (rules by ingress port). Both on the same veth bench (test_native_dataplane's
``bench`` fixture: four switch ports, their host ends in namespaces)."""
from __future__ import annotations

import struct
import time
from pathlib import Path

from softswitch.dataplane import Dataplane
from softswitch.pfc import PFC_DESTINATION, class_frame
from softswitch.pipeline.program import Program
from softswitch.runtime.tables import Entry

REPO = Path(__file__).resolve().parents[2]
QUEUEING_JSON = REPO / "tests/p4/build/queueing.json"
ETHERTYPE = b"\x88\xb5"              # the test frames' (the stub's and queueing.p4's)
Q_HEADER = 31                        # queueing.p4's header after Ethernet
HOST_MAC = bytes.fromhex("020000000099")
PATHS = ("python", "native")


def frame(seq: int, size: int = 1000) -> bytes:
    """A test frame of ``size`` bytes carrying ``seq``."""
    return bytes.fromhex("000000000002") + HOST_MAC + ETHERTYPE + seq.to_bytes(4, "big") + bytes(size - 18)


def pfc(enable: int, quanta: list[int], src: bytes = HOST_MAC) -> bytes:
    """A PFC frame as a neighbour sends it."""
    from softswitch.pfc import pfc_frame
    return pfc_frame(src, enable, quanta)


def pause(priority: int, quanta: int) -> bytes:
    return class_frame(HOST_MAC, priority, quanta)


def parse_pfc_frame(f: bytes) -> tuple[int, tuple[int, ...]] | None:
    """(class-enable vector, quanta) of a PFC frame that came out (None: not one)."""
    if f[:6] != PFC_DESTINATION or f[12:14] != b"\x88\x08":
        return None
    opcode, enable, *quanta = struct.unpack_from("!HH8H", f, 14)
    assert opcode == 0x0101 and len(f) == 60, f"a MAC control frame that is not a PFC frame: {f.hex()}"
    return enable, tuple(quanta)


class SwitchBench:
    """The switch on the bench: ``dp`` its data plane, ``tb`` the veths."""

    def __init__(self, kind: str, tb, ports, native_make=None, **kw):
        self.kind, self.tb = kind, tb
        tb.drain()
        for p in ports.values():           # what the last test left in the switch's sockets
            while True:
                try:
                    p.sock.recv(65536)
                except BlockingIOError:
                    break
        if kind == "python":
            kw.setdefault("priority_queues", 8)
            self.dp = Dataplane(ports, **kw)
            prog = Program(QUEUEING_JSON.read_bytes())
            self._fwd = next(t for t in prog.tables.values() if t.name.endswith("fwd"))
            self._set = next(a for a in prog.actions.values() if a.name.endswith("set_port_priority"))
            self.dp.set_program(prog)
            self._stub = None
        else:
            kw.setdefault("priority_queues", 8)
            self._stub = native_make(**kw)
            self.dp = self._stub.dp
        self.seq_at = 14 + (Q_HEADER if kind == "python" else 0)

    def route(self, in_port: int, out_port: int, priority: int = 0) -> None:
        """Frames in on ``in_port`` leave by ``out_port`` in class ``priority``."""
        if self._stub is None:
            self._fwd.insert(Entry((in_port,), 0, self._set, (out_port, priority)))
        else:
            rule = self._stub.rule_in(in_port)
            rule.egress, rule.priority = out_port, priority

    def start(self) -> "SwitchBench":
        self.dp.start()
        return self

    def stop(self) -> None:
        self.dp.stop()

    def send(self, port: int, frames: list[bytes]) -> None:
        for f in frames:
            self.tb.ports[port].send(f)

    def frames(self, port: int, timeout: float = 3.0, count: int | None = None, quiet: float = 0.3) -> list[bytes]:
        """Every frame the host on ``port`` receives (the kernel's own left out)."""
        got = self.tb.ports[port].receive(timeout=timeout, count=count, quiet=quiet)
        return [f for f in got if f[12:14] in (ETHERTYPE, b"\x88\x08")]

    def seqs(self, port: int, count: int, timeout: float = 3.0, quiet: float = 0.3) -> list[int]:
        """The sequence numbers of the test frames the host on ``port`` receives."""
        got = [f for f in self.frames(port, timeout, count, quiet) if f[12:14] == ETHERTYPE]
        return [int.from_bytes(f[self.seq_at:self.seq_at + 4], "big") for f in got]

    def arrivals(self, port: int, count: int, timeout: float = 5.0) -> list[tuple[float, bytes]]:
        """(monotonic time, frame) of what the host on ``port`` receives, a frame at a time."""
        out: list[tuple[float, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for f in self.frames(port, timeout=min(0.5, deadline - time.monotonic()), count=1, quiet=0.0):
                out.append((time.monotonic(), f))
        return out

    def klass(self, port: int, priority: int) -> dict:
        """The figures of class ``priority`` of ``port`` (run-time control's get_queue)."""
        return next(c for c in self.dp.class_stats(port) if c["priority"] == priority)

    def wait(self, done, timeout: float = 5.0) -> bool:
        """Until ``done()`` holds (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True
