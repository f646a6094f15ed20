"""The Python side of a program's native run-time objects: every control-plane change of the
Python objects mirrored into the native ones, and reads of stateful objects from native.

P4Runtime keeps its Python objects (runtime/tables.py, action_profiles.py, stateful.py): they
check every write, answer reads of entries, and stay the reference. Each has a ``mirror``
attribute (None on the Python path); ``NativeObjects.attach`` sets it to itself and replays
what the objects already hold (defaults, const entries, entries, members and groups, register
values, counters, meter configurations). From then on every change a Python object accepts is
written into the native ``ss_objects`` through abi.h's control functions, under the data
plane's batch lock (the caller, P4Runtime's device, holds it for a whole batch), so packets
see a batch whole or not at all. Counters (direct and indirect), registers and meters live
natively: the Python objects read them back (``read``/``sync``) when the control plane asks.
"""
from __future__ import annotations

import ctypes
from typing import Any

from ..pipeline.program import Program
from ..runtime.action_profiles import ActionProfile
from ..runtime.stateful import CounterArray, Meter, MeterArray, RegisterArray
from ..runtime.tables import LPM, OPTIONAL, RANGE, TERNARY, Entry, MatchTable
from .codegen import Native

U64 = ctypes.c_uint64
P = ctypes.c_void_p
_M128 = (1 << 128) - 1
_M64 = (1 << 64) - 1

# name -> (restype, argtypes) of abi.h's control functions
SIGNATURES: dict[str, tuple[Any, list]] = {
    "ss_objects_new": (P, []),
    "ss_objects_free": (None, [P]),
    "ss_table_add": (ctypes.c_int, [P, ctypes.c_int, P, ctypes.c_int32, ctypes.c_int, P, ctypes.c_int,
                                    ctypes.c_int64, ctypes.c_int64]),
    "ss_table_modify": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int, ctypes.c_int, P, ctypes.c_int,
                                       ctypes.c_int64, ctypes.c_int64]),
    "ss_table_delete": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int]),
    "ss_table_clear": (ctypes.c_int, [P, ctypes.c_int]),
    "ss_table_set_default": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int, P, ctypes.c_int]),
    "ss_table_entry_counters": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int, P, P, ctypes.c_int]),
    "ss_table_entry_meter": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double,
                                            ctypes.c_int64, ctypes.c_double, ctypes.c_int64]),
    "ss_profile_reset": (ctypes.c_int, [P, ctypes.c_int]),
    "ss_profile_add_member": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int64, ctypes.c_int, P, ctypes.c_int]),
    "ss_profile_set_handle": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_uint32, ctypes.c_int64]),
    "ss_profile_add_group": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int64, P, ctypes.c_uint32]),
    "ss_register_access": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_uint32, P, ctypes.c_int]),
    "ss_register_reset": (ctypes.c_int, [P, ctypes.c_int]),
    "ss_counter_access": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_uint32, P, P, ctypes.c_int]),
    "ss_counter_reset": (ctypes.c_int, [P, ctypes.c_int]),
    "ss_meter_config": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_uint32, ctypes.c_int, ctypes.c_double,
                                       ctypes.c_int64, ctypes.c_double, ctypes.c_int64]),
    "ss_rng_low": (None, [P, ctypes.c_int]),
    "ss_value_set_set": (ctypes.c_int, [P, ctypes.c_int, P, ctypes.c_uint32]),
}


class MirrorError(Exception):
    """The native objects refused a change the Python objects accepted (a bug: never silent)."""


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give the library's control functions their C signatures (once per library)."""
    if not getattr(lib, "_ss_objects_declared", False):
        for name, (res, args) in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        lib._ss_objects_declared = True
    return lib


def words(values) -> ctypes.Array:
    """Values of up to 128 bits as uint64 words, low first (negative ones as two's complement)."""
    flat = []
    for v in values:
        v &= _M128
        flat += (v & _M64, v >> 64)
    return (U64 * max(1, len(flat)))(*flat)


def match_words(table: MatchTable, match: tuple) -> ctypes.Array:
    """An entry's match as objects.c keeps it: two values per key field."""
    pairs = []
    for k, m in zip(table.key, match):
        if k.match_type in (LPM, TERNARY, OPTIONAL, RANGE):
            pairs += (m[0], m[1])
        else:
            pairs += (m, 0)
    return words(pairs)


class NativeObjects:
    """The native objects of one program instance (``handle``: an ``ss_objects *``, e.g. the
    data plane's; None: made here, freed by ``close``), mirroring its Python objects."""

    def __init__(self, program: Program, native: Native, lib: ctypes.CDLL, handle: int | None = None):
        self.program = program
        self.native = native
        self.lib = declare(lib)
        self.owned = handle is None
        self.o = self.lib.ss_objects_new() if handle is None else handle
        self.table_ix = {name: i for i, name in enumerate(native.tables)}
        self.profile_ix = {name: i for i, name in enumerate(native.profiles)}
        self.register_ix = {name: i for i, name in enumerate(native.registers)}
        self.counter_ix = {name: i for i, name in enumerate(native.counters)}
        self.meter_ix = {name: i for i, name in enumerate(native.meters)}
        self.value_set_ix = {name: i for i, name in enumerate(native.value_sets)}
        self._handles: dict[str, dict[int, tuple[Entry, int]]] = {name: {} for name in native.tables}

    # -- attach / detach -----------------------------------------------------------------
    def attach(self) -> None:
        """Mirror every Python object of the program from now on, starting with what it holds."""
        p = self.program
        for table in p.tables.values():
            table.mirror = self
            self.default_changed(table)
            for entry in table:
                self.entry_added(table, entry)
        for profile in p.action_profiles.values():
            profile.mirror = self
            self.profile_changed(profile)
        for reg in p.registers.values():
            reg.mirror = self
            for i, v in enumerate(reg.values):
                if v:
                    self.register_written(reg, i)
        for arr in p.counters.values():
            if arr.is_direct:
                continue
            arr.mirror = self
            for i in range(arr.size):
                if arr.packets[i] or arr.bytes[i]:
                    self.counter_written(arr, i)
        for vs in p.value_sets.values():
            vs.mirror = self
            self.value_set_changed(vs)
        for marr in p.meters.values():
            if marr.is_direct:
                continue
            marr.mirror = self
            for i, m in enumerate(marr.meters):
                m.mirror = self._meter_mirror(marr, i)
                if m.configured:
                    m.mirror(m)

    def detach(self) -> None:
        """Stop mirroring: the Python objects hold the native state read back (counters,
        registers) and run alone again."""
        p = self.program
        for table in p.tables.values():
            self.entry_counters_read(table)
            table.mirror = None
            for entry in table:
                if entry.meter is not None:
                    entry.meter.mirror = None
        for profile in p.action_profiles.values():
            profile.mirror = None
        for vs in p.value_sets.values():
            vs.mirror = None
        for reg in p.registers.values():
            self.registers_read(reg)
            reg.mirror = None
        for arr in p.counters.values():
            if arr.mirror is self:
                self.counters_read(arr)
                arr.mirror = None
        for marr in p.meters.values():
            if marr.mirror is self:
                marr.mirror = None
                for m in marr.meters:
                    m.mirror = None

    def close(self) -> None:
        self.detach()
        if self.owned and self.o:
            self.lib.ss_objects_free(self.o)
        self.o = None

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise MirrorError(f"native objects refused {what}")
        return rc

    # -- tables ----------------------------------------------------------------------------
    def _action(self, entry_or_member) -> tuple[int, ctypes.Array, int]:
        a = entry_or_member.action
        data = tuple(entry_or_member.data)
        return (-1 if a is None else a.id), words(data), len(data)

    def entry_added(self, table: MatchTable, entry: Entry) -> None:
        t = self.table_ix[table.name]
        aid, data, n = self._action(entry)
        member = -1 if entry.member is None else entry.member
        group = -1 if entry.group is None else entry.group
        h = self._check(self.lib.ss_table_add(self.o, t, match_words(table, entry.match), entry.priority, aid,
                                              data, n, member, group), f"an entry of table '{table.name}'")
        self._handles[table.name][id(entry)] = (entry, h)
        if entry.packets or entry.bytes:
            self.entry_counters_written(table, entry)
        if entry.meter is not None:
            entry.meter.mirror = self._direct_meter_mirror(table, entry)
            if entry.meter.configured:
                entry.meter.mirror(entry.meter)

    def _handle(self, table: MatchTable, entry: Entry) -> int:
        found = self._handles[table.name].get(id(entry))
        if found is None or found[0] is not entry:
            raise MirrorError(f"table '{table.name}': an entry the native table does not have")
        return found[1]

    def entry_modified(self, table: MatchTable, entry: Entry) -> None:
        aid, data, n = self._action(entry)
        member = -1 if entry.member is None else entry.member
        group = -1 if entry.group is None else entry.group
        self._check(self.lib.ss_table_modify(self.o, self.table_ix[table.name], self._handle(table, entry), aid,
                                             data, n, member, group), f"a modify in table '{table.name}'")

    def entry_deleted(self, table: MatchTable, entry: Entry) -> None:
        h = self._handle(table, entry)
        t = self.table_ix[table.name]
        self._read_entry_counters(t, h, entry)          # the Python entry keeps its last counts
        self._check(self.lib.ss_table_delete(self.o, t, h), f"a delete in table '{table.name}'")
        del self._handles[table.name][id(entry)]
        if entry.meter is not None:
            entry.meter.mirror = None

    def table_cleared(self, table: MatchTable) -> None:
        self._check(self.lib.ss_table_clear(self.o, self.table_ix[table.name]), f"clearing table '{table.name}'")
        self._handles[table.name].clear()

    def default_changed(self, table: MatchTable) -> None:
        a, data = table.default_action, tuple(table.default_data)
        self._check(self.lib.ss_table_set_default(self.o, self.table_ix[table.name], -1 if a is None else a.id,
                                                  words(data), len(data)), f"the default of table '{table.name}'")

    def entry_counters_written(self, table: MatchTable, entry: Entry) -> None:
        p, b = U64(entry.packets & _M64), U64(entry.bytes & _M64)
        self._check(self.lib.ss_table_entry_counters(self.o, self.table_ix[table.name], self._handle(table, entry),
                                                     ctypes.byref(p), ctypes.byref(b), 1),
                    f"the counters of an entry of table '{table.name}'")

    def _read_entry_counters(self, t: int, h: int, entry: Entry) -> None:
        p, b = U64(), U64()
        self._check(self.lib.ss_table_entry_counters(self.o, t, h, ctypes.byref(p), ctypes.byref(b), 0),
                    "reading an entry's counters")
        entry.packets, entry.bytes = p.value, b.value

    def entry_counters_read(self, table: MatchTable) -> None:
        t = self.table_ix[table.name]
        for entry, h in self._handles[table.name].values():
            self._read_entry_counters(t, h, entry)

    def _direct_meter_mirror(self, table: MatchTable, entry: Entry):
        def mirror(meter: Meter) -> None:
            cfg = meter.config()
            args = (1, *cfg) if cfg is not None else (0, 0.0, 0, 0.0, 0)
            self._check(self.lib.ss_table_entry_meter(self.o, self.table_ix[table.name], self._handle(table, entry),
                                                      *args), f"the meter of an entry of table '{table.name}'")
        return mirror

    # -- action profiles ---------------------------------------------------------------------
    def profile_changed(self, profile: ActionProfile) -> None:
        """The whole profile again: members, their handles, groups (profiles are small)."""
        p = self.profile_ix[profile.name]
        lib = self.lib
        self._check(lib.ss_profile_reset(self.o, p), f"resetting profile '{profile.name}'")
        for m in profile.members.values():
            aid, data, n = self._action(m)
            self._check(lib.ss_profile_add_member(self.o, p, m.id, aid, data, n), f"a member of '{profile.name}'")
        for h, m in profile.by_handle.items():
            self._check(lib.ss_profile_set_handle(self.o, p, h, m.id), f"a handle of '{profile.name}'")
        for g in profile.groups.values():
            handles = (ctypes.c_uint32 * max(1, len(g.handles)))(*g.handles)
            self._check(lib.ss_profile_add_group(self.o, p, g.id, handles, len(g.handles)),
                        f"a group of '{profile.name}'")

    # -- parser value sets -------------------------------------------------------------------
    def value_set_changed(self, vs) -> None:
        values = sorted(vs.values)
        self._check(self.lib.ss_value_set_set(self.o, self.value_set_ix[vs.name], words(values), len(values)),
                    f"the members of value set '{vs.name}'")

    # -- registers, counters, meters ----------------------------------------------------------
    def register_read(self, reg: RegisterArray, index: int) -> int:
        v = U64()
        self._check(self.lib.ss_register_access(self.o, self.register_ix[reg.name], index, ctypes.byref(v), 0),
                    f"reading register '{reg.name}'")
        return v.value

    def register_written(self, reg: RegisterArray, index: int) -> None:
        v = U64(reg.values[index] & _M64)
        self._check(self.lib.ss_register_access(self.o, self.register_ix[reg.name], index, ctypes.byref(v), 1),
                    f"writing register '{reg.name}'")

    def registers_reset(self, reg: RegisterArray) -> None:
        self._check(self.lib.ss_register_reset(self.o, self.register_ix[reg.name]), f"resetting '{reg.name}'")

    def registers_read(self, reg: RegisterArray) -> None:
        reg.values[:] = [self.register_read(reg, i) for i in range(reg.size)]

    def counter_read(self, arr: CounterArray, index: int) -> tuple[int, int]:
        p, b = U64(), U64()
        self._check(self.lib.ss_counter_access(self.o, self.counter_ix[arr.name], index, ctypes.byref(p),
                                               ctypes.byref(b), 0), f"reading counter '{arr.name}'")
        return p.value, b.value

    def counter_written(self, arr: CounterArray, index: int) -> None:
        p, b = U64(arr.packets[index] & _M64), U64(arr.bytes[index] & _M64)
        self._check(self.lib.ss_counter_access(self.o, self.counter_ix[arr.name], index, ctypes.byref(p),
                                               ctypes.byref(b), 1), f"writing counter '{arr.name}'")

    def counters_reset(self, arr: CounterArray) -> None:
        self._check(self.lib.ss_counter_reset(self.o, self.counter_ix[arr.name]), f"resetting '{arr.name}'")

    def counters_read(self, arr: CounterArray) -> None:
        for i in range(arr.size):
            arr.packets[i], arr.bytes[i] = self.counter_read(arr, i)

    def _meter_mirror(self, marr: MeterArray, index: int):
        def mirror(meter: Meter) -> None:
            cfg = meter.config()
            args = (1, *cfg) if cfg is not None else (0, 0.0, 0, 0.0, 0)
            self._check(self.lib.ss_meter_config(self.o, self.meter_ix[marr.name], index, *args),
                        f"configuring meter '{marr.name}'")
        return mirror
