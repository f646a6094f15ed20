"""The native generator keeps a program's text out of the C it writes: every name of the
fabric program renamed to C that would end a comment or a string and define a function still
builds, and the C holds none of it; whatever the generator trips on is a named refusal
(Unsupported), never another exception."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from softswitch.native.build import missing
from softswitch.native.codegen import Unsupported, generate
from softswitch.pipeline.program import Program

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

C_PAYLOAD = 'x */ }; int pwn(void) { return system("touch /tmp/pwned"); } /* " \\n#include <x>'


def _names(js) -> set[str]:
    """Every name the program gives (headers, fields, actions, tables, parser states, ...) but
    those of the metadata simple_switch itself knows by name."""
    target = {"standard_metadata", "intrinsic_metadata", "queueing_metadata", "scalars"}
    target_types = {h["header_type"] for h in js["headers"] if h["name"] in target}
    out = set()
    for key in ("headers", "header_stacks", "actions", "register_arrays", "counter_arrays", "meter_arrays",
                "calculations", "field_lists"):
        out.update(item["name"] for item in js.get(key, []))
    for t in js["header_types"]:
        out.add(t["name"])
        if t["name"] not in target_types:
            out.update(f[0] for f in t["fields"])
    for pipe in js.get("pipelines", []):
        out.add(pipe["name"])
        for kind in ("tables", "conditionals", "action_calls", "action_profiles"):
            out.update(x["name"] for x in pipe.get(kind, []))
    for parser in js.get("parsers", []):
        out.update(s["name"] for s in parser.get("parse_states", []))
    skip = target | target_types | {f[0] for t in js["header_types"] if t["name"] in target_types for f in t["fields"]}
    return {n for n in out if n not in skip}


def _vocabulary(node, words: set | None = None) -> set:
    """The JSON format's own words (keys; values of type, op, match_type, algo): a name that is
    one too is left as it is."""
    words = set() if words is None else words
    if isinstance(node, dict):
        for k, v in node.items():
            words.add(k)
            if k in ("type", "op", "match_type", "algo") and isinstance(v, str):
                words.add(v)
            if k == "next_tables" and isinstance(v, dict):      # its keys are action names
                v = list(v.values())
            _vocabulary(v, words)
    elif isinstance(node, list):
        for v in node:
            _vocabulary(v, words)
    return words


def _rename_all(node, names: dict):
    """A copy of ``node`` with every string that is a key of ``names`` (values and keys) renamed."""
    if isinstance(node, dict):
        return {names.get(k, k): _rename_all(v, names) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename_all(v, names) for v in node]
    return names.get(node, node) if isinstance(node, str) else node


def test_no_name_of_the_json_reaches_the_c():
    """Every name of the fabric program renamed to C that would end a comment, a string, a
    statement and define a function: it builds (no name is pasted into the C), and the C holds
    none of it (it has no comment or string but its own)."""
    import re
    from softswitch.native.build import NativeBuilder
    js = json.loads((REPO / "p4src/build/fabric.json").read_text())
    vocabulary = _vocabulary(js)
    names = {name: f"{C_PAYLOAD} {i}" for i, name in enumerate(sorted(_names(js) - vocabulary))}
    text = json.dumps(_rename_all(js, names))
    assert text.count("pwn(void)") >= len(names) > 300
    source = generate(Program(text)).source
    assert "pwn" not in source and "system(" not in source
    strings = set(re.findall(r'"[^"\n]*"', source))
    assert strings <= {'"objects.h"', '"pipeline_support.h"', '"pipeline_helpers.h"'}, strings
    NativeBuilder(with_dataplane=False).build(source)


def test_a_generator_failure_is_a_named_refusal(monkeypatch):
    """Whatever the generator trips on in a program that loaded is Unsupported, naming it (the
    loader catches that one class and runs the Python path), never another exception."""
    from softswitch.native import codegen

    def broken(self, pipe):
        raise KeyError("a node the generator did not expect")
    monkeypatch.setattr(codegen.controls.Controls, "pipeline", broken)
    with pytest.raises(Unsupported, match="KeyError.*a node the generator did not expect"):
        generate(Program((REPO / "tests/p4/build/basic_router.json").read_text()))
