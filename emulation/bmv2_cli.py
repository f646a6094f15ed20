"""BMv2's Thrift CLI (``simple_switch_CLI``), run with this project's Python.

BMv2 built from source installs ``simple_switch_CLI`` as a Python script starting with
``#!/usr/bin/env python3``: run as a command, it gets whichever ``python3`` comes first on PATH
(a pyenv, conda or venv one), which may lack the ``thrift`` module; the CLI then dies with a
traceback. Its only other imports are BMv2's own modules, whose directory the script adds to
``sys.path`` itself. So the project runs the script with its own interpreter (``sys.executable``,
the venv's, which gets ``thrift`` from the project's install) whatever PATH says, and names a
missing piece in one line (`Bmv2CliError`) instead of showing a traceback. A CLI that is not a
Python script (a wrapper of a packaged BMv2) is run as it is.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

BMV2_CLI = "simple_switch_CLI"
THRIFT_HOST = "127.0.0.1"       # the CLI's default, "localhost", may resolve to ::1 first
# BMv2's Python modules the CLI imports: the script's own, its base, the Thrift bindings
BMV2_MODULES = ("sswitch_CLI", "runtime_CLI", "bmpy_utils", "bm_runtime", "sswitch_runtime")
THIRD_PARTY = ("thrift",)


class Bmv2CliError(RuntimeError):
    """The CLI could not be run or its command failed; the message is one line."""


@dataclass(frozen=True)
class CliScript:
    path: str               # the CLI on PATH
    python: str | None      # the interpreter that runs it (None: not a Python script, run as is)
    module_path: list[str]  # the directories the script adds to sys.path (BMv2's Python modules)

    def command(self, thrift_port: int) -> list[str]:
        head = [self.python, self.path] if self.python else [self.path]
        return [*head, "--thrift-ip", THRIFT_HOST, "--thrift-port", str(thrift_port)]


def _module_found(name: str, paths: Sequence[str]) -> bool:
    for d in paths:
        if Path(d, f"{name}.py").is_file() or Path(d, name, "__init__.py").is_file():
            return True
    return False


def find_cli() -> CliScript:
    """The CLI and the interpreter for it; Bmv2CliError naming what is missing."""
    path = shutil.which(BMV2_CLI)
    if path is None:
        raise Bmv2CliError(f"{BMV2_CLI} is not on PATH (BMv2 is not installed, or was built without --with-thrift)")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as err:
        raise Bmv2CliError(f"{path} cannot be read: {err.strerror}") from None
    first = text.splitlines()[0] if text else ""
    if not (first.startswith("#!") and "python" in first):
        return CliScript(path, None, [])
    paths = re.findall(r"""sys\.path\.(?:append|insert)\((?:\d+,\s*)?["']([^"']+)["']\)""", text)
    missing = [m for m in THIRD_PARTY if importlib.util.find_spec(m) is None]
    if missing:
        raise Bmv2CliError(
            f"{BMV2_CLI} needs the Python module {', '.join(missing)}, missing from {sys.executable} "
            f"(the project's interpreter, which runs the CLI): run `make setup` (it installs the project with thrift)")
    search = [*paths, *sys.path]
    absent = [m for m in BMV2_MODULES if not _module_found(m, search)]
    if absent:
        raise Bmv2CliError(
            f"{path} needs BMv2's Python modules {', '.join(absent)}, found neither in "
            f"{', '.join(paths) or '(no directory the script names)'} nor on {sys.executable}'s path: "
            f"reinstall BMv2 (configure --with-thrift; make install)")
    return CliScript(path, sys.executable, paths)


_IMPORT_ERROR = re.compile(r"^(?:ModuleNotFoundError|ImportError): .*$", re.M)
_LAST_EXCEPTION = re.compile(r"^\w+(?:\.\w+)*(?:Error|Exception)\b.*$", re.M)


def run_cli(thrift_port: int, commands: Sequence[str], timeout: float = 30.0) -> str:
    """Run ``commands`` (``set_queue_rate 100 2``, ...) through the CLI on 127.0.0.1:thrift_port;
    returns what the CLI printed. Bmv2CliError, in one line, when the CLI is missing or cannot
    import what it needs, cannot reach the switch, or a command fails."""
    cli = find_cli()
    cmd = cli.command(thrift_port)
    try:
        result = subprocess.run(cmd, input="\n".join(commands) + "\n", capture_output=True, text=True,
                                timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise Bmv2CliError(f"{BMV2_CLI} on port {thrift_port}: no answer within {timeout:g} s") from None
    answer = (result.stdout + result.stderr).strip()
    shown = f"{BMV2_CLI} ({' '.join(cmd[:2]) if cli.python else cli.path}) on port {thrift_port}"
    if (m := _IMPORT_ERROR.search(result.stderr)) is not None:
        raise Bmv2CliError(f"{shown}: {m.group(0)}")
    if "Could not connect to thrift client" in answer:
        raise Bmv2CliError(f"{shown}: nothing answers on {THRIFT_HOST}:{thrift_port} (is the switch running?)")
    if "Traceback (most recent call last)" in result.stderr:
        last = _LAST_EXCEPTION.findall(result.stderr)
        raise Bmv2CliError(f"{shown}: {last[-1] if last else result.stderr.strip().splitlines()[-1]}")
    bad = [line.strip() for line in answer.splitlines() if "Error" in line or "Invalid" in line]
    if result.returncode != 0 or bad:
        what = bad[0] if bad else (answer.splitlines()[-1] if answer else f"exit status {result.returncode}")
        raise Bmv2CliError(f"{shown}: {list(commands)!r} failed: {what}")
    return answer


__all__ = ["BMV2_CLI", "Bmv2CliError", "CliScript", "find_cli", "run_cli"]
