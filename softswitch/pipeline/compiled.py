"""The compiled packet path: a program's generated Python, compiled to C by Cython.

The generated Python (codegen/) is softswitch's packet path and its reference. Where
Cython, a C compiler and Python's headers are present, the same source is compiled into an
extension module; the switch then runs the compiled functions instead (same code, same
semantics: Cython keeps Python's integers and exceptions; the one type it is told is that the
packet state ``F`` is a list, so it indexes the list directly, at constant slots with no index
check: unchecked_slots.py). On the fabric program this takes about a third off softswitch's
own time per packet (benchmarks/softswitch_path.py: 10.7 -> 7.3 µs). With every program's
build go two modules of softswitch's own, built once per machine (SUPPORT_SOURCES): the
packet path's steps around the pipelines (packet_path.py, the same source compiled) and the
loop's port I/O (port_io.pyx: recvmmsg and sendmmsg, port_io.py's twin); the data plane runs
them while it runs a compiled program.

The source is turned into one factory, ``make(namespace)``, that binds the program's
run-time objects (tables, registers...) into closures and returns the functions: a module
is loaded once per process, yet every program instance built from it gets its own objects.

Safety: the module is loaded into the switch's process (often root). The JSON (untrusted) reaches
the generated source only as comments and as ``log_msg`` format strings (ascii() literals,
codegen/); the source compiled here has no comments (ast.unparse keeps none), Cython copies
none of it into C comments, and it writes string constants escaped: the C compiler sees
generated identifiers, numbers and escaped constants only.
Built modules are kept in a cache directory (one build per program text, ``SOFTSWITCH_CACHE`` or
~/.cache/aifabric/softswitch); a directory or a module file that anyone but this user could have
written or replaced is refused. A module is a few megabytes (the fabric program's ~6 MB): after
each build only the KEEP_BUILDS most recently used stay (loading one marks it used).
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Callable

from .. import build_cache
from ..build_cache import CacheError, default_cache_dir
from .program import Program
from .unchecked_slots import without_index_checks_in

FORMAT = 4                       # bump when the factory's shape changes: older builds are not reused
# -O2: Cython's small helpers (list item get/set, decref) inlined. At -O1 or -Os they stay calls:
# at -Os the fabric program's aggregation packets cost 98 µs of CPU each at saturation against
# 74 at -O2 (the Python path: 96), and the module is 4.7 MB against 5.7. -O2 builds the fabric
# program in ~75 s of one core on an earlier machine (-O1: ~42 s), 123 s on a 2-core AMD EPYC VM.
C_FLAGS = ("-shared", "-fPIC", "-O2", "-w")
KEEP_BUILDS = 24                 # modules kept in the cache, the most recently used (~150 MB at most)
_loaded: dict[str, ModuleType] = {}    # module name -> module, once per process
_support: dict[str, ModuleType] = {}   # kind -> softswitch's own compiled module loaded last
PATH_PREFIX = "softswitch_path_"       # a program's compiled path: softswitch_path_<digest>
# softswitch's own per-packet modules, compiled with every program's path (one build each per
# machine, softswitch_<kind>_<digest>): the loop's port I/O (port_io.pyx, the compiled twin of
# port_io.py) and the packet path (packet_path.py itself)
SUPPORT_SOURCES = {kind: Path(__file__).resolve().parent.parent / name
                   for kind, name in (("port_io", "port_io.pyx"), ("packet_path", "packet_path.py"))}


class CompileError(CacheError):
    """The compiled path cannot be had; the message says why (what is missing, what failed)."""


def factory_source(program: Program) -> str:
    """The program's generated module as one function ``make(_ns)`` returning its functions by
    name, comments gone (ast.unparse keeps none)."""
    tree = ast.parse(program.source)
    for fn in ast.walk(tree):    # the packet state is a list: Cython indexes it directly
        if isinstance(fn, ast.FunctionDef):
            for arg in fn.args.args:
                if arg.arg == "F":
                    arg.annotation = ast.Name("list", ast.Load())
    without_index_checks_in(tree, program.layout.size)     # and its constant slots with no index check
    functions = []
    for node in tree.body:       # functions, and the next-node maps (``_nx0 = {}``, ``_nx0.update(...)``)
        if isinstance(node, ast.FunctionDef):
            functions.append(node.name)
        elif not isinstance(node, (ast.Assign, ast.Expr)):
            raise CompileError(f"generated module has a top-level {type(node).__name__}: not expected")
    bound = _bound_names(program)
    for name in bound:
        if not name.isidentifier():
            raise CompileError(f"namespace name {name!r} is not an identifier")
    lines = ["import cython", "def make(_ns):"]
    lines += [f"    {name} = _ns[{name!r}]" for name in bound]
    lines.append(textwrap.indent(ast.unparse(tree), "    "))
    lines.append("    return {" + ", ".join(f"{name!r}: {name}" for name in functions) + "}")
    return "\n".join(lines) + "\n"


def _bound_names(program: Program) -> list[str]:
    """The run-time objects and helpers the generated code finds in its namespace (what the
    module itself defines, it defines again in the factory)."""
    return sorted(k for k in program.namespace if not k.startswith("__") and k not in program.generated_names)


class PathCompiler:
    """Builds, caches and loads compiled packet paths."""

    def __init__(self, cache_dir: Path | str | None = None, cc: str | None = None):
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.cc = cc or os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        self.include = sysconfig.get_paths()["include"]
        self._runner = build_cache.Runner(CompileError)

    def missing(self) -> str | None:
        """Why nothing can be compiled here (None: it can)."""
        if importlib.util.find_spec("Cython") is None:
            return "Cython is not installed (pip install cython)"
        if shutil.which(self.cc.split()[0]) is None:
            return f"no C compiler: '{self.cc.split()[0]}' is not on PATH (set CC, or apt-get install gcc)"
        if not os.path.exists(os.path.join(self.include, "Python.h")):
            return f"Python's C headers are not installed (no {self.include}/Python.h: apt-get install python3-dev)"
        return None

    def is_built(self, program: Program) -> bool:
        """The program's build and softswitch's own compiled modules are in the cache (nothing
        is loaded)."""
        if importlib.util.find_spec("Cython") is None:    # its version names the builds
            return False
        names = [self._support_name(kind)[0] for kind in SUPPORT_SOURCES]
        return all(self._module_path(n).exists() for n in (*names, self._name(program)))

    def cached(self, program: Program) -> dict[str, Callable] | None:
        """The program's compiled functions if its build and softswitch's own compiled modules
        are in the cache, else None."""
        if not self.is_built(program):
            return None
        names = [self._support_name(kind)[0] for kind in SUPPORT_SOURCES]
        for kind, n in zip(SUPPORT_SOURCES, names):
            _support[kind] = self._load(n, self._module_path(n))
        name = self._name(program)
        return self._make(program, name, self._module_path(name))

    def build(self, program: Program) -> dict[str, Callable]:
        """The program's compiled functions, built first unless cached (another process building
        the same program is waited for). CompileError says what is missing or what failed.
        softswitch's own compiled modules (SUPPORT_SOURCES) are built and loaded first: a
        compiled path in use always has them (loaded_support)."""
        for kind in SUPPORT_SOURCES:
            self.support(kind)
        name = self._name(program)
        return self._make(program, *self._built(name, factory_source(program), ".py"))

    def support(self, kind: str) -> ModuleType:
        """softswitch's own module ``kind`` (a key of SUPPORT_SOURCES) compiled, built first
        unless cached."""
        why = self.missing()
        if why:
            raise CompileError(why)
        self._safe_dir()
        name, source = self._support_name(kind)
        _support[kind] = self._load(*self._built(name, source, SUPPORT_SOURCES[kind].suffix))
        return _support[kind]

    def cancel(self) -> None:
        """Stop a build under way (the switch is stopping): build() raises CompileError."""
        self._runner.cancel()

    # -- helpers -------------------------------------------------------------------------
    def _name(self, program: Program) -> str:
        """The module's name: a digest of everything its build depends on (the factory's text
        follows from the generated source and the bound names, and FORMAT)."""
        return self._digest_name(PATH_PREFIX, program.source, *_bound_names(program))

    def _support_name(self, kind: str) -> tuple[str, str]:
        """The module name and source of softswitch's own module ``kind``."""
        source = SUPPORT_SOURCES[kind].read_text()
        return self._digest_name(f"softswitch_{kind}_", source), source

    def _digest_name(self, prefix: str, *sources: str) -> str:
        import Cython
        key = "\0".join((str(FORMAT), Cython.__version__, _ext_suffix(), self.cc, " ".join(C_FLAGS), *sources))
        return prefix + hashlib.sha256(key.encode()).hexdigest()[:24]

    def _module_path(self, name: str) -> Path:
        return self.cache_dir / (name + _ext_suffix())

    def _built(self, name: str, source: str, suffix: str) -> tuple[str, Path]:
        """Module ``name`` of ``source`` (Cython's .py or .pyx) in the cache, built unless it
        is there (another process building it is waited for)."""
        path = self._module_path(name)
        with build_cache.locked(self.cache_dir, name):
            if not path.exists():
                for stale in self.cache_dir.glob(f".{name}-*"):    # a build whose process was killed
                    shutil.rmtree(stale, ignore_errors=True)
                self._compile(name, source, suffix, path)
                self._prune()
        return name, path

    def _prune(self) -> None:
        """Only the KEEP_BUILDS most recently used modules of each kind stay (build_cache.prune)."""
        build_cache.prune(self.cache_dir, (PATH_PREFIX, *(f"softswitch_{kind}_" for kind in SUPPORT_SOURCES)),
                          _ext_suffix(), KEEP_BUILDS)

    def _safe_dir(self) -> None:
        build_cache.safe_dir(self.cache_dir, CompileError)

    def _compile(self, name: str, source: str, suffix: str, path: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.cache_dir))
        try:
            py, c, so = work / f"{name}{suffix}", work / f"{name}.c", work / path.name
            py.write_text(source)
            # no Python source copied into C comments: the C compiler sees no JSON text but the
            # (escaped) string constants of log_msg formats
            self._run([sys.executable, "-m", "cython", "-3", "--fast-fail", "-X", "emit_code_comments=False",
                       "-o", str(c), str(py)], "cython")
            self._run(["nice", "-n", "10", *self.cc.split(), *C_FLAGS, "-I", self.include, str(c), "-o", str(so)],
                      self.cc)
            os.chmod(so, 0o600)
            os.replace(so, path)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _make(self, program: Program, name: str, path: Path) -> dict[str, Callable]:
        return self._load(name, path).make(program.namespace)

    def _load(self, name: str, path: Path) -> ModuleType:
        """Module ``name`` from ``path``, loaded once per process."""
        mod = _loaded.get(name)
        if mod is None:
            self._safe_dir()
            _check_ours(path, "compiled module")
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise CompileError(f"{path} cannot be loaded as a module")
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except ImportError as e:
                raise CompileError(f"{path} does not load: {e}") from None
            _loaded[name] = mod
            os.utime(path)                  # used now: pruning keeps the most recently used
        return mod

    def _run(self, cmd: list[str], what: str) -> None:
        """One build step, in a process group of its own (cancel() stops it whole)."""
        self._runner.run(cmd, what)


def loaded_support(kind: str) -> ModuleType | None:
    """softswitch's own module ``kind`` compiled, if this process has loaded it (any compiled
    path in use has), else None."""
    return _support.get(kind)


def _ext_suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _check_ours(path: Path, what: str) -> None:
    build_cache.check_ours(path, what, CompileError)
