"""Building the native data path's shared library: a program's generated C with the data plane
(dataplane.c) and the generic run-time objects, compiled with the machine's C compiler.

``compile_command`` is the compiler step alone (tests use it for a hand-written stand-in of a
program's pipeline). ``LibraryBuilder`` builds, caches and loads a shared library of C sources
(softswitch's cache, build_cache: directory, lock, ownership checks, pruning); the per-program
build at pipeline push, cached per program text, is ``NativeBuilder``, and the collectives'
native host path (hostagent.collectives.native) is another LibraryBuilder.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

from .. import build_cache
from ..build_cache import CacheError

NATIVE_DIR = Path(__file__).resolve().parent
# -O2 as the compiled path; -fvisibility default: Python finds the control functions by name
C_FLAGS = ("-shared", "-fPIC", "-O2", "-pthread", "-fno-strict-aliasing")
# the loop, its ports' links and classes, priority flow control, its AF_XDP port I/O, the replication
# engine's groups and sessions, the CPU port's packet-outs and packet-ins
DATAPLANE_SOURCES = tuple(NATIVE_DIR / f for f in ("dataplane.c", "classes.c", "pfc.c", "xsk.c", "replication.c",
                                                   "cpu_port.c"))


class BuildError(CacheError):
    """The native library cannot be built; the message says why."""


def compiler() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"


def missing(cc: str | None = None) -> str | None:
    """Why nothing can be compiled here (None: it can)."""
    cc = cc or compiler()
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler: '{cc.split()[0]}' is not on PATH (set CC, or apt-get install gcc)"
    return None


def compile_command(sources: list[Path], output: Path, cc: str | None = None, include: Path = NATIVE_DIR) -> list[str]:
    """The compiler's command line: ``sources`` (with ``include``, abi.h's directory by default,
    on the include path) into the shared library ``output``."""
    return ["nice", "-n", "10", *(cc or compiler()).split(), *C_FLAGS, "-I", str(include),
            *map(str, sources), "-o", str(output), "-lm"]


# ---- a library, cached per digest of its sources ----------------------------------------------
FORMAT = 1                              # bump when the library's shape changes: older builds are not reused
LIBRARY_PREFIX = "softswitch_native_"   # softswitch_native_<digest>.so in the build cache
KEEP_BUILDS = 24
OBJECT_SOURCES = (NATIVE_DIR / "objects.c", NATIVE_DIR / "frame_run.c")
HEADERS = tuple(NATIVE_DIR / h for h in ("abi.h", "state.h", "xsk.h", "objects.h", "pipeline_support.h",
                                         "pipeline_helpers.h"))
_loaded: dict[str, ctypes.CDLL] = {}    # library name -> library, once per process


class LibraryBuilder:
    """Builds, caches and loads the shared library ``<prefix><digest>.so`` of ``sources`` (and a
    generated ``c_source``, if given), compiled with ``headers``' directory ``include`` on the
    include path. The digest covers everything the build depends on (compiler, flags, sources,
    headers); the cache is build_cache's (directory, lock, ownership checks, pruning to
    ``keep`` libraries of this prefix); a library is loaded once per process."""

    def __init__(self, prefix: str, sources: tuple[Path, ...], headers: tuple[Path, ...], include: Path,
                 cache_dir: Path | str | None = None, cc: str | None = None, keep: int = KEEP_BUILDS):
        self.prefix, self.sources, self.headers, self.include, self.keep = prefix, sources, headers, include, keep
        self.cache_dir = Path(cache_dir) if cache_dir else build_cache.default_cache_dir()
        self.cc = cc or compiler()
        self._runner = build_cache.Runner(BuildError)

    def name(self, c_source: str = "") -> str:
        """The library's name: a digest of everything its build depends on."""
        parts = [str(FORMAT), self.cc, " ".join(C_FLAGS), c_source,
                 *(f"{p.name}\0{p.read_text()}" for p in (*self.sources, *self.headers))]
        return self.prefix + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

    def path(self, c_source: str = "") -> Path:
        return self.cache_dir / (self.name(c_source) + ".so")

    def ready(self, c_source: str = "") -> str | None:
        """Why the library cannot be had here (None: it is cached, or the compiler can build it)."""
        return None if self.path(c_source).exists() else missing(self.cc)

    def build(self, c_source: str = "") -> Path:
        """The library in the cache, built unless it is there (another process building it is
        waited for): a cached library needs no compiler (an image can carry the libraries it
        was built with and not the compiler). BuildError says what is missing or what failed."""
        name = self.name(c_source)
        path = self.cache_dir / (name + ".so")
        if not path.exists() and (why := missing(self.cc)):
            raise BuildError(why)
        build_cache.safe_dir(self.cache_dir, BuildError)
        with build_cache.locked(self.cache_dir, name):
            if not path.exists():
                for stale in self.cache_dir.glob(f".{name}-*"):    # a build whose process was killed
                    shutil.rmtree(stale, ignore_errors=True)
                work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.cache_dir))
                try:
                    generated = [work / "program.c"] if c_source else []
                    for c in generated:
                        c.write_text(c_source)
                    so = work / path.name
                    self._runner.run(compile_command([*generated, *self.sources], so, self.cc, self.include), self.cc)
                    os.chmod(so, 0o600)
                    os.replace(so, path)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                build_cache.prune(self.cache_dir, (self.prefix,), ".so", self.keep)
        return path

    def load(self, c_source: str = "") -> ctypes.CDLL:
        """The library, built first unless cached; loaded once per process."""
        path = self.build(c_source)
        lib = _loaded.get(path.name)
        if lib is None:
            build_cache.safe_dir(self.cache_dir, BuildError)
            build_cache.check_ours(path, "native library", BuildError)
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as e:
                raise BuildError(f"{path} does not load: {e}") from None
            _loaded[path.name] = lib
            os.utime(path)                   # used now: pruning keeps the most recently used
        return lib

    def cancel(self) -> None:
        """Stop a build under way (the switch is stopping): build() raises BuildError."""
        self._runner.cancel()


class NativeBuilder(LibraryBuilder):
    """A program's native library: its generated C (native/codegen.py) with the run-time objects
    (objects.c) and, unless ``with_dataplane`` is False (tests of the pipeline alone), the data
    plane (dataplane.c), cached per generated text and sources."""

    def __init__(self, cache_dir: Path | str | None = None, cc: str | None = None, with_dataplane: bool = True):
        super().__init__(LIBRARY_PREFIX, OBJECT_SOURCES + (DATAPLANE_SOURCES if with_dataplane else ()), HEADERS,
                         NATIVE_DIR, cache_dir, cc)
