"""A pushed BMv2 JSON program cannot run code in the switch: whatever a string or a number of
the JSON holds, softswitch's loader either builds the program or refuses it with ProgramError,
and what it generates holds the JSON's text only inside comments and string literals.

The variants come from the committed programs (tests/p4/build/*.json smallest first, then
p4src/build/fabric.json). Every scalar of a program has a *key path*: the dict keys from the
top; list positions collapsed to ``[*]``, except in short lists of scalars that are records
(``["hdr", "field"]``, ``["f", 8, false]``); every object tagged with its ``op`` or ``type`` (a
register name and a field name in ``parameters`` are different paths); the keys of
``next_tables`` collapsed to ``*``; and an operand nested inside an operand of an expression
described by its own operator only (the expression compiler is the same code at every depth).
Each distinct key path is tried once, in the first program that has it, at its first
occurrence there: replaced by each of `payloads` (code in every form a context could run, and
a huge number) and, where the JSON has a number, a bool or a null, by NUMBER_PAYLOADS too; a
string is also renamed wherever it occurs, ``next_tables`` keys included, by each of RENAMES,
so that a name which must match elsewhere reaches the code generator. When this was written
that made 770 key paths (121 of them only in fabric.json) and 8,470 variants: about 200 s of CPU
on the 2-core development machine, nine tenths of it loading fabric.json's 1,330 variants (0.15 s
each), so the sites are shared among a worker process per core (82 s on 2 cores).

Each variant must load or raise ProgramError (any other exception fails), must not set the
sentinel or create the marker file the payloads write, must never make the generator produce
source that does not compile (that would mean JSON text got into it), and where it loads,
``__import__`` may appear in the generated source only inside a comment or a string literal.
"""
from __future__ import annotations

import builtins
import contextlib
import io
import json
import multiprocessing
import os
import resource
import tokenize
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as pb

from p4rt_support import Client, require_program, running_switch
from softswitch.pipeline.errors import ProgramError
from softswitch.pipeline.program import Program

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((REPO / "tests/p4/build").glob("*.json"), key=lambda p: p.stat().st_size) + \
    [REPO / "p4src/build/fabric.json"]
SENTINEL = "AIFABRIC_PWNED"
# lists of scalars this short are positional records (["hdr", "field"], ["f", 8, false])
POSITIONAL_MAX = 4


def payloads(marker: Path) -> dict[str, Any]:
    """Name -> replacement. Each string one would run ``stmt`` in the context it targets."""
    stmt = (f'[__import__("builtins").__dict__.__setitem__("{SENTINEL}", 1), '
            f'open({str(marker)!r}, "w").close()] and 0')
    return {
        "newline": f"x\n{stmt}\n#",                               # a name in a module-level line
        "def-body": f"x\n    pass\n{stmt}\ndef _pwn(*a):  #",       # a name in a comment of a def line
        "identifier": f"0(*a):\n    pass\n{stmt}\ndef _pwn",         # an id or a name pasted into a def
        "carriage-return": f"x\r    pass\r{stmt}\rdef _pwn(*a):  #",
        "expression": stmt,                                         # where a number is pasted
        "quotes": f"'); {stmt}; ('\"); {stmt}; (\"",                # inside a '...' or a "..." literal
        # triple quotes, the line separators str.splitlines knows, NUL, long, ending in a backslash
        "odd-characters": (f"'''\"\"\"\u2028{stmt}\u2029\x85\x0b\x0c\x1c\x1d\x1e\x00"
                           + "n" * 5000 + "\\"),
        "huge": 2 ** 64,
    }


# in place of a number, a bool or a null; a string's place gets only "huge" of these
NUMBER_PAYLOADS = {"negative": -1, "float": 1.5, "bool": True}


RENAMES = ("newline", "def-body", "identifier")
PLACEHOLDER = "\x01placeholder\x01"

# -- walking a program ---------------------------------------------------------------------------
JsonPath = tuple   # dict keys and list indices from the top


def _tag(v: Any) -> str:
    if isinstance(v, dict):
        t = v.get("op", v.get("type"))
        if isinstance(t, str):
            return f"<{t}>"
    return ""


def _operator(node: dict) -> bool:
    return isinstance(node.get("op"), str) and ("left" in node or "right" in node)


def scalars(node: Any, path: JsonPath = (), pattern: tuple = (),
            in_expr: bool = False, in_list: bool = False) -> Iterator[tuple[tuple, JsonPath, Any]]:
    """(key path, path, value) of every scalar under ``node``."""
    if isinstance(node, dict):
        if _operator(node):
            if in_expr:     # an operand's operand: the same compiler code wherever it is
                pattern = ("<operand>", _tag(node))
            in_expr = True
        for k, v in node.items():
            seg = "*" if pattern and pattern[-1] == "next_tables" else k
            yield from scalars(v, path + (k,), pattern + (seg + _tag(v),), in_expr)
    elif isinstance(node, list):
        positional = (len(node) <= POSITIONAL_MAX and (in_list or pattern[-1:] == ("value",))
                      and not any(isinstance(v, (dict, list)) for v in node))
        for i, v in enumerate(node):
            seg = f"[{i}]" if positional else "[*]"
            yield from scalars(v, path + (i,), pattern + (seg + _tag(v),), in_expr, in_list=True)
    else:
        yield pattern, path, node


def _parent(js: Any, path: JsonPath) -> Any:
    for k in path[:-1]:
        js = js[k]
    return js


@dataclass
class Site:
    pattern: tuple
    path: JsonPath
    value: Any

    def describe(self) -> str:
        return "".join(p if p[:1] in "[<" else "." + p for p in self.pattern)


def sites() -> Iterator[tuple[Path, Any, list[Site]]]:
    """Per program: its JSON and the sites of the key paths no earlier program had."""
    seen: set[tuple] = set()
    for prog in PROGRAMS:
        js = json.loads(prog.read_text())
        mine = []
        for pattern, path, value in scalars(js):
            if pattern not in seen:
                seen.add(pattern)
                mine.append(Site(pattern, path, value))
        yield prog, js, mine


def _rename(node: Any, old: str, new: Any) -> Any:
    """A copy of ``node`` with every string equal to ``old`` (values and keys) replaced."""
    if isinstance(node, dict):
        return {(new if k == old else k): _rename(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename(v, old, new) for v in node]
    return new if node == old and isinstance(node, str) else node


# -- one variant ------------------------------------------------------------------------------------
class Checker:
    """Checks variants, keeping what went wrong as messages (it runs in worker processes too)."""

    def __init__(self, marker: Path):
        self.marker = marker
        self.tried = 0
        self.loaded = 0
        self.failures: list[str] = []

    def check(self, text: str, what: str) -> None:
        self.tried += 1
        try:
            prog = Program(text)
        except ProgramError as e:
            if str(e).startswith("internal error"):
                self.failures.append(f"{what}: {e}")
            prog = None
        except Exception as e:          # noqa: BLE001 - the point is that nothing else escapes
            self.failures.append(f"{what}: {type(e).__name__}: {e}")
            prog = None
        if SENTINEL in builtins.__dict__ or self.marker.exists():
            self.failures.append(f"{what}: the payload ran")
            builtins.__dict__.pop(SENTINEL, None)
            self.marker.unlink(missing_ok=True)
        if prog is not None:
            self.loaded += 1
            self.failures.extend(f"{what}: {f}" for f in _code_outside_comments_and_strings(prog.source,
                                                                                            "__import__"))


def _code_outside_comments_and_strings(source: str, needle: str) -> list[str]:
    """What is wrong where ``needle`` appears in generated source other than in a comment or a string."""
    wrong = []
    for line in source.splitlines():
        if needle not in line:
            continue
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
        except (tokenize.TokenError, SyntaxError) as e:
            wrong.append(f"generated line does not tokenize ({e}): {line[:200]!r}")
            continue
        if any(needle in tok.string and tok.type not in (tokenize.COMMENT, tokenize.STRING) for tok in tokens):
            wrong.append(f"JSON text became code: {line[:200]!r}")
    return wrong


@contextlib.contextmanager
def memory_cap(extra: int) -> Iterator[None]:
    """Address space limited to what the process has plus ``extra`` bytes: a variant that asks
    for an absurd allocation fails the test with MemoryError instead of exhausting the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + extra if hard == resource.RLIM_INFINITY else min(used + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture
def checker(tmp_path):
    builtins.__dict__.pop(SENTINEL, None)
    with memory_cap(2 << 30):
        yield Checker(tmp_path / "pwned")
    builtins.__dict__.pop(SENTINEL, None)


def variants(marker: Path, share: int = 0, shares: int = 1) -> Iterator[tuple[str, str]]:
    """(program text, what it is) of the variants of every ``shares``-th site from the
    ``share``-th (every site by default), in the same order every time; a site's texts are made
    only by the worker that checks them."""
    marker_payloads = payloads(marker)
    hole = json.dumps(PLACEHOLDER)
    numbered = ((prog, js, site) for prog, js, mine in sites() for site in mine)
    for i, (prog, js, site) in enumerate(numbered):
        if i % shares != share:
            continue
        where = f"{prog.name} {site.describe()}"
        parent, key = _parent(js, site.path), site.path[-1]
        parent[key] = PLACEHOLDER
        text = json.dumps(js)
        parent[key] = site.value
        numbers = NUMBER_PAYLOADS if not isinstance(site.value, str) else {}
        for name, payload in {**marker_payloads, **numbers}.items():
            yield text.replace(hole, json.dumps(payload)), f"{where} = {name}"
        if isinstance(site.value, str):
            text = json.dumps(_rename(js, site.value, PLACEHOLDER))
            for name in RENAMES:
                yield (text.replace(hole, json.dumps(marker_payloads[name])),
                       f"{where}: every {site.value[:40]!r} renamed to {name}")


def check_share(marker: Path, share: int, shares: int) -> tuple[int, int, list[str]]:
    """The variants of every ``shares``-th site from the ``share``-th: (tried, loaded, failures).
    A worker's job; its address space is capped like the test's."""
    checker = Checker(marker)
    with memory_cap(2 << 30):
        for text, what in variants(marker, share, shares):
            checker.check(text, what)
    return checker.tried, checker.loaded, checker.failures


@pytest.mark.timeout(1500)     # fabric.json's variants take most of it: several minutes on a busy 2-core machine
def test_no_json_value_reaches_generated_code(tmp_path):
    """The variants are shared among one worker process per core, spawned, so that nothing of
    this process's state (gRPC's threads, sockets) is forked into them."""
    for prog in PROGRAMS:
        if not prog.exists():
            pytest.skip(f"{prog} is not built")
    npaths = sum(len(mine) for _, _, mine in sites())
    shares = max(1, len(os.sched_getaffinity(0)))
    with ProcessPoolExecutor(shares, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(check_share, [tmp_path / f"pwned{i}" for i in range(shares)],
                                range(shares), [shares] * shares))
    tried, loaded = sum(r[0] for r in results), sum(r[1] for r in results)
    failures = [f for r in results for f in r[2]]
    assert not failures, f"{len(failures)} of {tried} variants: " + "\n".join(failures[:20])
    assert npaths > 500 and loaded > 1000, (npaths, tried, loaded)


# -- over P4Runtime ---------------------------------------------------------------------------------
def _first_const_entry_key_broken(js: dict) -> dict:
    for pipe in js["pipelines"]:
        for t in pipe["tables"]:
            if t.get("entries"):
                t["entries"][0]["match_key"][0]["key"] = "not-hex"
                return js
    raise AssertionError("the program has no const entries")


def test_malicious_pipeline_push_is_refused_without_running(checker):
    """An action name holding code in a program refused late (a malformed const entry) gets
    INVALID_ARGUMENT and the code never runs; a valid program whose parser state name holds
    code is committed, the name staying a name."""
    prog = require_program("tables")
    p = payloads(checker.marker)
    js = json.loads(prog.json)
    evil_action = _first_const_entry_key_broken(_rename(js, js["actions"][0]["name"], p["def-body"]))
    evil_state = _rename(js, js["parsers"][0]["parse_states"][0]["name"], p["def-body"])
    with running_switch(ports={}, cpu_port=None) as (_sw, addr):
        c = Client(addr)
        try:
            c.open_stream()
            with pytest.raises(grpc.RpcError) as e:
                c.set_pipeline(prog, device_config=json.dumps(evil_action).encode())
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
            assert "not-hex" in e.value.details()
            assert SENTINEL not in builtins.__dict__, "the refused program's code ran"
            c.set_pipeline(prog, action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                           device_config=json.dumps(evil_state).encode())
        finally:
            c.close()
    assert SENTINEL not in builtins.__dict__ and not checker.marker.exists()
