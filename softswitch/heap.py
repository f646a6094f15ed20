"""Giving freed heap back to the system.

Pushing a pipeline builds and drops a great deal (the BMv2 JSON parsed, Python code generated
and compiled, the native program's C source): glibc keeps what was freed in its heap, about 20
MiB a push of the fabric program, so a process that serves many switches (softswitch group)
would hold several times what its switches use. ``trim`` hands it back (malloc_trim: a few
milliseconds); elsewhere than glibc it does nothing."""
from __future__ import annotations

import ctypes
import ctypes.util

_libc_name = ctypes.util.find_library("c")
_malloc_trim = getattr(ctypes.CDLL(_libc_name), "malloc_trim", None) if _libc_name else None


def trim() -> None:
    if _malloc_trim is not None:
        _malloc_trim(0)
