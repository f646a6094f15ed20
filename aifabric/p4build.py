"""Compile the project's P4 programs with p4c into the committed build outputs.

``make p4`` (``python -m aifabric.p4build``) rebuilds p4src/fabric.p4 into p4src/build/ and
the small feature programs under tests/p4/ into tests/p4/build/, each as BMv2 JSON plus P4Info
text, and records the compiler's version next to them. Paths are given to p4c relative to the
repository, so the outputs do not depend on where the checkout lives.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
P4C = "p4c-bm2-ss"
VERSION_FILE = "p4c-version.txt"


@dataclass(frozen=True)
class P4Program:
    source: Path          # relative to the repository
    out_dir: Path         # relative to the repository

    @property
    def name(self) -> str:
        return self.source.stem

    def outputs(self, root: Path = REPO) -> tuple[Path, Path]:
        d = root / self.out_dir
        return d / f"{self.name}.json", d / f"{self.name}.p4info.txtpb"


def programs() -> list[P4Program]:
    progs = [P4Program(Path("p4src/fabric.p4"), Path("p4src/build"))]
    progs += [P4Program(p.relative_to(REPO), Path("tests/p4/build"))
              for p in sorted((REPO / "tests/p4").glob("*.p4"))]
    return progs


def p4c_version(p4c: str = P4C) -> str | None:
    """The version line of p4c on PATH ("Version 1.2.4.8 (SHA: ... BUILD: ...)"), or None
    when it is not installed. p4c prints its own path first; that line is left out."""
    if shutil.which(p4c) is None:
        return None
    out = subprocess.run([p4c, "--version"], capture_output=True, text=True)
    lines = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return next((ln.strip() for ln in lines if ln.strip().startswith("Version")), lines[-1] if lines else "")


def release(version: str) -> str:
    """The release number of a version line ("1.2.4.8"): builds of one release from a source
    archive and from git differ in their SHA, not in what they write."""
    m = re.search(r"Version\s+(\S+)", version)
    return m.group(1) if m else version.strip()


def compile_program(prog: P4Program, out_root: Path = REPO, p4c: str = P4C) -> tuple[Path, Path]:
    """Compile one program; outputs go under ``out_root`` (the repository by default)."""
    json_out, p4info_out = prog.outputs(out_root)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [p4c, "--arch", "v1model", "--std", "p4-16",
           "--p4runtime-files", str(p4info_out), "-o", str(json_out), str(prog.source)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"p4c failed on {prog.source}:\n{res.stderr.strip()}")
    return json_out, p4info_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aifabric.p4build", description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="only these programs (by file stem, e.g. fabric)")
    args = ap.parse_args(argv)
    version = p4c_version()
    if version is None:
        print(f"p4build: {P4C} is not on PATH; see p4src/README.md for how to get p4c", file=sys.stderr)
        return 2
    selected = [p for p in programs() if not args.names or p.name in args.names]
    unknown = set(args.names) - {p.name for p in programs()}
    if unknown:
        print(f"p4build: unknown program(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for i, prog in enumerate(selected, 1):
        print(f"[{i}/{len(selected)}] {prog.source}", flush=True)
        try:
            compile_program(prog)
        except RuntimeError as e:
            print(f"p4build: {e}", file=sys.stderr)
            return 1
    for out_dir in {p.out_dir for p in selected}:
        (REPO / out_dir / VERSION_FILE).write_text(version + "\n")
    print(f"p4build: {len(selected)} program(s) built with {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
