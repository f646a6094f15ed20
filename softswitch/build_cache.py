"""Where softswitch keeps the code it builds for a program, and how it builds it safely.

The compiled path (pipeline/compiled.py: Cython extension modules) and the native path
(native/build.py: shared libraries of generated C) load code they built into the switch's
process (often root), so both keep it the same way:

- one cache directory (``SOFTSWITCH_CACHE`` or ~/.cache/aifabric/softswitch; the collectives'
  native host path's is ``AIFABRIC_HOST_PATH_CACHE`` or ~/.cache/aifabric/hostpath), ours alone: each
  directory above it root's or ours and writable by nobody else unless sticky (/tmp); a built
  file that anyone but this user could have written or replaced is refused (``check_ours``);
- one build per name (a digest of everything the build depends on), under a lock file, so
  another process building the same name is waited for (``locked``);
- after each build only the ``keep`` most recently used files of each kind stay (``prune``;
  loading one marks it used);
- each build step in a process group of its own, stopped whole when the switch stops
  (``Runner``) or dies (``softswitch.build_step``).
"""
from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

BUILD_TIMEOUT_S = 900


class CacheError(Exception):
    """Built code cannot be had or trusted; the message says why."""


def default_cache_dir(kind: str = "softswitch", variable: str = "SOFTSWITCH_CACHE") -> Path:
    """``$variable`` if set, else ~/.cache/aifabric/``kind`` (XDG_CACHE_HOME honoured)."""
    if os.environ.get(variable):
        return Path(os.environ[variable])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aifabric" / kind


def check_ours(path: Path, what: str, error: type[Exception] = CacheError) -> None:
    """``error`` unless ``path`` (not a link) is owned by this user and writable by nobody else."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise error(f"{what} {path} could have been written by another user (owner uid {st.st_uid}, "
                    f"mode {stat.filemode(st.st_mode)}): not loading code from it")


def safe_dir(cache_dir: Path, error: type[Exception] = CacheError) -> None:
    """The cache directory exists, is ours alone, and no other user can replace it."""
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_ours(cache_dir, "cache directory", error)
    for parent in cache_dir.resolve().parents:
        st = os.stat(parent)
        if st.st_uid not in (0, os.geteuid()) or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            raise error(f"cache directory {cache_dir}: {parent} above it could be changed by "
                        f"another user (owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}): "
                        "not loading code from it (set SOFTSWITCH_CACHE)")


@contextmanager
def locked(cache_dir: Path, name: str) -> Iterator[None]:
    """Hold the build lock of ``name`` (another process building it waits here)."""
    with open(cache_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prune(cache_dir: Path, prefixes: tuple[str, ...], suffix: str, keep: int) -> None:
    """Delete all but the ``keep`` most recently used files ``<prefix>*<suffix>`` of each prefix,
    and their lock files (a process still running one keeps its copy; a file deleted is built
    again when needed)."""
    def last_used(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except FileNotFoundError:       # another process pruned it meanwhile
            return 0.0
    for prefix in prefixes:
        files = sorted(cache_dir.glob(f"{prefix}*{suffix}"), key=last_used, reverse=True)
        for old in files[keep:]:
            old.unlink(missing_ok=True)
            (cache_dir / (old.name[:-len(suffix)] + ".lock")).unlink(missing_ok=True)


class Runner:
    """Runs build steps one at a time, each in a process group of its own; ``cancel`` stops
    the one under way and refuses the next."""

    def __init__(self, error: type[Exception] = CacheError):
        self.error = error
        self._running: subprocess.Popen | None = None
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        proc = self._running
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def run(self, cmd: list[str], what: str) -> None:
        if self._cancelled:
            raise self.error("cancelled: the switch is stopping")
        try:
            proc = subprocess.Popen([sys.executable, "-m", "softswitch.build_step", *cmd], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as e:
            raise self.error(f"{what} cannot run: {e}") from None
        self._running = proc
        if self._cancelled:            # cancel() came between the check above and the start
            self.cancel()
        try:
            out, err = proc.communicate(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise self.error(f"{what} took over {BUILD_TIMEOUT_S} s") from None
        finally:
            self._running = None
        if self._cancelled:
            raise self.error("cancelled: the switch is stopping")
        if proc.returncode != 0:
            tail = "\n".join((err or out).strip().splitlines()[-5:])
            raise self.error(f"{what} failed (exit {proc.returncode}): {tail}")
