"""Which packet path a switch's program runs: the generated Python or the compiled one (with
it, the packet path's own steps compiled and the ports read and written a batch a system call:
pipeline/compiled.py).

Modes (``softswitch --compiled``):

    auto   the default: a program whose compiled build is cached runs it from the start;
           otherwise the Python path runs while the build goes on in the background (nice'd;
           the fabric program takes about 2 minutes of one core, once per program text: switches
           running the same program share one build), and the data plane switches over when
           it is done. No compiler, Cython or headers here: the Python path, said once.
    now    compiled before the program takes effect; if it cannot be, setting the program
           fails, saying why (benchmarks, the differential tests of the compiled path).
    off    the Python path only.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable

from .pipeline.compiled import CompileError, PathCompiler
from .pipeline.program import Program

if TYPE_CHECKING:
    from .dataplane import Dataplane

log = logging.getLogger("softswitch.fastpath")

MODES = ("auto", "now", "off")


class FastPath:
    def __init__(self, mode: str = "auto", compiler: PathCompiler | None = None):
        if mode not in MODES:
            raise ValueError(f"compiled path mode '{mode}' is not one of {', '.join(MODES)}")
        self.mode = mode
        self.compiler = compiler or PathCompiler()
        self.building: Program | None = None      # the program a background build is for
        self.last_error: str | None = None
        self._told_missing = False

    def prepare(self, program: Program) -> None:
        """Before ``program`` runs: compiled now ("now": CompileError if it cannot be), or
        at once if its build is cached ("auto")."""
        if self.mode == "off" or not program.fuse:      # unfused: the node-by-node reference
            return
        if self.mode == "now":
            started = time.monotonic()
            program.use_compiled(self.compiler.build(program))
            log.info("compiled packet path ready in %.1f s", time.monotonic() - started)
            return
        try:
            functions = self.compiler.cached(program)
        except CompileError as e:
            self._failed(e)
            return
        if functions is not None:
            program.use_compiled(functions)
            log.info("compiled packet path in use (cached build)")

    def follow(self, program: Program | None, dataplane: "Dataplane") -> None:
        """After ``program`` was set ("auto"): build it in the background and switch the data
        plane to the compiled path when done."""
        if self.mode != "auto" or program is None or program.compiled or not program.fuse:
            return
        why = self.compiler.missing()
        if why:
            if not self._told_missing:
                log.info("packet path stays Python: %s", why)
                self._told_missing = True
            return
        self.building = program
        threading.Thread(target=self._build, args=(program, dataplane), name="path-compiler", daemon=True).start()

    def stop(self) -> None:
        """The switch is stopping: a background build is abandoned (its compiler killed)."""
        self.compiler.cancel()

    def status(self) -> dict:
        return {"mode": self.mode, "building": self.building is not None, "error": self.last_error}

    def _build(self, program: Program, dataplane: "Dataplane") -> None:
        started = time.monotonic()
        try:
            functions = self.compiler.build(program)
            if dataplane.adopt_compiled(program, functions):
                log.info("compiled packet path in use (built in %.1f s)", time.monotonic() - started)
        except CompileError as e:
            self._failed(e)
        except Exception as e:       # whatever the build does, the switch goes on in Python
            log.exception("compiled packet path: build failed")
            self._failed(e)
        finally:
            if self.building is program:
                self.building = None

    def _failed(self, e: Exception) -> None:
        self.last_error = str(e)
        log.warning("compiled packet path unavailable, the Python path goes on: %s", e)


def build_compiled_ahead(program: Program, progress: Callable[[str], None] = lambda msg: None) -> str:
    """Build the compiled packet path of a program that a fabric of softswitches is about to
    run on it (softswitch/build_ahead.py), before any switch starts; returns what was done, in
    a few words.

    With "auto" on a fresh machine the switches would start on the Python path while one of
    them compiles in the background: a whole fabric then shares the CPU with the C compiler for
    minutes. Built here once, every switch finds it cached and runs compiled from its first
    packet. Ctrl-C stops the build."""
    if os.environ.get("SOFTSWITCH_COMPILED", "auto") == "off":
        return "compiled packet path off (SOFTSWITCH_COMPILED=off)"
    compiler = PathCompiler()
    why = compiler.missing()
    if why:
        return f"packet path stays Python: {why}"
    if compiler.is_built(program):
        return "compiled packet path cached"
    progress("building softswitch's compiled packet path for this program (once per machine and "
             "program; about 2 minutes of one core for the fabric program)")
    started = time.monotonic()
    try:
        compiler.build(program)
    except CompileError as e:
        return f"packet path stays Python: {e}"
    except BaseException:
        compiler.cancel()
        raise
    return f"compiled packet path built in {time.monotonic() - started:.0f} s"
