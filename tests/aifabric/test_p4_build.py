"""The committed P4 build outputs are what p4c makes of the sources today.

Runs where the p4c release that made them (p4src/build/p4c-version.txt, tests/p4/build/...) is
installed, whatever its build SHA; anywhere else it says why it skips: another p4c release writes
different JSON."""
from __future__ import annotations

import pytest

from aifabric.p4build import REPO, VERSION_FILE, compile_program, p4c_version, programs, release

PROGRAMS = programs()


@pytest.mark.p4c
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_build_outputs_are_current(prog, tmp_path):
    installed = p4c_version()
    if installed is None:
        pytest.skip("p4c-bm2-ss is not on PATH")
    recorded = (REPO / prog.out_dir / VERSION_FILE).read_text().strip()
    if release(installed) != release(recorded):
        pytest.skip(f"p4c here is release {release(installed)}; the outputs were made by {release(recorded)}")
    fresh_json, fresh_p4info = compile_program(prog, out_root=tmp_path)
    committed_json, committed_p4info = prog.outputs()
    assert committed_json.exists() and committed_p4info.exists(), f"{prog.source} has no committed outputs"
    assert fresh_json.read_text() == committed_json.read_text(), \
        f"{committed_json} is stale: run `make p4` and commit the result"
    assert fresh_p4info.read_text() == committed_p4info.read_text(), \
        f"{committed_p4info} is stale: run `make p4` and commit the result"


def test_every_program_has_outputs():
    missing = [str(p.source) for p in PROGRAMS if not all(f.exists() for f in p.outputs())]
    assert not missing, f"no committed build outputs for: {', '.join(missing)}"


def test_release_ignores_the_build_sha():
    assert release("Version 1.2.4.8 (SHA:  BUILD: Release)") == "1.2.4.8"
    assert release("p4c-bm2-ss\nVersion 1.2.4.8 (SHA: 32893b7e87 BUILD: Release)") == "1.2.4.8"
    assert release("Version 1.2.5.0 (SHA: abc BUILD: Debug)") != release("Version 1.2.4.8 (SHA: abc BUILD: Debug)")
