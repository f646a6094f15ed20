"""softswitch (and BMv2) against p4c's own STF corpus.

    python -m benchmarks.p4c_corpus --p4c-src DIR [--targets softswitch,softswitch-native,bmv2] [--only GLOB]

For every ``testdata/p4_16_samples/*-bmv2.p4`` of the p4c source tree DIR with a ``.stf``
beside it: compile with p4c-bm2-ss into a temporary directory (never into this repository),
run the STF test on softswitch (in process) and on BMv2 where simple_switch is installed,
and print one line per program and target: passed; failed with the first difference (port,
expected and actual bytes); did not compile; uses a feature softswitch lacks (named); the
test could not run (named). A summary line per target at the end; everything also in
out/p4c_corpus.json. A benchmark, not a test: it takes many minutes (run it niced).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from softswitch.pipeline.errors import ProgramError
from softswitch.stf import StfError, Unsupported, run_stf

OUT = Path(__file__).resolve().parents[1] / "out" / "p4c_corpus.json"
COMPILE_TIMEOUT_S = 300
PASSED, FAILED, NO_COMPILE, LACKS, CANNOT_RUN = "passed", "failed", "did not compile", "lacks feature", "cannot run"
NOT_V1MODEL = "not v1model"      # a PSA program (psa_switch's, p4c-bm2-psa): neither target here runs it


def corpus(p4c_src: Path, only: str | None) -> list[tuple[Path, Path]]:
    samples = p4c_src / "testdata" / "p4_16_samples"
    if not samples.is_dir():
        sys.exit(f"p4c_corpus: {samples} is not a directory (give the root of a p4c source tree)")
    out = []
    for p4 in sorted(samples.glob("*-bmv2.p4")):
        stf = p4.with_suffix(".stf")
        if stf.exists() and (only is None or fnmatch.fnmatch(p4.name, only)):
            out.append((p4, stf))
    return out


def compile_program(p4c: str, p4: Path, outdir: Path) -> tuple[Path | None, str]:
    js = outdir / (p4.stem + ".json")
    try:
        r = subprocess.run([p4c, "-I", str(p4.parent), "-o", str(js), str(p4)], capture_output=True, text=True,
                           timeout=COMPILE_TIMEOUT_S, cwd=outdir)
    except subprocess.TimeoutExpired:
        return None, f"p4c-bm2-ss took more than {COMPILE_TIMEOUT_S} s"
    if r.returncode != 0 or not js.exists():
        lines = [l for l in (r.stderr or r.stdout).splitlines() if "error" in l.lower()] or (r.stderr or "").splitlines()
        return None, (lines[0] if lines else f"exit status {r.returncode}")[:300]
    return js, ""


def run_one(js: Path, stf: Path, target: str) -> dict:
    t0 = time.monotonic()
    try:
        r = run_stf(js, stf, target)
    except ProgramError as e:
        return {"outcome": LACKS, "detail": str(e)[:300]}
    except Unsupported as e:
        return {"outcome": LACKS if target.startswith("softswitch") else CANNOT_RUN, "detail": str(e)[:300]}
    except StfError as e:
        return {"outcome": CANNOT_RUN, "detail": f"STF: {e}"[:300]}
    except Exception as e:       # a runner or target bug: named, counted, never hidden
        return {"outcome": CANNOT_RUN, "detail": f"{type(e).__name__}: {e}"[:300]}
    res = {"outcome": PASSED if r.passed else FAILED, "seconds": round(time.monotonic() - t0, 2),
           "packets": r.packets_sent, "failures": r.failures[:5], "not_run": r.not_run}
    d = r.first_difference
    if d is not None:
        res["first_difference"] = {"port": d.port, "frame": d.index, "reason": d.reason,
                                   "expected": d.expected, "actual": d.actual}
    return res


def describe(res: dict) -> str:
    o = res["outcome"]
    if o == FAILED:
        d = res.get("first_difference")
        if d:
            return (f"failed: port {d['port']} frame {d['frame']}: {d['reason']}; "
                    f"expected {d['expected']} actual {d['actual']}")
        return f"failed: {'; '.join(res['failures'])}"
    if o == PASSED:
        return "passed"
    return f"{o}: {res.get('detail', '')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p4c-src", required=True, type=Path, help="root of a p4c source tree (testdata/...)")
    ap.add_argument("--targets", default="softswitch,bmv2",
                    help="comma-separated: softswitch, softswitch-native (its native data path), bmv2")
    ap.add_argument("--only", help="only programs whose file name matches this glob")
    ap.add_argument("--p4c", default=shutil.which("p4c-bm2-ss") or "p4c-bm2-ss", help="the compiler")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if "bmv2" in targets and shutil.which("simple_switch") is None:
        print("p4c_corpus: simple_switch is not on PATH: BMv2 skipped")
        targets.remove("bmv2")
    if shutil.which(args.p4c) is None and not Path(args.p4c).exists():
        sys.exit(f"p4c_corpus: {args.p4c} not found (install p4c or pass --p4c)")
    programs = corpus(args.p4c_src, args.only)
    results = []
    with tempfile.TemporaryDirectory(prefix="p4c-corpus-") as tmp:
        for p4, stf in programs:
            row = {"program": p4.name}
            if re.search(r'#include\s*[<"](?:bmv2/)?psa\.p4[>"]', p4.read_text(errors="replace")):
                js, miss = None, {"outcome": NOT_V1MODEL, "detail": "PSA program (psa.p4)"}
            else:
                js, err = compile_program(args.p4c, p4, Path(tmp))
                miss = {"outcome": NO_COMPILE, "detail": err}
            row["compiled"] = js is not None
            for t in targets:
                row[t] = run_one(js, stf, t) if js else miss
                print(f"{p4.name:50s} {t:10s} {describe(row[t])}", flush=True)
            results.append(row)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"programs": results}, indent=1))    # as it goes: a long run
    summary = {t: dict(Counter(r[t]["outcome"] for r in results)) for t in targets}
    both = [r["program"] for r in results if "bmv2" in r and "softswitch" in r
            and r["bmv2"]["outcome"] == PASSED and r["softswitch"]["outcome"] != PASSED]
    summary["bmv2 passes, softswitch does not"] = len(both)
    args.out.write_text(json.dumps({"programs": results, "summary": summary, "softswitch_behind_bmv2": both},
                                   indent=1))
    print(f"{len(programs)} programs; " + "; ".join(
        f"{t}: " + ", ".join(f"{n} {o}" for o, n in sorted(summary[t].items())) for t in targets)
          + f"; BMv2 passes and softswitch not: {len(both)} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
