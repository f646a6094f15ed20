"""STF names and values resolved against a program's BMv2 JSON, as p4c's BMv2 runner does.

STF files spell tables, actions and key fields as the P4 source does, often shorter than
the JSON's names: a table or action is found by its full name, else by the one name that
ends with what the STF wrote; a key field by its full name, its ``$valid$`` / ``[N]``
spelling, else by a name ending in ``.FIELD``. A key the entry leaves out matches anything.

Key values follow the format's rules: a ternary value's hexadecimal (or binary) digits are
matched exactly except ``*`` digits, and the bits above the digits written are not matched
at all (``0x**01`` on a 32-bit field matches only the low byte); an LPM value is ``V/LEN``
or, without ``/``, a prefix as long as its digits other than trailing ``*``s; ``LOW->HIGH``
is a range, ``V&&&M`` a ternary value with its mask.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import StfError


@dataclass(frozen=True)
class KeySpec:
    name: str
    match_type: str          # exact, lpm, ternary, range, valid, optional
    width: int


@dataclass(frozen=True)
class TableSpec:
    name: str
    keys: tuple[KeySpec, ...]
    actions: tuple[str, ...]            # full action names

    @property
    def needs_priority(self) -> bool:
        return any(k.match_type in ("ternary", "range", "optional") for k in self.keys)


@dataclass(frozen=True)
class ActionSpec:
    name: str
    params: tuple[tuple[str, int], ...]     # (name, width)


@dataclass(frozen=True)
class ResolvedEntry:
    """An ``add`` in the JSON's names: match values normalised as softswitch's tables hold them."""
    table: TableSpec
    match: tuple             # per key: int (exact, valid); (value, plen) lpm; (value, mask) ternary/optional; (low, high) range
    priority: int | None
    action: ActionSpec
    data: tuple[int, ...]


class ProgramNames:
    """The tables, actions, counters and registers of one BMv2 JSON program."""

    def __init__(self, js: dict):
        widths = self._field_widths(js)
        self.actions = {a["name"]: ActionSpec(a["name"], tuple((p["name"], int(p["bitwidth"]))
                                                              for p in a.get("runtime_data", [])))
                        for a in js.get("actions", [])}
        by_id = {a["id"]: a["name"] for a in js.get("actions", [])}
        self.tables: dict[str, TableSpec] = {}
        for pipe in js.get("pipelines", []):
            for t in pipe.get("tables", []):
                keys = []
                for k in t.get("key", []):
                    target = k["target"]
                    joined = ".".join(target) if isinstance(target, list) else target
                    width = 1 if k["match_type"] == "valid" else widths.get(tuple(target) if isinstance(target, list)
                                                                              else (target,), 0)
                    keys.append(KeySpec(k.get("name") or joined, k["match_type"], width))
                self.tables[t["name"]] = TableSpec(t["name"], tuple(keys),
                                                   tuple(by_id[i] for i in t.get("action_ids", [])))
        self.counters = {c["name"]: c for c in js.get("counter_arrays", [])}
        self.registers = {r["name"]: r for r in js.get("register_arrays", [])}

    @staticmethod
    def _field_widths(js: dict) -> dict[tuple, int]:
        types = {h["name"]: h for h in js.get("header_types", [])}
        out = {}
        for h in js.get("headers", []):
            for f in types.get(h["header_type"], {}).get("fields", []):
                if isinstance(f[1], int):            # a varbit's is "*": never a table key
                    out[(h["name"], f[0])] = f[1]
        return out

    # -- names -----------------------------------------------------------------------------
    @staticmethod
    def _by_suffix(kind: str, name: str, names) -> str:
        names = list(names)
        if name in names:
            return name
        found = [n for n in names if n.endswith(name)]
        if len(found) > 1:
            raise StfError(f"{kind} '{name}' is ambiguous: {', '.join(sorted(found))}")
        if not found:
            raise StfError(f"no {kind} '{name}' in the program")
        return found[0]

    def table(self, name: str) -> TableSpec:
        return self.tables[self._by_suffix("table", name, self.tables)]

    def action(self, table: TableSpec, name: str) -> ActionSpec:
        return self.actions[self._by_suffix(f"action of table '{table.name}'", name, table.actions)]

    def counter(self, name: str) -> str:
        return self._by_suffix("counter", name, self.counters)

    def register(self, name: str) -> str:
        return self._by_suffix("register", name, self.registers)

    @staticmethod
    def key_index(table: TableSpec, name: str) -> int:
        names = [k.name for k in table.keys]
        if "$" in name and not name.endswith("$"):          # h$0.f: header stack element h[0]
            head, _, tail = name.partition("$")
            digits = "".join(c for c in tail if c.isdigit())
            if digits and tail.startswith(digits):
                name = f"{head}[{digits}]{tail[len(digits):]}"
        for candidate in (name, name + "$", name + ".$valid$",
                          name[:-5] + "$valid$" if name.endswith(".valid") else None):
            if candidate in names:
                return names.index(candidate)
        found = None
        for i, n in enumerate(names):          # the last that fits, as p4c's runner
            if n.endswith("." + name) or n.endswith("." + name + "$") or (name == "valid" and n.endswith(".$valid$")):
                found = i
        if found is None and name == "valid" and "$valid$" in names:
            found = names.index("$valid$")
        if found is None:
            raise StfError(f"table '{table.name}' has no key field '{name}' (keys: {', '.join(names)})")
        return found

    # -- entries ---------------------------------------------------------------------------
    def entry(self, table_name: str, keys: list[tuple[str, str]], priority: int | None,
              action_name: str, params: list[tuple[str, int]]) -> ResolvedEntry:
        table = self.table(table_name)
        match = [_wildcard(k) for k in table.keys]
        for name, text in keys:
            i = self.key_index(table, name)
            match[i] = key_value(table.keys[i], text)
        action = self.action(table, action_name)
        return ResolvedEntry(table, tuple(match), priority, action, self.action_data(action, params))

    @staticmethod
    def action_data(action: ActionSpec, params: list[tuple[str, int]]) -> tuple[int, ...]:
        given = dict(params)
        unknown = set(given) - {n for n, _ in action.params}
        if unknown:
            raise StfError(f"action '{action.name}' has no parameter {', '.join(sorted(unknown))}")
        missing = [n for n, _ in action.params if n not in given]
        if missing:
            raise StfError(f"action '{action.name}' needs parameter {', '.join(missing)}")
        for n, w in action.params:
            _fits(f"parameter '{n}' of '{action.name}'", given[n], w)
        return tuple(given[n] for n, _ in action.params)


def _wildcard(k: KeySpec):
    full = (1 << k.width) - 1
    return {"exact": 0, "valid": 0, "lpm": (0, 0), "ternary": (0, 0), "optional": (0, 0),
            "range": (0, full)}.get(k.match_type, 0)


def _fits(what: str, value: int, width: int) -> int:
    if value < 0 or value >> width:
        raise StfError(f"{what}: {value:#x} does not fit in {width} bits")
    return value


def _digits(text: str) -> tuple[str, int, int]:
    """(digits, base, bits per digit) of a hexadecimal or binary constant."""
    low = text.lower()
    if low.startswith("0x"):
        return text[2:], 16, 4
    if low.startswith("0b"):
        return text[2:], 2, 1
    raise StfError(f"'{text}' must be hexadecimal or binary here")


def _number(text: str) -> int:
    try:
        return int(text, 0) if not text.isdigit() else int(text)
    except ValueError:
        raise StfError(f"'{text}' is not a number") from None


def key_value(k: KeySpec, text: str):
    what = f"key '{k.name}'"
    full = (1 << k.width) - 1
    mt = k.match_type
    if mt == "range":
        low, sep, high = text.partition("->")
        if sep:
            return (_fits(what, _number(low), k.width), _fits(what, _number(high), k.width))
        v = _fits(what, _number(text), k.width)
        return (v, v)
    if mt in ("ternary", "optional"):
        value, sep, mask = text.partition("&&&")
        if sep:
            v, m = _fits(what, _number(value), k.width), _fits(what, _number(mask), k.width)
            return (v & m, m)
        if "*" not in text and text.isdigit():
            return (_fits(what, int(text), k.width), full)
        digits, base, bits = _digits(text)
        v = int(digits.replace("*", "0"), base)
        m = int("".join("0" if c == "*" else ("f" if base == 16 else "1") for c in digits), base)
        return (_fits(what, v, k.width), _fits(what, m, k.width) & full)
    if mt == "lpm":
        value, sep, plen = text.partition("/")
        if sep:
            return (_fits(what, _number(value), k.width), _plen(what, int(plen), k.width))
        if text.isdigit():
            return (_fits(what, int(text), k.width), k.width)
        digits, base, bits = _digits(text)
        v = int(digits.replace("*", "0"), base)
        return (_fits(what, v, k.width), _plen(what, (len(digits) - digits.count("*")) * bits, k.width))
    if "*" in text:
        raise StfError(f"{what} is {mt}: no don't-care digits")
    return _fits(what, _number(text), k.width)


def _plen(what: str, plen: int, width: int) -> int:
    if not 0 <= plen <= width:
        raise StfError(f"{what}: prefix length {plen} out of 0..{width}")
    return plen
