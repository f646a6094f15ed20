"""softswitch as it was at an earlier revision, for a benchmark to run beside today's.

A speed goal such as "a third of today's cost per packet" is only checked fairly when the
code of that day runs on the same machine, in the same run, on the same program and frames
as the code of now. ``prepare(rev)`` takes the revision's tree from git (``git archive``,
into a directory of its own), builds its compiled packet path for the given programs where
that revision had one, and writes an executable that starts its softswitch, leaving out the
command-line options the harness passes that the revision did not know yet (its ``--help``
says which it knows).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WRAPPER = '''#!{python}
# softswitch at {commit}, run with the options it knows (benchmarks/past_softswitch.py)
import sys
KNOWN = {known!r}
args, rest = [], sys.argv[1:]
while rest:
    arg = rest.pop(0)
    if arg.startswith("--") and arg.split("=")[0] not in KNOWN:
        if "=" not in arg and rest and not rest[0].startswith("-"):
            rest.pop(0)                                 # the unknown option's value
        continue
    args.append(arg)
sys.path.insert(0, {tree!r})
from softswitch.cli import main
sys.exit(main(args))
'''


class PastError(Exception):
    """The revision cannot be run; the message says why."""


def _git(*args: str) -> bytes:
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True)
    if res.returncode != 0:
        raise PastError(f"git {' '.join(args)}: {res.stderr.decode(errors='replace').strip()}")
    return res.stdout


def prepare(rev: str, workdir: Path, programs: list[Path], compiled_path: bool = True) -> tuple[str, Path]:
    """(short commit, executable) of softswitch at ``rev``, its tree in ``workdir``; its
    compiled path built for ``programs`` (BMv2 JSON files) where it had one and
    ``compiled_path`` (False: the harness runs every softswitch on its Python path)."""
    commit = _git("rev-parse", "--short", f"{rev}^{{commit}}").decode().strip()
    tree = workdir / commit
    if not (tree / "softswitch" / "cli.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=_git("archive", commit), check=True)
    env_path = {**os.environ, "PYTHONPATH": str(tree)}
    helped = subprocess.run([sys.executable, "-m", "softswitch.cli", "--help"], cwd=tree, env=env_path,
                            capture_output=True, text=True)
    if helped.returncode != 0:
        raise PastError(f"softswitch at {commit} does not start: {helped.stderr.strip()[-300:]}")
    known = sorted(set(re.findall(r"(--[a-z][a-z0-9-]*)", helped.stdout)))
    if compiled_path and "--compiled" in known:
        build = ("import sys\nfrom softswitch.pipeline.compiled import PathCompiler\n"
                 "from softswitch.pipeline.program import Program\n"
                 "for path in sys.argv[1:]:\n    PathCompiler().build(Program(open(path, 'rb').read()))\n")
        res = subprocess.run([sys.executable, "-c", build, *map(str, programs)], cwd=tree, env=env_path,
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise PastError(f"softswitch at {commit}: compiled path build failed: {res.stderr.strip()[-300:]}")
    exe = tree / "run-softswitch"
    exe.write_text(WRAPPER.format(python=sys.executable, commit=commit, known=known, tree=str(tree)))
    exe.chmod(0o755)
    return commit, exe
