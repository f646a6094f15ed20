"""Work done inside another network namespace by a short-lived thread that enters it (setns
changes only the calling thread's), not by a forked child as pyroute2 does: forking a process
that runs gRPC threads can abort the child. Sockets made there stay in that namespace."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Callable, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000


def enter_netns(path: str | os.PathLike) -> None:
    """The calling thread into the network namespace at ``path`` (the process's other threads
    stay where they are; threads it starts from then on are in it too)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def run_in_netns(path: str, work: Callable[[], T]) -> T:
    """``work()`` in the network namespace at ``path`` (``/proc/PID/ns/net``); what it returns
    or raises is handed back."""
    done: list = []

    def run() -> None:
        try:
            enter_netns(path)
            done.append(work())
        except BaseException as err:      # handed to the caller
            done.append(err)

    thread = threading.Thread(target=run, name="netns-work")
    thread.start()
    thread.join()
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]
