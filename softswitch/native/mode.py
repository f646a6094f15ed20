"""Whether a switch's program runs on the native data path, and why not when it does not.

Modes (``softswitch --native``):

    auto   the default: the native path for a program the native generator can do and the
           machine can build (gcc); any other program runs on the Python/compiled path, the
           reason logged, counted and shown by softswitch-ctl's ``packet_path``.
    off    the Python (or compiled) packet path only: the reference.
    on     the native path, or setting the program fails, saying why.

``prepare`` runs when a pipeline is pushed, before it takes effect and outside the switch's
locks (the build takes seconds, once per program text: build.py caches it). What it hands
back, a ``NativeProgram``, is what Switch.use_program needs to run the program natively: the
library, the generator's index of the program's objects, and the mirror that writes the
Python objects' state and every later P4Runtime write into the library's objects
(objects.NativeObjects).
"""
from __future__ import annotations

import ctypes
import importlib
import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..pipeline.program import Program

log = logging.getLogger("softswitch.native")

MODES = ("auto", "on", "off")
DEFAULT_MODE = "auto"


class NativeUnavailable(Exception):
    """``--native on`` and the program cannot run natively; the message says why."""


class NativeRefused(NativeUnavailable):
    """The program uses something the native generator cannot do (named): not a fault of the
    machine or of softswitch, a feature the native path lacks."""


@dataclass
class NativeProgram:
    program: Program
    native: Any                 # codegen.Native: the generated C and where the objects are
    library: ctypes.CDLL
    mirror: Callable[[Any, "NativeProgram"], None]   # (data plane, this): its objects mirrored into the library's


def _attach(objects_class, dp, prepared: NativeProgram) -> None:
    """The program's Python objects into the data plane's native ones, and every later write
    (native/objects.py); the data plane detaches them when it stops."""
    mirror = objects_class(prepared.program, prepared.native, prepared.library, dp.objects)
    mirror.attach()
    dp.mirror = mirror


class NativePath:
    def __init__(self, mode: str = DEFAULT_MODE, cache_dir=None):
        if mode not in MODES:
            raise ValueError(f"native path mode '{mode}' is not one of {', '.join(MODES)}")
        self.mode = mode
        self.cache_dir = cache_dir
        self.refused: str | None = None        # why the last program does not run natively
        self.refusals = 0                      # programs that did not (since the switch started)
        self.in_use = False

    def prepare(self, program: Program) -> NativeProgram | None:
        """The program's native build, or None (the Python path runs it; "on": NativeUnavailable)."""
        if self.mode == "off" or program is None:
            return None
        started = time.monotonic()
        try:
            prepared = self._build(program)
        except NativeUnavailable as e:
            self.refused = str(e)
            self.refusals += 1
            if self.mode == "on":
                raise
            log.warning("native data path refused this program, the Python path runs it: %s", e)
            return None
        self.refused = None
        log.info("native data path ready in %.1f s", time.monotonic() - started)
        return prepared

    def _build(self, program: Program) -> NativeProgram:
        from . import build, codegen
        try:
            native = codegen.generate(program)
        except codegen.Unsupported as e:
            raise NativeRefused(f"the native generator cannot do this program: {e}") from None
        builder = build.NativeBuilder(self.cache_dir)
        why = builder.ready(native.source)      # a cached library needs no compiler
        if why:
            raise NativeUnavailable(why)
        try:
            objects = importlib.import_module(f"{__package__}.objects")
        except ImportError:
            objects = None
        if getattr(objects, "NativeObjects", None) is None:
            raise NativeUnavailable("no mirror of P4Runtime writes into the native objects "
                                    "(softswitch.native.objects.NativeObjects) in this build")
        try:
            library = builder.load(native.source)
        except build.BuildError as e:
            raise NativeUnavailable(f"the native library did not build: {e}") from None
        return NativeProgram(program, native, library, partial(_attach, objects.NativeObjects))

    def status(self) -> dict:
        return {"native_mode": self.mode, "native": self.in_use, "native_refused": self.refused,
                "native_refusals": self.refusals}
