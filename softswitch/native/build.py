"""Building the native data path's shared library: a program's generated C with the data plane
(dataplane.c) and the generic run-time objects, compiled with the machine's C compiler.

``compile_library`` is the compiler step alone (tests use it for a hand-written stand-in of a
program's pipeline). The per-program build at pipeline push, cached per program text, is
``NativeBuilder``: the compiled path's cache (pipeline/compiled.py's BuildCache: directory,
lock, ownership checks, pruning) holds its libraries too.
"""
from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parent
# -O2 as the compiled path; -fvisibility default: Python finds the control functions by name
C_FLAGS = ("-shared", "-fPIC", "-O2", "-pthread", "-fno-strict-aliasing")
DATAPLANE_SOURCES = (NATIVE_DIR / "dataplane.c",)


class BuildError(Exception):
    """The native library cannot be built; the message says why."""


def compiler() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"


def missing(cc: str | None = None) -> str | None:
    """Why nothing can be compiled here (None: it can)."""
    cc = cc or compiler()
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler: '{cc.split()[0]}' is not on PATH (set CC, or apt-get install gcc)"
    return None


def compile_command(sources: list[Path], output: Path, cc: str | None = None) -> list[str]:
    """The compiler's command line: ``sources`` (with abi.h's directory on the include path)
    into the shared library ``output``."""
    return ["nice", "-n", "10", *(cc or compiler()).split(), *C_FLAGS, "-I", str(NATIVE_DIR),
            *map(str, sources), "-o", str(output), "-lm"]
