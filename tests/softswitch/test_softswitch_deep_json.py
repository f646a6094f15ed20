"""A deeply nested JSON, as a pipeline file or a pushed config, is an error naming the problem
(one line and exit status 2 on the command line, INVALID_ARGUMENT over P4Runtime), never a
RecursionError; so is an expression nested past what the code generator takes."""
from __future__ import annotations

import json

import grpc
import pytest

from p4rt_support import Client, require_program, running_switch
from softswitch.pipeline.errors import ProgramError
from softswitch.pipeline.expressions import MAX_EXPRESSION_DEPTH
from softswitch.pipeline.program import Program
from test_softswitch_cli import BASIC_JSON, _assert_one_line_error, _free_port, run_cli

DEPTH = 100_000


def deep_json(depth: int = DEPTH) -> str:
    """An object whose first key holds an object ... ``depth`` levels down."""
    return '{"a": ' * depth + "1" + "}" * depth


def with_deep_condition(levels: int) -> str:
    """basic_router with its first conditional testing ``port + 1 + 1 ...`` (``levels`` deep);
    written as text, since json.dumps cannot nest that deep either."""
    js = json.loads(BASIC_JSON.read_text())
    cond = next(c for p in js["pipelines"] for c in p.get("conditionals", []))
    cond["expression"] = "HOLE"
    plus = '{"type": "expression", "value": {"op": "+", "left": '
    one = ', "right": {"type": "hexstr", "value": "0x1"}}}'
    field = '{"type": "field", "value": ["standard_metadata", "ingress_port"]}'
    expr = ('{"type": "expression", "value": {"op": "d2b", "left": null, "right": '
            + plus * levels + field + one * levels + "}}")
    return json.dumps(js).replace('"HOLE"', expr)


def test_deep_json_file_is_one_line_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(deep_json())
    res = run_cli(str(path), "--grpc-server-addr", f"127.0.0.1:{_free_port()}")
    _assert_one_line_error(res, "nested too deeply")
    assert res.returncode == 2


def test_deep_json_push_is_invalid_argument():
    prog = require_program("basic_router")
    with running_switch(ports={}, cpu_port=None) as (_sw, addr):
        c = Client(addr)
        try:
            c.open_stream()
            with pytest.raises(grpc.RpcError) as e:
                c.set_pipeline(prog, device_config=deep_json().encode())
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
            assert "nested too deeply" in e.value.details()
            c.set_pipeline(prog)        # the server goes on: the real program is taken
        finally:
            c.close()


def test_deep_expression_inside_a_program():
    Program(with_deep_condition(MAX_EXPRESSION_DEPTH - 2))
    # past the bound, and past what json.loads or any walk of the JSON can follow
    for levels in (MAX_EXPRESSION_DEPTH, 400, DEPTH // 2):
        with pytest.raises(ProgramError, match="nested"):
            Program(with_deep_condition(levels))
