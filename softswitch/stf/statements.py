"""STF statements: p4c's packet-test format read into records, one per line.

An STF file (p4c's testdata) holds one statement a line; ``#`` starts a comment. What each
statement means is the runner's (runner.py); here only its shape is checked, and a line
that is not a statement is an error naming the file's line. The forms read are p4c's and
its BMv2 runner's:

    add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE, ...) [= ENTRY_ID]
    setdefault TABLE ACTION(PARAM:VALUE, ...)
    packet PORT HEX ...                 expect PORT [HEX ... with * nibbles, $ at the end]
    no_packet   wait   remove all
    check_counter NAME(INDEX | $ENTRY_ID) [packets|bytes OP NUMBER]
    mirroring_add SESSION PORT          mirroring_add_mc SESSION GROUP    mirroring_delete SESSION
    mc_mgrp_create GROUP   mc_node_create RID PORT ...   mc_node_update HANDLE PORT ...
    mc_node_associate GROUP HANDLE
    counter_read NAME INDEX   counter_write NAME INDEX PACKETS BYTES
    register_read NAME INDEX  register_write NAME INDEX VALUE  register_reset NAME
    mirroring_get SESSION, meter_get_rates / meter_set_rates / meter_array_set_rates ...

Two additions of this project's, for what p4c's format cannot say: a range key is written
``LOW->HIGH`` (simple_switch_CLI's spelling), and ``check_register NAME(INDEX) OP NUMBER``
checks a register cell as check_counter checks a counter.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StfError

NAME = r"[A-Za-z_$][\w$.\[\]]*"
NUMBER = r"0[xX][0-9a-fA-F*]+|0[bB][01*]+|[0-9]+"
COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
PASSED_THROUGH = {   # commands with plain numeric arguments (after an optional NAME), and their counts
    "mirroring_add": 2, "mirroring_add_mc": 2, "mirroring_delete": 1, "mirroring_get": 1,
    "mc_mgrp_create": 1, "mc_node_associate": 2,
}


@dataclass
class Statement:
    command: str                 # lower case, as written
    line: int                    # 1-based line of the file
    args: dict = field(default_factory=dict)

    def __getitem__(self, key: str):
        return self.args[key]


_ACTION = re.compile(rf"({NAME})\s*\(([^)]*)\)\s*(?:=\s*(\S+))?\s*$")
_CHECK = re.compile(rf"^({NAME})\s*\(\s*(\$?[\w]+)\s*\)\s*(?:(packets|bytes)?\s*(==|!=|<=|>=|<|>)\s*({NUMBER}))?\s*$",
                    re.I)


def parse_file(path: str | Path) -> list[Statement]:
    return parse(Path(path).read_text(), str(path))


def parse(text: str, filename: str = "<stf>") -> list[Statement]:
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(_statement(line, number))
        except StfError as e:
            raise StfError(f"{filename}:{number}: {e}: {raw.strip()!r}") from None
    return out


def _statement(line: str, number: int) -> Statement:
    word, _, rest = line.partition(" ")
    cmd, rest = word.lower(), rest.strip()
    if cmd in ("packet", "expect"):
        return _packet(cmd, rest, number)
    if cmd == "add":
        return _add(rest, number)
    if cmd == "setdefault":
        table, _, call = rest.partition(" ")
        action, params, entry_id = _action(call)
        if entry_id is not None:
            raise StfError("setdefault takes no entry id")
        return Statement(cmd, number, {"table": table, "action": action, "params": params})
    if cmd in ("wait", "no_packet"):
        if rest:
            raise StfError(f"{cmd} takes no arguments")
        return Statement(cmd, number)
    if cmd == "remove":
        if rest.lower() != "all":
            raise StfError("only 'remove all' is a statement")
        return Statement(cmd, number)
    if cmd in ("check_counter", "check_register"):
        return _check(cmd, rest, number)
    words = rest.split()
    if cmd in PASSED_THROUGH:
        if len(words) != PASSED_THROUGH[cmd]:
            raise StfError(f"{cmd} takes {PASSED_THROUGH[cmd]} numbers")
        return Statement(cmd, number, {"numbers": [_int(w) for w in words]})
    if cmd in ("mc_node_create", "mc_node_update"):
        if len(words) < 1:
            raise StfError(f"{cmd} takes a number and a port list")
        return Statement(cmd, number, {"first": _int(words[0]), "ports": [_int(w) for w in words[1:]]})
    if cmd in ("counter_read", "counter_write", "register_read", "register_write", "register_reset"):
        wanted = {"counter_read": 1, "counter_write": 3, "register_read": 1, "register_write": 2,
                  "register_reset": 0}[cmd]
        if len(words) != wanted + 1 or not re.fullmatch(NAME, words[0]):
            raise StfError(f"{cmd} takes a name and {wanted} numbers")
        return Statement(cmd, number, {"name": words[0], "numbers": [_int(w) for w in words[1:]]})
    if cmd in ("meter_get_rates", "meter_set_rates", "meter_array_set_rates"):
        return Statement(cmd, number, {"text": rest})
    raise StfError(f"unknown command '{word}'")


def _packet(cmd: str, rest: str, number: int) -> Statement:
    port, _, data = rest.partition(" ")
    if not port.isdigit():
        raise StfError(f"{cmd} needs a port number")
    data = "".join(data.split())
    exact = data.endswith("$")
    if exact:
        data = data[:-1]
    allowed = "0-9a-fA-F*" if cmd == "expect" else "0-9a-fA-F"
    if not re.fullmatch(f"[{allowed}]*", data):
        raise StfError(f"{cmd}: not hexadecimal data")
    if cmd == "packet":
        if exact or not data or len(data) % 2:
            raise StfError("packet needs whole bytes of hexadecimal data")
        return Statement(cmd, number, {"port": int(port), "data": bytes.fromhex(data)})
    # expect PORT alone: some packet (any) on the port
    return Statement(cmd, number, {"port": int(port), "pattern": data.upper() if data else None, "exact": exact})


def _add(rest: str, number: int) -> Statement:
    m = _ACTION.search(rest)
    if m is None:
        raise StfError("add needs an action call NAME(...)")
    action, params, entry_id = _action(rest[m.start():])
    head = re.sub(r"\s*(:|/|->|&&&)\s*", r"\1", rest[:m.start()]).split()
    if not head:
        raise StfError("add needs a table")
    table, items = head[0], head[1:]
    priority = None
    if items and items[0].isdigit():
        priority = int(items.pop(0))
    keys = []
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not re.fullmatch(NAME, name) or not value:
            raise StfError(f"'{item}' is not KEY:VALUE")
        keys.append((name, value))
    return Statement("add", number, {"table": table, "priority": priority, "keys": keys, "action": action,
                                     "params": params, "entry_id": entry_id})


def _action(text: str) -> tuple[str, list[tuple[str, int]], str | None]:
    m = _ACTION.fullmatch(text.strip())
    if m is None:
        raise StfError("not an action call NAME(PARAM:VALUE, ...)")
    params = []
    for p in filter(None, (x.strip() for x in m.group(2).split(","))):
        name, sep, value = (s.strip() for s in p.partition(":"))
        if not sep or not name:
            raise StfError(f"action parameter '{p}' is not NAME:VALUE")
        params.append((name, _int(value)))
    return m.group(1), params, m.group(3)


def _check(cmd: str, rest: str, number: int) -> Statement:
    m = _CHECK.match(rest)
    if m is None:
        raise StfError(f"{cmd} needs NAME(INDEX) [packets|bytes] OP NUMBER")
    name, where, kind, op, value = m.groups()
    if cmd == "check_register" and (op is None or kind):
        raise StfError("check_register needs NAME(INDEX) OP NUMBER")
    index = None if where.startswith("$") else _int(where)
    return Statement(cmd, number, {"name": name, "index": index, "entry_id": where[1:] if index is None else None,
                                   "kind": (kind or "packets").lower(), "op": op or "==",
                                   "value": _int(value) if value is not None else 0})


def _int(text: str) -> int:
    try:
        return int(text, 0) if not text.isdigit() else int(text)
    except ValueError:
        raise StfError(f"'{text}' is not a number") from None
