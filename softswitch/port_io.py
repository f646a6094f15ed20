"""Frames in and out of the port sockets, a batch at a time.

The data plane loop reads a port's frames and sends the frames a loop turn made through a
``PortIO``. This one is the reference: a system call per frame. port_io.pyx is the same
interface compiled (with the compiled packet path, pipeline/compiled.py): recvmmsg and
sendmmsg, one system call per batch. At saturation a system call cost more than the kernel's
work on the frame it carried (benchmarks/target_pps.py): in a microbenchmark on veths, a
frame read cost 0.95 µs one by one against 0.56 in batches of 64, a frame sent 2.27 against
1.50 in batches of 32.

Both keep the same order and the same losses: frames leave a port in the order they were
handed over; a frame the kernel refuses (interface down, too big for its MTU, send buffer
full) is counted lost and the ones after it still go.
"""
from __future__ import annotations

import os

BATCH = 64                 # frames read or sent with one system call (port_io.pyx)
MAX_FRAME = 65536          # the largest frame read whole (a larger one is cut, as by recv)


class PortIO:
    """One frame per system call. One instance per data plane (the compiled one owns buffers)."""

    batched = False

    def __init__(self, batch: int = BATCH):
        self.batch = batch

    def recv(self, fd: int) -> list[bytes]:
        """Up to ``batch`` frames waiting on the non-blocking socket ``fd`` (none: [])."""
        frames: list[bytes] = []
        read = os.read
        for _ in range(self.batch):
            try:
                frames.append(read(fd, MAX_FRAME))
            except OSError:           # BlockingIOError: nothing more to read; or the interface went
                break
        return frames

    def send_run(self, fd: int, waiting: list[tuple[int, bytes]], start: int) -> tuple[int, int, int]:
        """Send the frames of ``waiting`` (port, frame) from ``start`` on while their port is
        the first one's, by the socket ``fd``: (index after the run, frames sent, frames lost)."""
        port = waiting[start][0]
        end, sent, lost, n = start, 0, 0, len(waiting)
        write = os.write
        while end < n:
            p, frame = waiting[end]
            if p != port:
                break
            try:
                write(fd, frame)
                sent += 1
            except OSError:           # interface down or gone, frame too big: the frame is lost
                lost += 1
            end += 1
        return end, sent, lost
