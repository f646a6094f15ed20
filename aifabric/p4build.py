"""Compile the project's P4 programs with p4c into the committed build outputs.

``make p4`` (``python -m aifabric.p4build``) rebuilds p4src/fabric.p4 into p4src/build/ and
the small feature programs under tests/p4/ into tests/p4/build/, each as BMv2 JSON plus P4Info
text, and records the compiler's version next to them. Paths are given to p4c relative to the
repository, so the outputs do not depend on where the checkout lives.

Then it writes the fabric program's names for the controller, ``controller/p4names.py``: every
table, action, action parameter, match field, counter, register, action profile and packet
metadata field of p4src/build/fabric.p4info.txtpb, and the integer constants of
p4src/include/define.p4. ``make p4names`` (``python -m aifabric.p4build --names``) writes just
that file, from the committed build, without p4c; tests/controller/test_p4names.py fails when it is stale.
"""
from __future__ import annotations

import argparse
import keyword
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
P4C = "p4c-bm2-ss"
VERSION_FILE = "p4c-version.txt"
NAMES_P4INFO = Path("p4src/build/fabric.p4info.txtpb")     # relative to the repository
NAMES_DEFINES = Path("p4src/include/define.p4")
NAMES_MODULE = Path("controller/p4names.py")


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


# --- the names module -------------------------------------------------------------------------

# P4Info object kinds -> the class that holds their names in the module, in P4Info's order.
_NAME_KINDS = (("tables", "Table"), ("actions", "Action"), ("counters", "Counter"),
               ("direct_counters", "DirectCounter"), ("meters", "Meter"), ("direct_meters", "DirectMeter"),
               ("registers", "Register"), ("action_profiles", "ActionProfile"))
_CONST = re.compile(r"^\s*const\s+[\w<>]+\s+(\w+)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)\s*;\s*(?://\s*(.*))?$")
_DEFINE = re.compile(r"^\s*#define\s+(\w+)\s+(0[xX][0-9a-fA-F]+|\d+)\s*(?://\s*(.*))?$")


def identifier(name: str) -> str:
    """The Python name of a P4Info name: without the top control, dots as underscores, upper
    case ("FabricIngress.next.hashed" -> NEXT_HASHED, "nop" -> NOP)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[0] in ("FabricIngress", "FabricEgress"):
        parts = parts[1:]
    ident = re.sub(r"\W", "_", "_".join(parts)).upper().lstrip("_")
    return ident if ident.isidentifier() and not keyword.iskeyword(ident) else f"N_{ident}"


def defined_constants(text: str) -> list[tuple[str, str, str]]:
    """(name, literal, comment) of every integer ``const`` and ``#define`` of a P4 source."""
    found = []
    for line in text.splitlines():
        m = _CONST.match(line) or _DEFINE.match(line)
        if m:
            found.append((m.group(1), m.group(2), (m.group(3) or "").strip()))
    return found


def names_source(root: Path = REPO) -> str:
    """The text of ``controller/p4names.py`` made from the build under ``root``."""
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    info = text_format.Parse((root / NAMES_P4INFO).read_text(), p4info_pb2.P4Info())
    out = [
        '"""The fabric program\'s P4 names and constants, for the controller. GENERATED: do not edit.',
        "",
        f"Made by ``make p4names`` (``python -m aifabric.p4build --names``; ``make p4`` runs it too) from",
        f"{NAMES_P4INFO} (tables, actions, parameters, match fields, counters, registers, action",
        f"profiles, packet metadata) and {NAMES_DEFINES} (integer constants). A P4 object renamed",
        "or removed takes its name out of this module, so the controller code that used it fails",
        "when it is imported; tests/controller/test_p4names.py fails while this file is stale.",
        '"""',
        "",
    ]
    for kind, cls in _NAME_KINDS:
        objects = list(getattr(info, kind))
        if not objects:
            continue
        out += ["", f"class {cls}:", f'    """P4Info {kind}."""', ""]
        seen: dict[str, str] = {}
        for obj in objects:
            ident = identifier(obj.preamble.name)
            if ident in seen:
                raise ValueError(f"{obj.preamble.name} and {seen[ident]} both make the name {cls}.{ident}")
            seen[ident] = obj.preamble.name
            out.append(f"    {ident} = {obj.preamble.name!r}")
        out.append("")
    for meta in info.controller_packet_metadata:
        cls = "".join(w.capitalize() for w in meta.preamble.name.split("_"))
        out += ["", f"class {cls}:", f'    """Fields of the {meta.preamble.name} header (@controller_header)."""', ""]
        out += [f"    {identifier(m.name)} = {m.name!r}" for m in meta.metadata]
        out.append("")
    out += ["", "# Match fields of each table, in P4Info order.", "MATCH_FIELDS: dict[str, tuple[str, ...]] = {"]
    for t in info.tables:
        out.append(f"    Table.{identifier(t.preamble.name)}: {tuple(f.name for f in t.match_fields)!r},")
    out += ["}", "", "# Parameters of each action, in P4Info order.", "ACTION_PARAMS: dict[str, tuple[str, ...]] = {"]
    for a in info.actions:
        out.append(f"    Action.{identifier(a.preamble.name)}: {tuple(p.name for p in a.params)!r},")
    out += ["}", "", f"# Integer constants of {NAMES_DEFINES}."]
    for name, literal, comment in defined_constants((root / NAMES_DEFINES).read_text()):
        if name.startswith("__"):
            continue
        line = f"{name} = {literal}"
        out.append(f"{line}  # {comment}" if comment else line)
    return "\n".join(out) + "\n"


def write_names(root: Path = REPO) -> Path:
    path = root / NAMES_MODULE
    path.write_text(names_source(root))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aifabric.p4build", description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="only these programs (by file stem, e.g. fabric)")
    ap.add_argument("--names", dest="names_only", action="store_true",
                    help=f"only write {NAMES_MODULE} from the committed build (no p4c needed)")
    args = ap.parse_args(argv)
    if args.names_only:
        print(f"p4build: wrote {write_names().relative_to(REPO)} from {NAMES_P4INFO} and {NAMES_DEFINES}")
        return 0
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
    if any(p.outputs()[1] == REPO / NAMES_P4INFO for p in selected):
        print(f"p4build: wrote {write_names().relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
