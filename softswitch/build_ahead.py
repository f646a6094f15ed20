"""What a fabric of softswitches builds before any switch starts: the program's native library
when the native path will run it (a few seconds), else its compiled packet path (about 2 minutes
of one core for the fabric program).

Each switch then finds its build in the cache when the pipeline is pushed: no switch builds
while the fabric runs, and a fabric that ends sooner (a test module) does not kill a build the
next one would start over."""
from __future__ import annotations

import os
import time
from typing import Callable

from .fastpath import build_compiled_ahead
from .native import build, codegen
from .native.mode import DEFAULT_MODE as NATIVE_DEFAULT
from .pipeline.program import Program


def build_ahead(program_json: bytes, progress: Callable[[str], None] = lambda msg: None) -> str:
    """Build what the switches will run this program on; returns what was done, in a few words.
    Ctrl-C stops the build."""
    program = Program(program_json)
    if os.environ.get("SOFTSWITCH_NATIVE", NATIVE_DEFAULT) == "off":
        return build_compiled_ahead(program, progress)
    ready, said = _build_native(program, progress)
    # the program the native path refuses runs on the compiled path
    return said if ready else f"{said}; {build_compiled_ahead(program, progress)}"


def _build_native(program: Program, progress: Callable[[str], None]) -> tuple[bool, str]:
    """(True, what was done) when the native library is built or cached, else (False, why not)."""
    try:
        source = codegen.generate(program).source
    except codegen.Unsupported as e:
        return False, f"no native data path: the native generator cannot do this program: {e}"
    builder = build.NativeBuilder()
    if builder.path(source).exists():
        return True, "native data path cached"      # no compiler needed: a container image's case
    why = build.missing()
    if why:
        return False, f"no native data path: {why}"
    progress("building softswitch's native data path for this program (once per machine and program)")
    started = time.monotonic()
    try:
        builder.build(source)
    except build.BuildError as e:
        return False, f"no native data path: the native library did not build: {e}"
    except BaseException:
        builder.cancel()
        raise
    return True, f"native data path built in {time.monotonic() - started:.0f} s"
