"""Which of p4c's temporaries softswitch keeps in action locals (action_locals.py): only those
one action names, where that action can run at most once per packet pass."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from softswitch.pipeline.action_locals import action_locals

REPO = Path(__file__).resolve().parents[2]


def _f(name: str) -> dict:
    return {"type": "field", "value": ["scalars", name]}


def _program() -> dict:
    assign = lambda dst, src: {"op": "assign", "parameters": [_f(dst), src]}        # noqa: E731
    return {
        "headers": [{"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True}],
        "actions": [
            {"name": "a", "id": 0, "primitives": [assign("tmp", _f("x")), assign("x", _f("tmp"))]},
            {"name": "b", "id": 1, "primitives": [assign("tmp_b", {"type": "hexstr", "value": "0x1"})]},
            {"name": "c", "id": 2, "primitives": [assign("tmp_c", {"type": "hexstr", "value": "0x1"})]},
        ],
        "pipelines": [{"name": "ingress", "tables": [
            {"name": "t1", "action_ids": [0, 1], "default_entry": {"action_id": 1}},
            {"name": "t2", "action_ids": [2], "default_entry": {"action_id": 2}},
        ], "action_calls": []}],
    }


def test_a_temporary_one_action_names_is_a_local_and_a_shared_field_is_not():
    # x is read by b's table key: it stays a slot; tmp (a alone) is a local
    js = _program()
    js["pipelines"][0]["tables"][0]["key"] = [{"match_type": "exact", "target": ["scalars", "x"]}]
    assert action_locals(js) == {0: ("tmp",), 1: ("tmp_b",), 2: ("tmp_c",)}


def test_an_action_that_may_run_twice_in_a_pass_keeps_its_temporaries_in_slots():
    js = _program()
    js["pipelines"][0]["tables"][1]["action_ids"].append(1)        # b in two tables
    assert 1 not in action_locals(js)
    js = _program()
    js["pipelines"][0]["action_calls"] = [{"action_id": 2}]        # c also called directly
    assert 2 not in action_locals(js)
    js = _program()
    js["pipelines"][0]["tables"][1]["entries"] = [{"action_entry": {"action_id": 0}}]   # a: t1's and t2's
    assert 0 not in action_locals(js)


def test_what_else_can_see_a_field_keeps_it_in_its_slot():
    for where in ({"field_lists": [{"id": 1, "elements": [{"type": "field", "value": ["scalars", "tmp_c"]}]}]},
                  {"calculations": [{"name": "h", "input": [_f("tmp_c")]}]},
                  {"field_aliases": [["standard_metadata.x", ["scalars", "tmp_c"]]]}):
        js = {**_program(), **copy.deepcopy(where)}
        assert 2 not in action_locals(js), where
    js = _program()                                            # the header as a whole: no locals at all
    js["actions"][1]["primitives"].append({"op": "assign_header", "parameters": [
        {"type": "header", "value": "scalars"}, {"type": "header", "value": "scalars"}]})
    assert action_locals(js) == {}


def test_malformed_json_has_no_locals_and_the_fabric_program_has_many():
    js = _program()
    js["pipelines"][0]["tables"][0]["entries"] = ["not an entry"]
    assert action_locals(js) == {}
    fabric = action_locals(json.loads((REPO / "p4src/build/fabric.json").read_text()))
    assert sum(map(len, fabric.values())) > 300
