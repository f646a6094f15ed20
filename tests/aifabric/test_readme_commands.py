"""Every aifabric command line README.md shows gets through its parser and every check made
before a fabric comes up, so none can end in a traceback there (`bench collectives` once crashed
on every invocation in its checks, and then on the P4 build option it did not have, and nothing
ran that line). Commands that need a running lab
(fail, restore, clean, controller) are parsed only; those that write files only (workload show,
compose) run whole, into a temporary directory."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BENCHMARK = re.compile(r"(?:python -m benchmarks\.|benchmarks/)([a-z0-9_]+)(?:\.py)?\b")


def readme_commands() -> list[str]:
    """The aifabric command lines of README's sh blocks (continuations joined, comments dropped;
    lines with [placeholders] are a synopsis, not a command; inline mentions are not commands)."""
    text = README.read_text()
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].split(" # ")[0].strip()
            if re.match(r"(\.venv/bin/)?aifabric ", line) and "[" not in line:
                lines.append(line)
    return sorted(set(lines))


def test_readme_shows_the_commands_this_test_runs():
    commands = readme_commands()
    assert len(commands) >= 15, commands
    for must in ("aifabric bench load-balance", "aifabric demo int", "aifabric up --topo rail", "aifabric clean"):
        assert any(must in c for c in commands), must


@pytest.mark.parametrize("line", readme_commands())
def test_a_readme_command_passes_its_checks(line, tmp_path, monkeypatch):
    from aifabric.cli import build_parser, pipeline_of
    from aifabric.cli.validate import validate

    monkeypatch.chdir(tmp_path)                        # out/... paths land in the temporary directory
    argv = shlex.split(line)[1:]
    args = build_parser().parse_args(argv)
    if args.command in ("up", "demo", "bench", "train"):
        assert pipeline_of(args).p4info is not None      # what main reads first for every fabric
    if args.command in ("up", "demo") or (args.command == "bench" and args.which not in ("train", "fidelity")):
        try:
            validate(args)
        except ValueError as e:                        # a busy port on this machine is its state, not a bug
            assert "cannot listen" in str(e), e
    elif args.command == "bench":
        from aifabric.experiments import fidelity_bench, train_bench
        (train_bench if args.which == "train" else fidelity_bench).plan_of(args)
    elif args.command == "train":
        from aifabric.cli import train_cli
        train_cli.prepare(args)
    elif args.command in ("workload", "compose"):
        from aifabric.cli import main
        assert main(argv) == 0


def readme_benchmarks() -> list[str]:
    """The benchmark programs README names (modules run as programs; library modules left out)."""
    root = README.parent / "benchmarks"
    names = set(BENCHMARK.findall(README.read_text()))
    return sorted(n for n in names if (root / f"{n}.py").is_file() and "__main__" in (root / f"{n}.py").read_text())


@pytest.mark.parametrize("name", readme_benchmarks())
def test_a_readme_benchmark_answers_help(name):
    """Each benchmark README names starts, imports what it needs and parses its options."""
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=README.parent,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr[-2000:]
