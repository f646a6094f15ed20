"""Programs of the same text share one parsed JSON (softswitch/pipeline/program.py: a process
serving many switches holds it once), so nothing that reads it may change it: a Program, its
P4Runtime map and the native generator leave every program's JSON as the text says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from softswitch.native import codegen
from softswitch.p4runtime.pipeline import Pipeline
from softswitch.pipeline.program import Program

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = sorted([*REPO.glob("p4src/build/*.json"), *REPO.glob("tests/p4/build/*.json")])


def test_the_same_text_gives_the_same_parsed_json():
    text = (REPO / "p4src/build/fabric.json").read_bytes()
    assert Program(text).json is Program(text).json
    other = json.dumps({**json.loads(text), "program": "another"}).encode()
    assert Program(other).json is not Program(text).json


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_reading_a_program_leaves_its_json_as_the_text_says(program: Path):
    p4info = program.with_name(program.stem + ".p4info.txtpb")
    if not p4info.exists():
        pytest.skip(f"no P4Info beside {program.name}")
    text = program.read_bytes()
    pipeline = Pipeline(text_format.Parse(p4info.read_text(), p4info_pb2.P4Info()), text, None)
    try:
        codegen.generate(pipeline.program)
    except codegen.Unsupported:
        pass                                   # refused: it read what it read
    assert pipeline.program.json == json.loads(text)
