"""Match-action tables: entries the control plane writes and the lookups packets make.

Match values are ints. An entry's ``match`` holds one item per key field, normalised:

    exact, valid   value
    lpm            (value, prefix_len)
    ternary        (value, mask)                 value & ~mask is always 0
    range          (low, high)
    optional       (value, mask)                 mask is all ones, or 0 for a wildcard

Exact tables are a dict; LPM tables a dict per prefix length, longest first; ternary, range
and optional tables a list in priority order (higher P4Runtime priority wins). LPM and the
ordered kinds answer from a small cache of recent keys, emptied on every write.

``mirror``: None on the Python path; on the native path (native/objects.py) each table tells
it every change the control plane makes (and ``sync`` brings the direct counters back), so the
native table is always this one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .stateful import Meter

EXACT, LPM, TERNARY, RANGE, OPTIONAL, VALID = "exact", "lpm", "ternary", "range", "optional", "valid"
_CACHE_LIMIT = 4096
NOT_CACHED = object()      # what cached_get() answers for a key it has not seen


class TableError(Exception):
    """A control-plane operation the table refuses; ``code`` is a P4Runtime-style code name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class KeyField:
    name: str
    match_type: str
    width: int


@dataclass(eq=False, slots=True)     # slots: packets read these attributes on every hit
class ActionSpec:
    """An action a table may run; ``fn(F, D)`` is the compiled action."""

    id: int
    name: str
    params: tuple[tuple[str, int], ...]
    fn: Callable | None = None


@dataclass(eq=False, slots=True)
class Entry:
    match: tuple
    priority: int = 0
    action: ActionSpec | None = None
    data: tuple = ()
    member: int | None = None      # indirect tables: an action profile member ...
    group: int | None = None       # ... or group
    packets: int = 0               # direct counter
    bytes: int = 0
    meter: Meter | None = None     # direct meter
    extra: dict = field(default_factory=dict)   # control-plane metadata (cookie, timeouts)


class MatchTable:
    def __init__(self, name: str, table_id: int, key: list[KeyField], actions: list[ActionSpec],
                 kind: str, max_size: int, impl: str = "simple", profile: Any = None,
                 with_counters: bool = False, meter_array: Any = None):
        self.name = name
        self.id = table_id
        self.key = tuple(key)
        self.actions = {a.name: a for a in actions}
        self.actions_by_id = {a.id: a for a in actions}
        self.kind = kind
        self.max_size = max_size
        self.impl = impl                  # simple | indirect | indirect_ws
        self.profile = profile
        self.with_counters = with_counters
        self.meter_array = meter_array    # direct meter array, if any
        self.needs_priority = any(k.match_type in (TERNARY, RANGE, OPTIONAL) for k in self.key)
        self.immutable = False            # entries given in the JSON make it read-only
        self.default_action: ActionSpec | None = None
        self.default_data: tuple = ()
        self.default_const = False
        self.initial_default: tuple[ActionSpec | None, tuple] = (None, ())
        self._entries: dict[tuple, Entry] = {}
        self._lpm_index = next((i for i, k in enumerate(self.key) if k.match_type == LPM), None)
        self._by_plen: dict[int, dict[tuple, Entry]] = {}
        self._plens: list[int] = []
        self._ordered: list[Entry] = []
        self._cache: dict[tuple, Entry | None] = {}
        self.mirror: Any = None           # native/objects.py: told every change (None: Python path)
        # the lookup for this match kind, chosen once (a packet pays no dispatch on the kind);
        # LPM and ordered ones search and remember: the generated code asks cached_get() first
        self.lookup: Callable[[tuple], Entry | None] = (
            self._lookup_exact if kind == EXACT else self._lookup_lpm if kind == LPM else self._lookup_ordered)

    def exact_get(self) -> Callable[[tuple], Entry | None]:
        """For exact tables: the entry dict's own ``get``, keyed by ``(values,)``; generated
        code calls it directly. Valid for the table's life: the dict is only ever changed
        in place, never replaced."""
        return self._entries.get

    def cached_get(self) -> Callable[[tuple, object], Entry | None | object]:
        """For LPM, ternary and range tables: the ``get`` of the dict of recent lookups (key
        values -> entry or None), emptied on every write; generated code asks it first and
        calls ``lookup`` only for a key it lacks. Valid for the table's life: the dict is
        only ever emptied in place, never replaced."""
        return self._cache.get

    # -- control plane -------------------------------------------------------------------
    def identity(self, match: tuple, priority: int) -> tuple:
        return (match, priority) if self.needs_priority else (match,)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def get(self, match: tuple, priority: int = 0) -> Entry | None:
        return self._entries.get(self.identity(match, priority))

    def insert(self, entry: Entry) -> None:
        self._check_mutable()
        if not self.key:
            raise TableError("INVALID_ARGUMENT",
                             f"table '{self.name}' has no match key: only its default action can be set")
        ident = self.identity(entry.match, entry.priority)
        if ident in self._entries:
            raise TableError("ALREADY_EXISTS", f"table '{self.name}': entry already exists")
        if len(self._entries) >= self.max_size:
            raise TableError("RESOURCE_EXHAUSTED", f"table '{self.name}' is full ({self.max_size} entries)")
        if self.meter_array is not None and entry.meter is None:
            entry.meter = Meter(self.meter_array.by_bytes)
        self._entries[ident] = entry
        self._index_add(entry)
        if self.mirror is not None:
            self.mirror.entry_added(self, entry)

    def modify(self, entry: Entry) -> Entry:
        """Replace the action of an existing entry; counters and meter are kept."""
        self._check_mutable()
        old = self._entries.get(self.identity(entry.match, entry.priority))
        if old is None:
            raise TableError("NOT_FOUND", f"table '{self.name}': no such entry to modify")
        old.action, old.data = entry.action, entry.data
        old.member, old.group = entry.member, entry.group
        old.extra = entry.extra or old.extra
        self._cache.clear()
        if self.mirror is not None:
            self.mirror.entry_modified(self, old)
        return old

    def delete(self, match: tuple, priority: int = 0) -> Entry:
        self._check_mutable()
        ident = self.identity(match, priority)
        entry = self._entries.pop(ident, None)
        if entry is None:
            raise TableError("NOT_FOUND", f"table '{self.name}': no such entry to delete")
        self._index_remove(entry)
        if self.mirror is not None:
            self.mirror.entry_deleted(self, entry)
        return entry

    def clear(self) -> None:
        self._entries.clear()
        self._by_plen.clear()
        self._plens = []
        self._ordered = []
        self._cache.clear()
        if self.mirror is not None:
            self.mirror.table_cleared(self)

    def set_default(self, action: ActionSpec, data: tuple) -> None:
        if self.default_const:
            raise TableError("PERMISSION_DENIED", f"table '{self.name}' has a const default action")
        self.default_action, self.default_data = action, data
        if self.mirror is not None:
            self.mirror.default_changed(self)

    def reset_default(self) -> None:
        self.default_action, self.default_data = self.initial_default
        if self.mirror is not None:
            self.mirror.default_changed(self)

    def counters_written(self, entry: Entry) -> None:
        """The control plane set ``entry``'s direct counter (its packets and bytes)."""
        if self.mirror is not None:
            self.mirror.entry_counters_written(self, entry)

    def sync(self) -> None:
        """Bring the entries' direct counters up to date (the native path counts them)."""
        if self.mirror is not None:
            self.mirror.entry_counters_read(self)

    def _check_mutable(self) -> None:
        if self.immutable:
            raise TableError("PERMISSION_DENIED", f"table '{self.name}' has const entries and cannot be changed")

    # -- indexes -------------------------------------------------------------------------
    def _index_add(self, e: Entry) -> None:
        self._cache.clear()
        if self.kind == LPM and self._lpm_index is not None:
            plen = e.match[self._lpm_index][1]
            bucket = self._by_plen.get(plen)
            if bucket is None:
                bucket = self._by_plen[plen] = {}
                self._plens = sorted(self._by_plen, reverse=True)
            bucket[self._lpm_key(e.match, plen)] = e
        elif self.kind in (TERNARY, RANGE):
            self._ordered.append(e)
            # stable: among equal priorities the earlier entry wins
            self._ordered.sort(key=lambda x: -x.priority)

    def _index_remove(self, e: Entry) -> None:
        self._cache.clear()
        if self.kind == LPM and self._lpm_index is not None:
            plen = e.match[self._lpm_index][1]
            bucket = self._by_plen[plen]
            del bucket[self._lpm_key(e.match, plen)]
            if not bucket:
                del self._by_plen[plen]
                self._plens = sorted(self._by_plen, reverse=True)
        elif self.kind in (TERNARY, RANGE):
            self._ordered.remove(e)

    def _lpm_key(self, match: tuple, plen: int) -> tuple:
        li = self._lpm_index
        shift = self.key[li].width - plen
        return tuple((m[0] >> shift) if i == li else m for i, m in enumerate(match))

    # -- data plane ----------------------------------------------------------------------
    def _lookup_exact(self, values: tuple) -> Entry | None:
        """The entry a packet with these key values hits, or None for a miss."""
        return self._entries.get((values,))

    def _lookup_lpm(self, values: tuple) -> Entry | None:
        li = self._lpm_index
        v = values[li]
        w = self.key[li].width
        hit = None
        for plen in self._plens:
            k = values[:li] + (v >> (w - plen),) + values[li + 1:]
            hit = self._by_plen[plen].get(k)
            if hit is not None:
                break
        self._remember(values, hit)
        return hit

    def _lookup_ordered(self, values: tuple) -> Entry | None:
        hit = None
        for e in self._ordered:
            if _matches(self.key, e.match, values):
                hit = e
                break
        self._remember(values, hit)
        return hit

    def _remember(self, values: tuple, hit: Entry | None) -> None:
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[values] = hit


def _matches(key: tuple[KeyField, ...], match: tuple, values: tuple) -> bool:
    for k, m, v in zip(key, match, values):
        mt = k.match_type
        if mt in (TERNARY, OPTIONAL):
            if v & m[1] != m[0]:
                return False
        elif mt == RANGE:
            if not m[0] <= v <= m[1]:
                return False
        elif mt == LPM:
            shift = k.width - m[1]
            if (v >> shift) != (m[0] >> shift):
                return False
        elif v != m:
            return False
    return True
