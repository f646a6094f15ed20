"""A bench run from a command line: `python -m benchmarks.NAME` (the same run as `aifabric bench
NAME`) parses the bench module's own arguments and runs it; a bench that plans its runs before
any lab (train, fidelity) turns a plan that cannot be made into the command's error."""
from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any, Callable

from aifabric.workloads import WorkloadError


def bench_main(bench: ModuleType, doc: str, argv: list[str] | None = None, target: bool = False) -> int:
    """``bench.add_arguments`` (and ``--target``, which `aifabric bench` gives every bench, where
    the bench does not add it), then ``bench.run_args``; ``doc``'s first paragraph is the help."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    bench.add_arguments(ap)
    if target:
        ap.add_argument("--target", default="softswitch")
    return bench.run_args(ap.parse_args(argv))


def run_planned(plan_of: Callable[[argparse.Namespace], Any], run: Callable[..., int],
                args: argparse.Namespace) -> int:
    """``run(plan_of(args), args.json, args.png)``; a plan refused (WorkloadError, ValueError
    naming what does not fit) is printed as the command's error, exit status 2."""
    try:
        plan = plan_of(args)
    except (WorkloadError, ValueError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2
    return run(plan, args.json, args.png)
