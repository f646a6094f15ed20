"""p4c's temporaries that live inside one action: local variables, not slots of the packet state.

p4c-bm2-ss keeps an action's local variables and the temporaries it introduces as fields of
one metadata header, ``scalars`` (540 of the fabric program's 1,111 slots). Every slot is
copied when a packet's state is made and released when the packet leaves, whether the
packet's path touches it or not. A scalar that only one action ever names, where that action
runs at most once per packet pass, can be a local variable of the action's code instead:

- nothing else can observe it: the whole JSON (other actions, tables' keys, conditions, the
  parser and deparser, checksums, calculations, field lists, learn lists, meters' targets)
  names it nowhere else;
- its value when the action starts is always 0, BMv2's initial value for metadata: the action
  is in the action list of exactly one table and called from nowhere else (a table is applied
  at most once per pass), and copies, resubmitted and recirculated packets start their
  metadata at 0 too (the field is in no field list);
- so the action's code starts the local at 0 and reads and writes it where it read and wrote
  the slot.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

LOCALS_INSTANCE = "scalars"     # the metadata header instance p4c-bm2-ss puts them in


def _count_refs(node: Any, fields: Counter, whole_header: list[bool]) -> None:
    """Count every ``["scalars", field]`` reference under ``node``; note a reference to the
    ``scalars`` header as a whole (a header operation would see every field)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if n.get("type") == "header" and n.get("value") == LOCALS_INSTANCE:
                whole_header[0] = True
            stack.extend(n.values())
        elif isinstance(n, list):
            if len(n) == 2 and n[0] == LOCALS_INSTANCE and isinstance(n[1], str):
                fields[n[1]] += 1
            else:
                stack.extend(n)


def action_locals(js: dict) -> dict[int, tuple[str, ...]]:
    """Action id -> the ``scalars`` fields that can be that action's local variables (none
    for a program too malformed to tell: its errors are reported where it is loaded)."""
    try:
        return _action_locals(js)
    except (AttributeError, TypeError):
        return {}


def _action_locals(js: dict) -> dict[int, tuple[str, ...]]:
    if not any(h.get("name") == LOCALS_INSTANCE and h.get("metadata") for h in js.get("headers", [])):
        return {}
    # one pass: every reference outside the actions, then each action's own (summed into everywhere)
    everywhere: Counter = Counter()
    whole_header = [False]
    _count_refs({k: v for k, v in js.items() if k != "actions"}, everywhere, whole_header)
    own: list[tuple[dict, Counter]] = []
    for action in js.get("actions", []):
        mine: Counter = Counter()
        _count_refs(action, mine, whole_header)
        everywhere.update(mine)
        own.append((action, mine))
    if whole_header[0]:
        return {}
    callers: Counter = Counter()          # action id -> tables and direct calls that may run it
    for pipe in js.get("pipelines", []):
        for table in pipe.get("tables", []):
            runs = set(table.get("action_ids", []))
            runs.add((table.get("default_entry") or {}).get("action_id"))
            runs.update((e.get("action_entry") or {}).get("action_id") for e in table.get("entries", []))
            callers.update(runs)
        for call in pipe.get("action_calls", []):
            callers[call.get("action_id")] += 1
    declared = Counter(a.get("id") for a in js.get("actions", []))     # an id declared twice: no locals
    found: dict[int, tuple[str, ...]] = {}
    for action, mine in own:
        if callers[action.get("id")] != 1 or declared[action.get("id")] != 1:
            continue
        names = tuple(sorted(f for f, n in mine.items() if everywhere[f] == n))
        if names:
            found[action["id"]] = names
    return found
