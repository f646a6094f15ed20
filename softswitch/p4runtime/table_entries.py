"""TableEntry, DirectCounterEntry and DirectMeterEntry: validation, writes and reads.

Match values are converted between P4Runtime bytestrings (P4Info widths) and the normalised
match tuples of `runtime.tables` (JSON key widths; see the top of that module). The checks and
their error codes follow the P4Runtime specification and PI's device_mgr.cpp, which BMv2's
simple_switch_grpc uses.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from p4.v1 import p4runtime_pb2

from ..runtime.stateful import Meter
from ..runtime.tables import ActionSpec, Entry, TableError
from . import codec
from .errors import P4RTError, from_table_error, invalid, not_found, show_bytes, unimplemented, PERMISSION_DENIED
from .p4info_map import (COUNTER_BYTES, COUNTER_PACKETS, DEFAULT_ONLY, EXACT, LPM, MATCH_TYPE_NAMES, OPTIONAL,
                         RANGE, TABLE_ONLY, TERNARY, ActionMap, FieldMap, PipelineMap, TableMap)
from .pipeline import DefaultEntryMeta, Pipeline
from .reads import ReadScope

Update = p4runtime_pb2.Update
_FM_KIND = {EXACT: "exact", LPM: "lpm", TERNARY: "ternary", RANGE: "range", OPTIONAL: "optional"}
MAX_BURST = (1 << 32) - 1
MAX_RATE = (1 << 64) - 1


# -- match keys ------------------------------------------------------------------------------
def matches_by_id(field_by_id: dict, matches, owner: str) -> dict[int, p4runtime_pb2.FieldMatch]:
    """The FieldMatches of a key by field id; unknown or repeated field ids are refused."""
    given: dict[int, p4runtime_pb2.FieldMatch] = {}
    for fm in matches:
        f = field_by_id.get(fm.field_id)
        if f is None:
            raise invalid(f"{owner} has no match field with id {fm.field_id}")
        if fm.field_id in given:
            raise invalid(f"{owner}: match field '{f.name}' is given twice")
        given[fm.field_id] = fm
    return given


def build_match(tm: TableMap, te: p4runtime_pb2.TableEntry) -> tuple[tuple, int]:
    """(normalised match tuple, priority) of a non-default TableEntry key."""
    given = matches_by_id(tm.field_by_id, te.match, f"table '{tm.name}'")
    values = []
    for f in tm.fields:
        fm = given.get(f.id)
        values.append(_field_value(tm, f, fm) if fm is not None else _dont_care(tm, f))
    prio = te.priority
    if tm.needs_priority:
        if prio <= 0:
            raise invalid(f"table '{tm.name}' has ternary, range or optional match fields: "
                          f"the entry needs a priority > 0 (got {prio})")
    elif prio != 0:
        raise invalid(f"table '{tm.name}' has no ternary, range or optional match field: priority must be 0 "
                      f"(got {prio})")
    return tuple(values), prio


def _field_value(tm: TableMap, f: FieldMap, fm: p4runtime_pb2.FieldMatch):
    kind = fm.WhichOneof("field_match_type")
    what = f"table '{tm.name}', match field '{f.name}'"
    expected = _FM_KIND[f.match_type]
    if kind is None:
        raise invalid(f"{what}: no match value given")
    if kind != expected:
        raise invalid(f"{what} is an {MATCH_TYPE_NAMES[f.match_type]} field, got a {kind} match")
    w, s = f.bitwidth, f.shift
    if kind == "exact":
        v = codec.to_uint(fm.exact.value, w, what)
        if f.json_kind == "valid":
            return 1 if v else 0
        return v << s
    if kind == "lpm":
        v = codec.to_uint(fm.lpm.value, w, what)
        plen = fm.lpm.prefix_len
        if plen < 0 or plen > w:
            raise invalid(f"{what}: prefix length {plen} is outside 1..{w}")
        if plen == 0:
            raise invalid(f"{what}: a prefix length of 0 is a don't-care match: omit the field instead")
        if v & ((1 << (w - plen)) - 1):
            raise invalid(f"{what}: value {show_bytes(codec.from_uint(v))} has bits set beyond the /{plen} prefix")
        return (v << s, plen + f.lead)
    if kind == "ternary":
        v = codec.to_uint(fm.ternary.value, w, what)
        mask = codec.to_uint(fm.ternary.mask, w, what + " (mask)")
        if mask == 0:
            raise invalid(f"{what}: a mask of 0 is a don't-care match: omit the field instead")
        if v & ~mask:
            raise invalid(f"{what}: value has bits set outside the mask (value & mask must equal value)")
        return (v << s, mask << s)
    if kind == "range":
        lo = codec.to_uint(fm.range.low, w, what + " (low)")
        hi = codec.to_uint(fm.range.high, w, what + " (high)")
        if lo > hi:
            raise invalid(f"{what}: low bound {lo} is greater than high bound {hi}")
        if lo == 0 and hi == f.max_value:
            raise invalid(f"{what}: the full range is a don't-care match: omit the field instead")
        return (lo << s, hi << s)
    v = codec.to_uint(fm.optional.value, w, what)       # optional
    return (v << s, f.max_value << s)


def _dont_care(tm: TableMap, f: FieldMap):
    if f.match_type == EXACT:
        raise invalid(f"table '{tm.name}': exact match field '{f.name}' (id {f.id}) is missing")
    if f.match_type == RANGE:
        return (0, f.max_value << f.shift)
    return (0, 0)


def match_to_proto(tm: TableMap, match: tuple) -> list[p4runtime_pb2.FieldMatch]:
    out = []
    for f, m in zip(tm.fields, match):
        fm = p4runtime_pb2.FieldMatch(field_id=f.id)
        s = f.shift
        if f.match_type == EXACT:
            fm.exact.value = codec.from_uint(m >> s if f.json_kind != "valid" else m)
        elif f.match_type == LPM:
            if m[1] <= f.lead:
                continue
            fm.lpm.value = codec.from_uint(m[0] >> s)
            fm.lpm.prefix_len = m[1] - f.lead
        elif f.match_type == TERNARY:
            if m[1] == 0:
                continue
            fm.ternary.value = codec.from_uint(m[0] >> s)
            fm.ternary.mask = codec.from_uint(m[1] >> s)
        elif f.match_type == RANGE:
            lo, hi = m[0] >> s, m[1] >> s
            if lo == 0 and hi == f.max_value:
                continue
            fm.range.low = codec.from_uint(lo)
            fm.range.high = codec.from_uint(hi)
        else:                                           # optional
            if m[1] == 0:
                continue
            fm.optional.value = codec.from_uint(m[0] >> s)
        out.append(fm)
    return out


# -- actions ---------------------------------------------------------------------------------
def build_action_data(am: ActionMap, spec: ActionSpec, action: p4runtime_pb2.Action) -> tuple:
    if len(action.params) != len(am.params):
        raise invalid(f"action '{am.name}' takes {len(am.params)} parameters, {len(action.params)} given")
    data: list[int | None] = [None] * len(spec.params)
    for p in action.params:
        pm = am.param_by_id.get(p.param_id)
        if pm is None:
            raise invalid(f"action '{am.name}' has no parameter with id {p.param_id}")
        if data[pm.position] is not None:
            raise invalid(f"action '{am.name}': parameter '{pm.name}' is given twice")
        data[pm.position] = codec.to_uint(p.value, pm.bitwidth, f"action '{am.name}', parameter '{pm.name}'")
    return tuple(data)  # type: ignore[arg-type]


def action_to_proto(m: PipelineMap, spec: ActionSpec, data: tuple) -> p4runtime_pb2.Action | None:
    aid = m.action_ids.get(spec.name)
    if aid is None:
        return None
    am = m.actions[aid]
    out = p4runtime_pb2.Action(action_id=aid)
    for pm in am.params:
        out.params.add(param_id=pm.id, value=codec.from_uint(data[pm.position] if pm.position < len(data) else 0))
    return out


def resolve_action(m: PipelineMap, actions: dict[int, ActionSpec], action: p4runtime_pb2.Action,
                   owner: str) -> tuple[ActionSpec, tuple]:
    spec = actions.get(action.action_id)
    if spec is None:
        known = m.actions.get(action.action_id)
        name = f"'{known.name}'" if known else f"id {action.action_id:#x}"
        raise invalid(f"action {name} is not an action of {owner}")
    return spec, build_action_data(m.actions[action.action_id], spec, action)


def _table_action(pipe: Pipeline, tm: TableMap, ta: p4runtime_pb2.TableAction, default: bool) -> dict:
    """The action fields of an Entry (action, data, member, group) for a TableAction."""
    kind = ta.WhichOneof("type")
    if tm.profile is not None:
        if kind == "action":
            raise invalid(f"table '{tm.name}' is indirect (action profile '{tm.profile.name}'): give an action "
                          f"profile member or group id, not an action")
        if kind == "action_profile_action_set":
            raise unimplemented("one-shot action selector programming (action_profile_action_set) is not "
                                "supported: insert members and a group, then point the entry at the group")
        prof = tm.profile.profile
        if kind == "action_profile_member_id":
            mid = ta.action_profile_member_id
            if mid not in prof.members:
                raise not_found(f"action profile '{tm.profile.name}' has no member {mid}")
            return {"action": None, "data": (), "member": mid, "group": None}
        if kind == "action_profile_group_id":
            gid = ta.action_profile_group_id
            if not tm.profile.with_selector:
                raise invalid(f"action profile '{tm.profile.name}' has no selector: entries cannot point to groups")
            if gid not in prof.groups:
                raise not_found(f"action profile '{tm.profile.name}' has no group {gid}")
            return {"action": None, "data": (), "member": None, "group": gid}
        raise invalid(f"table '{tm.name}': the entry's action is not set")
    if kind != "action":
        raise invalid(f"table '{tm.name}' is a direct table: the entry needs an action, not {kind or 'nothing'}")
    spec, data = resolve_action(pipe.map, tm.actions, ta.action, f"table '{tm.name}'")
    scope = tm.scopes.get(ta.action.action_id)
    if default and scope == TABLE_ONLY:
        raise P4RTError(PERMISSION_DENIED, f"action '{spec.name}' is @tableonly: it cannot be the default action "
                                           f"of table '{tm.name}'")
    if not default and scope == DEFAULT_ONLY:
        raise P4RTError(PERMISSION_DENIED, f"action '{spec.name}' is @defaultonly: it cannot be used in an entry "
                                           f"of table '{tm.name}'")
    return {"action": spec, "data": data, "member": None, "group": None}


# -- direct resources ------------------------------------------------------------------------
def meter_config_values(cfg: p4runtime_pb2.MeterConfig, meter_type: int, what: str) -> tuple | None:
    """(cir, cburst, pir, pburst) of a MeterConfig, or None for "reset to always green"."""
    vals = (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)
    for name, v in zip(("cir", "cburst", "pir", "pburst"), vals):
        if v < -1:
            raise invalid(f"{what}: negative meter {name} ({v})")
    if cfg.cburst > MAX_BURST or cfg.pburst > MAX_BURST:
        raise unimplemented(f"{what}: burst sizes above {MAX_BURST} are not supported")
    if meter_type == 0 and cfg.eburst:          # TWO_RATE_THREE_COLOR
        raise invalid(f"{what}: eburst must be unset for a two-rate three-color meter")
    if meter_type != 0 and (cfg.pir != cfg.cir or cfg.pburst != cfg.cburst):
        raise invalid(f"{what}: a single-rate meter needs pir == cir and pburst == cburst")
    if vals == (-1, -1, -1, -1):
        return None
    cir, cburst, pir, pburst = (MAX_RATE if v == -1 else v for v in (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst))
    cburst, pburst = min(cburst, MAX_BURST), min(pburst, MAX_BURST)
    if cir > pir:
        raise invalid(f"{what}: committed rate {cir} exceeds peak rate {pir}")
    return (cir, cburst, pir, pburst)


def meter_config_proto(cfg: tuple | None) -> p4runtime_pb2.MeterConfig | None:
    """The MeterConfig of a `Meter.config()` tuple (None: unconfigured, no config)."""
    if cfg is None:
        return None
    cir, cburst, pir, pburst = cfg
    return p4runtime_pb2.MeterConfig(cir=int(cir), cburst=int(cburst), pir=int(pir), pburst=int(pburst))


def counter_values(data: p4runtime_pb2.CounterData, unit: int, what: str) -> tuple[int, int]:
    """(packets, bytes) to store for a CounterData, as PI writes them to BMv2 for the unit."""
    if data.packet_count < 0 or data.byte_count < 0:
        raise invalid(f"{what}: counter values cannot be negative")
    packets = data.packet_count if unit != COUNTER_BYTES else 0
    nbytes = data.byte_count if unit != COUNTER_PACKETS else 0
    return packets, nbytes


def _set_meter(meter: Meter, values: tuple | None) -> None:
    if values is None:
        meter.reset()
    else:
        meter.configure(*values)


def _direct_resources(pipe: Pipeline, tm: TableMap, te: p4runtime_pb2.TableEntry) -> tuple:
    """Validated (counter values or None, meter values or None, meter given?) of a TableEntry."""
    counters = meter = None
    if te.HasField("counter_data"):
        if tm.direct_counter is None:
            raise invalid(f"table '{tm.name}' has no direct counter: counter_data must be unset")
        counters = counter_values(te.counter_data, tm.direct_counter.unit, f"table '{tm.name}'")
    if te.HasField("meter_config"):
        if tm.direct_meter is None:
            raise invalid(f"table '{tm.name}' has no direct meter: meter_config must be unset")
        meter = meter_config_values(te.meter_config, tm.direct_meter.type, f"table '{tm.name}'")
    if te.HasField("meter_counter_data"):
        raise unimplemented("per-color meter counters (meter_counter_data) are not supported")
    return counters, meter, te.HasField("meter_config")


# -- writes ----------------------------------------------------------------------------------
def write_table_entry(pipe: Pipeline, utype: int, te: p4runtime_pb2.TableEntry) -> None:
    tm = pipe.map.table(te.table_id)
    if te.is_const:
        raise invalid("is_const must be false in a write request")
    if te.HasField("time_since_last_hit"):
        raise invalid("time_since_last_hit must be unset in a write request")
    if te.is_default_action:
        if utype in (Update.INSERT, Update.DELETE):
            raise invalid(f"cannot {Update.Type.Name(utype)} the default entry of table '{tm.name}': use MODIFY")
        return _modify_default(pipe, tm, te)
    if utype == Update.DELETE:
        match, prio = build_match(tm, te)
        if tm.is_const:
            raise P4RTError(PERMISSION_DENIED, f"table '{tm.name}' is const: its entries cannot be deleted")
        _table_op(lambda: tm.table.delete(match, prio))
        return
    if te.idle_timeout_ns < 0:
        raise invalid("idle_timeout_ns cannot be negative")
    if te.idle_timeout_ns and not tm.idle_timeout:
        raise invalid(f"table '{tm.name}' does not support idle timeout: idle_timeout_ns must be 0")
    if utype == Update.INSERT:
        if not tm.fields:
            raise invalid(f"table '{tm.name}' has no match key: only its default entry can be written")
        if not te.HasField("action"):
            raise invalid(f"table '{tm.name}': INSERT needs the entry's action")
    match, prio = build_match(tm, te)
    if utype == Update.MODIFY and tm.is_const:
        return _modify_const_entry(pipe, tm, te, match, prio)
    act = _table_action(pipe, tm, te.action, default=False) if te.HasField("action") else None
    counters, meter_values, meter_given = _direct_resources(pipe, tm, te)
    extra = {"controller_metadata": te.controller_metadata, "metadata": te.metadata,
             "idle_timeout_ns": te.idle_timeout_ns}
    if utype == Update.INSERT:
        if tm.is_const:
            raise P4RTError(PERMISSION_DENIED, f"table '{tm.name}' is const: entries cannot be inserted")
        entry = Entry(match, prio, extra=extra, **act)
        if tm.table.meter_array is not None:
            entry.meter = Meter(tm.table.meter_array.by_bytes)
            if meter_values is not None:
                entry.meter.configure(*meter_values)
        if counters is not None:
            entry.packets, entry.bytes = counters
        _table_op(lambda: tm.table.insert(entry))
        return
    # MODIFY: full-snapshot semantics, except that an unset action keeps the action (spec
    # 9.1.2) and an unset meter_config keeps the meter configuration (as simple_switch_grpc
    # does; the specification would reset it - use DirectMeterEntry to reset a meter).
    old = tm.table.get(match, prio)
    if old is None:
        raise not_found(f"table '{tm.name}': no such entry to modify")
    if act is None:
        act = {"action": old.action, "data": old.data, "member": old.member, "group": old.group}
    _table_op(lambda: tm.table.modify(Entry(match, prio, extra=extra, **act)))
    old.extra = extra
    if counters is not None:
        old.packets, old.bytes = counters
        tm.table.counters_written(old)
    if old.meter is not None and meter_given:
        _set_meter(old.meter, meter_values)


def _modify_const_entry(pipe: Pipeline, tm: TableMap, te: p4runtime_pb2.TableEntry, match: tuple, prio: int) -> None:
    """Const tables: only the direct resources of an entry may change."""
    if te.HasField("action"):
        raise P4RTError(PERMISSION_DENIED, f"table '{tm.name}' is const: the action of its entries cannot change")
    counters, meter_values, meter_given = _direct_resources(pipe, tm, te)
    entry = tm.table.get(match, prio)
    if entry is None:
        raise not_found(f"table '{tm.name}': no such entry to modify")
    if counters is not None:
        entry.packets, entry.bytes = counters
        tm.table.counters_written(entry)
    if entry.meter is not None and meter_given:
        _set_meter(entry.meter, meter_values)


def _modify_default(pipe: Pipeline, tm: TableMap, te: p4runtime_pb2.TableEntry) -> None:
    if te.match:
        raise invalid(f"table '{tm.name}': the default entry has no match key (match must be empty)")
    if te.priority:
        raise invalid(f"table '{tm.name}': the default entry has no priority (priority must be 0)")
    if tm.profile is not None:
        raise invalid(f"table '{tm.name}' is indirect: its default entry cannot be set or reset")
    if tm.const_default:
        raise P4RTError(PERMISSION_DENIED, f"table '{tm.name}' has a const default action")
    if te.idle_timeout_ns:
        raise invalid("default entries do not support idle timeout: idle_timeout_ns must be 0")
    if te.HasField("counter_data") or te.HasField("meter_config") or te.HasField("meter_counter_data"):
        raise unimplemented("direct counters and meters of default entries are not supported (as on BMv2)")
    if te.HasField("action"):
        act = _table_action(pipe, tm, te.action, default=True)
        _table_op(lambda: tm.table.set_default(act["action"], act["data"]))
        pipe.default_meta[tm.id] = DefaultEntryMeta(te.controller_metadata, te.metadata)
    else:
        tm.table.reset_default()
        pipe.default_meta.pop(tm.id, None)


def _table_op(fn) -> None:
    try:
        fn()
    except TableError as e:
        raise from_table_error(e) from None


# -- reads ---------------------------------------------------------------------------------
class EntryView(NamedTuple):
    """A table entry as a Read copies it under the lock (the meter as its configuration)."""

    match: tuple
    priority: int
    action: ActionSpec | None
    data: tuple
    member: int | None
    group: int | None
    packets: int
    bytes: int
    meter: tuple | None
    extra: dict


def entry_view(e: Entry) -> EntryView:
    return EntryView(e.match, e.priority, e.action, e.data, e.member, e.group, e.packets, e.bytes,
                     e.meter.config() if e.meter is not None else None, e.extra)


def synced(scope: ReadScope, tm: TableMap) -> None:
    """The table's direct counters brought up to date (the native path counts them), once per
    Read: a Read naming a table thousands of times reads its counters once."""
    scope.once(("synced", tm.id), tm.table.sync)


def table_views(scope: ReadScope, tm: TableMap) -> list[EntryView]:
    """Every entry of the table, copied once per Read."""
    return scope.once(("table", tm.id), lambda: [entry_view(e) for e in tm.table])


def _named_entries(scope: ReadScope, tm: TableMap, te: p4runtime_pb2.TableEntry) -> list[EntryView]:
    """The entry ``te``'s match names, or every entry when it names none."""
    synced(scope, tm)
    if not te.match:
        return table_views(scope, tm)
    match, prio = build_match(tm, te)
    e = tm.table.get(match, prio)
    return [entry_view(e)] if e is not None else []


def read_table_entries(scope: ReadScope, te: p4runtime_pb2.TableEntry) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    m = pipe.map
    if te.table_id == 0:
        if te.match:
            raise invalid("a match key needs a table_id (wildcard reads over all tables cannot filter on match)")
        tables = list(m.tables.values())
    else:
        tables = [m.table(te.table_id)]
    if te.HasField("time_since_last_hit") and not te.is_default_action and any(not t.idle_timeout for t in tables):
        raise invalid("time_since_last_hit can only be requested for tables that support idle timeout "
                      "(this includes wildcard reads)")
    if te.HasField("meter_counter_data"):
        raise unimplemented("per-color meter counters (meter_counter_data) are not supported")
    if te.is_default_action:
        if te.HasField("time_since_last_hit"):
            raise invalid("default entries do not support idle timeout: time_since_last_hit must be unset")
        return iter([_default_entity(pipe, tm) for tm in tables])
    sources = [(tm, _named_entries(scope, tm, te)) for tm in tables]

    def build(item: tuple[TableMap, EntryView]) -> p4runtime_pb2.Entity | None:
        tm, e = item
        if not _passes_filters(pipe, tm, e, te):
            return None
        return p4runtime_pb2.Entity(table_entry=entry_to_proto(pipe, tm, e, te))
    return scope.each(_pairs(sources), build)


def _pairs(sources: list[tuple[TableMap, list[EntryView]]]) -> Iterator[tuple[TableMap, EntryView]]:
    return ((tm, e) for tm, views in sources for e in views)


def _passes_filters(pipe: Pipeline, tm: TableMap, e: EntryView, te: p4runtime_pb2.TableEntry) -> bool:
    if te.priority and tm.needs_priority and e.priority != te.priority and not te.match:
        return False
    if te.controller_metadata and e.extra.get("controller_metadata", 0) != te.controller_metadata:
        return False
    if te.metadata and e.extra.get("metadata", b"") != te.metadata:
        return False
    if te.HasField("action") and te.action.WhichOneof("type") == "action" and te.action.action.action_id:
        if e.action is None or pipe.map.action_ids.get(e.action.name) != te.action.action.action_id:
            return False
    return True


def entry_to_proto(pipe: Pipeline, tm: TableMap, e: EntryView, request: p4runtime_pb2.TableEntry | None = None
                   ) -> p4runtime_pb2.TableEntry:
    out = p4runtime_pb2.TableEntry(table_id=tm.id)
    out.match.extend(match_to_proto(tm, e.match))
    if tm.needs_priority:
        out.priority = e.priority
    if e.member is not None:
        out.action.action_profile_member_id = e.member
    elif e.group is not None:
        out.action.action_profile_group_id = e.group
    elif e.action is not None:
        a = action_to_proto(pipe.map, e.action, e.data)
        if a is not None:
            out.action.action.CopyFrom(a)
    out.controller_metadata = e.extra.get("controller_metadata", 0)
    out.metadata = e.extra.get("metadata", b"")
    out.idle_timeout_ns = e.extra.get("idle_timeout_ns", 0)
    if tm.is_const:
        out.is_const = True
    if request is not None:
        if request.HasField("counter_data") and tm.direct_counter is not None:
            out.counter_data.packet_count = e.packets
            out.counter_data.byte_count = e.bytes
        if request.HasField("meter_config") and tm.direct_meter is not None:
            cfg = meter_config_proto(e.meter)
            if cfg is not None:
                out.meter_config.CopyFrom(cfg)
        if request.HasField("time_since_last_hit") and tm.idle_timeout:
            out.time_since_last_hit.elapsed_ns = 0
    return out


def _default_entity(pipe: Pipeline, tm: TableMap) -> p4runtime_pb2.Entity:
    out = p4runtime_pb2.TableEntry(table_id=tm.id, is_default_action=True)
    t = tm.table
    if tm.profile is None and t.default_action is not None:
        a = action_to_proto(pipe.map, t.default_action, t.default_data)
        if a is not None:
            out.action.action.CopyFrom(a)
    meta = pipe.default_meta.get(tm.id)
    if meta is not None:
        out.controller_metadata = meta.controller_metadata
        out.metadata = meta.metadata
    return p4runtime_pb2.Entity(table_entry=out)


# -- DirectCounterEntry / DirectMeterEntry ---------------------------------------------------
def _direct_target(pipe: Pipeline, te: p4runtime_pb2.TableEntry, kind: str) -> tuple[TableMap, Entry]:
    tm = pipe.map.table(te.table_id)
    res = tm.direct_counter if kind == "counter" else tm.direct_meter
    if res is None:
        raise invalid(f"table '{tm.name}' has no direct {kind}")
    if te.is_default_action:
        raise unimplemented(f"direct {kind}s of default entries are not supported (as on BMv2)")
    match, prio = build_match(tm, te)
    entry = tm.table.get(match, prio)
    if entry is None:
        raise not_found(f"table '{tm.name}': no such entry")
    return tm, entry


def _key_proto(tm: TableMap, e: EntryView) -> p4runtime_pb2.TableEntry:
    out = p4runtime_pb2.TableEntry(table_id=tm.id)
    out.match.extend(match_to_proto(tm, e.match))
    if tm.needs_priority:
        out.priority = e.priority
    return out


def _direct_entries(scope: ReadScope, te: p4runtime_pb2.TableEntry, kind: str) -> Iterator[tuple[TableMap, EntryView]]:
    """(table, entry) pairs a DirectCounterEntry / DirectMeterEntry read names."""
    if te.table_id and (te.match or te.is_default_action):
        tm, e = _direct_target(scope.pipe, te, kind)
        synced(scope, tm)
        return _pairs([(tm, [entry_view(e)])])
    pipe = scope.pipe
    tables = [pipe.map.table(te.table_id)] if te.table_id else list(pipe.map.tables.values())
    for tm in tables:
        synced(scope, tm)
    has = (lambda tm: tm.direct_counter is not None) if kind == "counter" else (lambda tm: tm.direct_meter is not None)
    if te.table_id and not has(tables[0]):
        raise invalid(f"table '{tables[0].name}' has no direct {kind}")
    return _pairs([(tm, table_views(scope, tm)) for tm in tables if has(tm)])


def write_direct_counter(pipe: Pipeline, utype: int, dce: p4runtime_pb2.DirectCounterEntry) -> None:
    if not dce.HasField("table_entry"):
        raise invalid("DirectCounterEntry needs its table_entry")
    if utype != Update.MODIFY:
        raise invalid(f"DirectCounterEntry only supports MODIFY, not {Update.Type.Name(utype)}")
    tm, entry = _direct_target(pipe, dce.table_entry, "counter")
    if dce.HasField("data"):
        entry.packets, entry.bytes = counter_values(dce.data, tm.direct_counter.unit, f"table '{tm.name}'")
        tm.table.counters_written(entry)


def read_direct_counters(scope: ReadScope, dce: p4runtime_pb2.DirectCounterEntry
                         ) -> Iterator[p4runtime_pb2.Entity]:
    if not dce.HasField("table_entry"):
        raise invalid("DirectCounterEntry needs its table_entry (table_id 0 reads all tables)")

    def build(item: tuple[TableMap, EntryView]) -> p4runtime_pb2.Entity:
        tm, e = item
        return p4runtime_pb2.Entity(direct_counter_entry=p4runtime_pb2.DirectCounterEntry(
            table_entry=_key_proto(tm, e), data=p4runtime_pb2.CounterData(packet_count=e.packets, byte_count=e.bytes)))
    return scope.each(_direct_entries(scope, dce.table_entry, "counter"), build)


def write_direct_meter(pipe: Pipeline, utype: int, dme: p4runtime_pb2.DirectMeterEntry) -> None:
    if not dme.HasField("table_entry"):
        raise invalid("DirectMeterEntry needs its table_entry")
    if utype != Update.MODIFY:
        raise invalid(f"DirectMeterEntry only supports MODIFY, not {Update.Type.Name(utype)}")
    if dme.HasField("counter_data"):
        raise unimplemented("per-color meter counters (counter_data) are not supported")
    tm, entry = _direct_target(pipe, dme.table_entry, "meter")
    values = (meter_config_values(dme.config, tm.direct_meter.type, f"table '{tm.name}'")
              if dme.HasField("config") else None)
    if entry.meter is not None:
        _set_meter(entry.meter, values)


def read_direct_meters(scope: ReadScope, dme: p4runtime_pb2.DirectMeterEntry) -> Iterator[p4runtime_pb2.Entity]:
    if not dme.HasField("table_entry"):
        raise invalid("DirectMeterEntry needs its table_entry (table_id 0 reads all tables)")
    if dme.HasField("counter_data"):
        raise unimplemented("per-color meter counters (counter_data) are not supported")

    def build(item: tuple[TableMap, EntryView]) -> p4runtime_pb2.Entity:
        tm, e = item
        dm = p4runtime_pb2.DirectMeterEntry(table_entry=_key_proto(tm, e))
        cfg = meter_config_proto(e.meter)
        if cfg is not None:
            dm.config.CopyFrom(cfg)
        return p4runtime_pb2.Entity(direct_meter_entry=dm)
    return scope.each(_direct_entries(scope, dme.table_entry, "meter"), build)
