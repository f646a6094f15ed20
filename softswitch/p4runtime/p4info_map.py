"""P4Info ids onto the objects of a loaded BMv2 JSON program, built once per pipeline push.

P4Info objects map to JSON objects by their fully qualified ``name`` (what p4c writes in both
files). Building the map is the "verify" step of SetForwardingPipelineConfig: every P4Info
table, action, action profile, counter, meter, register, value set and controller packet
metadata header must have a consistent counterpart in the JSON, or `build_map` raises
INVALID_ARGUMENT naming the object that does not fit.

Actions are resolved per table (and per action profile), as BMv2 does: a table's action is
the JSON action of that name among the table's actions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from p4.config.v1 import p4info_pb2

from ..pipeline.program import Program
from ..runtime.tables import ActionSpec, MatchTable
from .errors import P4RTError, invalid, not_found, INVALID_ARGUMENT

MF = p4info_pb2.MatchField
EXACT, LPM, TERNARY, RANGE, OPTIONAL = MF.EXACT, MF.LPM, MF.TERNARY, MF.RANGE, MF.OPTIONAL
MATCH_TYPE_NAMES = {EXACT: "EXACT", LPM: "LPM", TERNARY: "TERNARY", RANGE: "RANGE", OPTIONAL: "OPTIONAL"}
# P4Info match type -> the JSON key match types p4c emits for it
_JSON_KINDS = {EXACT: ("exact", "valid"), LPM: ("lpm",), TERNARY: ("ternary",), RANGE: ("range",),
               OPTIONAL: ("ternary", "optional")}

TABLE_AND_DEFAULT = p4info_pb2.ActionRef.TABLE_AND_DEFAULT
TABLE_ONLY = p4info_pb2.ActionRef.TABLE_ONLY
DEFAULT_ONLY = p4info_pb2.ActionRef.DEFAULT_ONLY

COUNTER_BYTES = p4info_pb2.CounterSpec.BYTES
COUNTER_PACKETS = p4info_pb2.CounterSpec.PACKETS
COUNTER_BOTH = p4info_pb2.CounterSpec.BOTH
METER_BYTES = p4info_pb2.MeterSpec.BYTES


class ConfigError(P4RTError):
    """The P4Info does not fit the device config."""

    def __init__(self, message: str):
        super().__init__(INVALID_ARGUMENT, message)


@dataclass(frozen=True)
class FieldMap:
    """One match field: its P4Info description and where it sits in the JSON key."""

    id: int
    name: str
    bitwidth: int          # P4Info bitwidth: the width of the values the client sends
    match_type: int        # P4Info MatchType
    position: int          # index of the key element in the JSON table key
    json_kind: str         # exact | valid | lpm | ternary | range | optional
    json_width: int        # width of the JSON key field
    shift: int = 0         # a key on a slice f[h:l] of a wider field: values are shifted by l

    @property
    def max_value(self) -> int:
        return (1 << self.bitwidth) - 1

    @property
    def lead(self) -> int:
        """JSON-field bits above the slice (always zero in the masked key)."""
        return self.json_width - self.shift - self.bitwidth


@dataclass(frozen=True)
class ParamMap:
    id: int
    name: str
    bitwidth: int
    position: int          # index in the JSON action's runtime data


@dataclass
class ActionMap:
    id: int
    name: str
    params: tuple[ParamMap, ...]
    param_by_id: dict[int, ParamMap]


@dataclass
class DirectResourceMap:
    id: int
    name: str
    table_id: int
    unit: int
    type: int = 0          # meters: MeterSpec type


@dataclass
class ProfileMap:
    id: int
    name: str
    profile: Any                         # runtime ActionProfile
    with_selector: bool
    max_group_size: int
    table_ids: list[int] = field(default_factory=list)
    actions: dict[int, ActionSpec] = field(default_factory=dict)   # P4Info action id -> JSON action


@dataclass
class TableMap:
    id: int
    name: str
    table: MatchTable
    fields: tuple[FieldMap, ...]
    field_by_id: dict[int, FieldMap]
    actions: dict[int, ActionSpec]       # P4Info action id -> JSON action of this table
    scopes: dict[int, int]               # P4Info action id -> ActionRef scope
    needs_priority: bool
    is_const: bool
    const_default: bool
    idle_timeout: bool
    profile: ProfileMap | None = None
    direct_counter: DirectResourceMap | None = None
    direct_meter: DirectResourceMap | None = None


@dataclass
class CounterMap:
    id: int
    name: str
    array: Any                           # runtime CounterArray
    size: int
    unit: int


@dataclass
class MeterMap:
    id: int
    name: str
    array: Any                           # runtime MeterArray
    size: int
    unit: int
    type: int


@dataclass
class RegisterMap:
    id: int
    name: str
    array: Any                           # runtime RegisterArray
    size: int
    bitwidth: int
    signed: bool


@dataclass
class ValueSetMap:
    id: int
    name: str
    vset: Any                            # runtime ParseValueSet
    fields: tuple[FieldMap, ...]
    field_by_id: dict[int, FieldMap]
    size: int


@dataclass
class PacketMetadataMap:
    """The fields of the packet_in or packet_out controller header, in P4Info order."""

    name: str
    fields: tuple[tuple[int, str, int], ...]        # (id, name, bitwidth)

    @property
    def nbytes(self) -> int:
        return (sum(w for _, _, w in self.fields) + 7) // 8


T = TypeVar("T")


@dataclass
class PipelineMap:
    tables: dict[int, TableMap] = field(default_factory=dict)
    actions: dict[int, ActionMap] = field(default_factory=dict)
    action_ids: dict[str, int] = field(default_factory=dict)      # P4Info action name -> id
    profiles: dict[int, ProfileMap] = field(default_factory=dict)
    counters: dict[int, CounterMap] = field(default_factory=dict)
    direct_counters: dict[int, DirectResourceMap] = field(default_factory=dict)
    meters: dict[int, MeterMap] = field(default_factory=dict)
    direct_meters: dict[int, DirectResourceMap] = field(default_factory=dict)
    registers: dict[int, RegisterMap] = field(default_factory=dict)
    value_sets: dict[int, ValueSetMap] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)          # id -> name (configuration only)
    packet_in: PacketMetadataMap | None = None
    packet_out: PacketMetadataMap | None = None

    # -- lookups raising the P4Runtime error for an unknown id -------------------------------
    def table(self, table_id: int) -> TableMap:
        return _find(self.tables, table_id, "table")

    def profile(self, profile_id: int) -> ProfileMap:
        return _find(self.profiles, profile_id, "action profile")

    def counter(self, counter_id: int) -> CounterMap:
        return _find(self.counters, counter_id, "counter", self.direct_counters, "DirectCounterEntry")

    def meter(self, meter_id: int) -> MeterMap:
        return _find(self.meters, meter_id, "meter", self.direct_meters, "DirectMeterEntry")

    def register(self, register_id: int) -> RegisterMap:
        return _find(self.registers, register_id, "register")

    def value_set(self, value_set_id: int) -> ValueSetMap:
        return _find(self.value_sets, value_set_id, "value set")


def _find(objects: dict[int, T], object_id: int, what: str, direct: dict | None = None, entry: str = "") -> T:
    """``objects[object_id]``; NOT_FOUND naming ``what``, or INVALID_ARGUMENT where the id is one
    of the ``direct`` resources of that kind (read and written through ``entry``)."""
    found = objects.get(object_id)
    if found is None:
        if direct is not None and object_id in direct:
            raise invalid(f"{what} {object_id:#x} is a direct {what}: use {entry}")
        raise not_found(f"no {what} with id {object_id:#x} in the P4Info")
    return found


# -- building ------------------------------------------------------------------------------------
def _label(kind: str, preamble: Any) -> str:
    return f"{kind} '{preamble.name}' (id {preamble.id:#x})"


def _indirect_array(kind: str, info: Any, arrays: dict) -> Any:
    """The BMv2 JSON's array of P4Info ``info`` (a counter or a meter, ``kind``), checked: there,
    indirect, and at least as large; ConfigError naming it otherwise."""
    arr = arrays.get(info.preamble.name)
    if arr is None or arr.is_direct:
        raise ConfigError(f"P4Info {_label(kind, info.preamble)} is not an indirect {kind} of the BMv2 JSON")
    if info.size > arr.size:
        raise ConfigError(f"P4Info {_label(kind, info.preamble)} has size {info.size}, the JSON array {arr.size}")
    return arr


def _direct_array(kind: str, info: Any, arrays: dict, tables: dict,
                  attached: Callable[[Any, Any], bool]) -> tuple:
    """(table map, BMv2 JSON array) of P4Info direct resource ``info`` (a direct counter or meter,
    ``kind``), checked: its table known, the array direct, bound to that table, and
    ``attached(table, array)`` (the JSON table uses it); ConfigError naming it otherwise."""
    if info.direct_table_id not in tables:
        raise ConfigError(f"P4Info {_label(kind, info.preamble)} refers to unknown table {info.direct_table_id:#x}")
    tm = tables[info.direct_table_id]
    arr = arrays.get(info.preamble.name)
    if arr is None or not arr.is_direct or arr.binding != tm.name or not attached(tm.table, arr):
        raise ConfigError(f"P4Info {_label(kind, info.preamble)} is not a {kind} of table '{tm.name}' in the BMv2 JSON")
    return tm, arr


def build_map(p4info: p4info_pb2.P4Info, program: Program) -> PipelineMap:
    """Check that ``p4info`` describes ``program`` and return the id map (or raise ConfigError)."""
    m = PipelineMap()
    _check_unique_ids(p4info)
    json_tables = {t["name"]: t for p in program.json.get("pipelines", []) for t in p.get("tables", [])}

    for a in p4info.actions:
        params = tuple(ParamMap(p.id, p.name, p.bitwidth, i) for i, p in enumerate(a.params))
        m.actions[a.preamble.id] = ActionMap(a.preamble.id, a.preamble.name, params, {p.id: p for p in params})
        m.action_ids[a.preamble.name] = a.preamble.id

    for ap in p4info.action_profiles:
        prof = program.action_profiles.get(ap.preamble.name)
        if prof is None:
            raise ConfigError(f"P4Info {_label('action profile', ap.preamble)} is not in the BMv2 JSON")
        if bool(ap.with_selector) != (prof.selector is not None):
            raise ConfigError(f"P4Info {_label('action profile', ap.preamble)}: with_selector is "
                              f"{ap.with_selector} but the JSON profile {'has' if prof.selector else 'has no'} selector")
        m.profiles[ap.preamble.id] = ProfileMap(ap.preamble.id, ap.preamble.name, prof, bool(ap.with_selector),
                                                int(ap.max_group_size))

    direct_counter_by_table = {}
    for dc in p4info.direct_counters:
        direct_counter_by_table[dc.direct_table_id] = dc
    direct_meter_by_table = {}
    for dm in p4info.direct_meters:
        direct_meter_by_table[dm.direct_table_id] = dm

    for t in p4info.tables:
        m.tables[t.preamble.id] = _table_map(t, program, json_tables, m, direct_counter_by_table,
                                             direct_meter_by_table)

    for ap in m.profiles.values():
        for tid in ap.table_ids:
            ap.actions.update(m.tables[tid].actions)

    for c in p4info.counters:
        arr = _indirect_array("counter", c, program.counters)
        m.counters[c.preamble.id] = CounterMap(c.preamble.id, c.preamble.name, arr, int(c.size), c.spec.unit)

    for dc in p4info.direct_counters:
        tm, _ = _direct_array("direct counter", dc, program.counters, m.tables,
                              lambda table, arr: table.with_counters)
        res = DirectResourceMap(dc.preamble.id, dc.preamble.name, tm.id, dc.spec.unit)
        m.direct_counters[dc.preamble.id] = res
        tm.direct_counter = res

    for mt in p4info.meters:
        arr = _indirect_array("meter", mt, program.meters)
        _check_meter_unit(mt, arr)
        m.meters[mt.preamble.id] = MeterMap(mt.preamble.id, mt.preamble.name, arr, int(mt.size), mt.spec.unit,
                                            mt.spec.type)

    for dm in p4info.direct_meters:
        tm, arr = _direct_array("direct meter", dm, program.meters, m.tables,
                                lambda table, arr: table.meter_array is arr)
        _check_meter_unit(dm, arr)
        res = DirectResourceMap(dm.preamble.id, dm.preamble.name, tm.id, dm.spec.unit, dm.spec.type)
        m.direct_meters[dm.preamble.id] = res
        tm.direct_meter = res

    for r in p4info.registers:
        arr = program.registers.get(r.preamble.name)
        if arr is None:
            raise ConfigError(f"P4Info {_label('register', r.preamble)} is not in the BMv2 JSON")
        bs = r.type_spec.bitstring
        kind = bs.WhichOneof("type_spec") if r.type_spec.HasField("bitstring") else None
        if kind not in ("bit", "int"):
            raise ConfigError(f"P4Info {_label('register', r.preamble)}: only bit<W> and int<W> registers "
                              f"are supported")
        width = getattr(bs, kind).bitwidth
        if width != arr.bitwidth:
            raise ConfigError(f"P4Info {_label('register', r.preamble)} is {width} bits wide, "
                              f"the JSON register {arr.bitwidth}")
        if r.size > arr.size:
            raise ConfigError(f"P4Info {_label('register', r.preamble)} has size {r.size}, the JSON array {arr.size}")
        m.registers[r.preamble.id] = RegisterMap(r.preamble.id, r.preamble.name, arr, int(r.size), width,
                                                 kind == "int")

    for vs in p4info.value_sets:
        pvs = program.value_sets.get(vs.preamble.name)
        if pvs is None:
            raise ConfigError(f"P4Info {_label('value set', vs.preamble)} is not a parser value set of the BMv2 JSON")
        fields = tuple(FieldMap(f.id, f.name, f.bitwidth, f.match_type, i, "exact", f.bitwidth)
                       for i, f in enumerate(vs.match))
        total = sum(f.bitwidth for f in fields)
        if total != pvs.bitwidth:
            raise ConfigError(f"P4Info {_label('value set', vs.preamble)} matches {total} bits, "
                              f"the JSON value set {pvs.bitwidth}")
        m.value_sets[vs.preamble.id] = ValueSetMap(vs.preamble.id, vs.preamble.name, pvs, fields,
                                                   {f.id: f for f in fields}, int(vs.size))

    for d in p4info.digests:
        m.digests[d.preamble.id] = d.preamble.name

    for cpm in p4info.controller_packet_metadata:
        if cpm.preamble.name not in ("packet_in", "packet_out"):
            continue
        pm = PacketMetadataMap(cpm.preamble.name, tuple((md.id, md.name, md.bitwidth) for md in cpm.metadata))
        _check_controller_header(pm, program)
        if cpm.preamble.name == "packet_in":
            m.packet_in = pm
        else:
            m.packet_out = pm
    return m


def _check_unique_ids(p4info: p4info_pb2.P4Info) -> None:
    seen: dict[int, str] = {}
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                 "direct_meters", "controller_packet_metadata", "value_sets", "registers", "digests"):
        for obj in getattr(p4info, kind):
            pid = obj.preamble.id
            if pid == 0:
                raise ConfigError(f"P4Info {kind} '{obj.preamble.name}' has id 0")
            if pid in seen:
                raise ConfigError(f"P4Info id {pid:#x} is used by both '{seen[pid]}' and '{obj.preamble.name}'")
            seen[pid] = obj.preamble.name


def _check_meter_unit(p4: Any, arr: Any) -> None:
    unit = p4.spec.unit
    if unit and (unit == METER_BYTES) != arr.by_bytes:
        raise ConfigError(f"P4Info meter '{p4.preamble.name}' counts {'bytes' if unit == METER_BYTES else 'packets'}"
                          f", the JSON meter {'bytes' if arr.by_bytes else 'packets'}")


def _table_map(t: Any, program: Program, json_tables: dict, m: PipelineMap,
               direct_counter_by_table: dict, direct_meter_by_table: dict) -> TableMap:
    label = _label("table", t.preamble)
    table = program.tables.get(t.preamble.name)
    if table is None:
        raise ConfigError(f"P4Info {label} is not in the BMv2 JSON")
    jkeys = json_tables[t.preamble.name].get("key", [])
    if len(t.match_fields) != len(table.key):
        raise ConfigError(f"P4Info {label} has {len(t.match_fields)} match fields, the JSON table {len(table.key)}")
    fields = []
    for i, (mf, k) in enumerate(zip(t.match_fields, table.key)):
        fields.append(_field_map(label, mf, i, k.match_type, k.width, jkeys[i].get("mask") if i < len(jkeys) else None))
    actions, scopes = {}, {}
    for ref in t.action_refs:
        am = m.actions.get(ref.id)
        if am is None:
            raise ConfigError(f"P4Info {label} refers to unknown action id {ref.id:#x}")
        spec = table.actions.get(am.name)
        if spec is None:
            raise ConfigError(f"P4Info {label}: action '{am.name}' is not an action of the JSON table")
        _check_action(label, am, spec)
        actions[ref.id] = spec
        scopes[ref.id] = ref.scope
    profile = None
    if t.implementation_id:
        profile = m.profiles.get(t.implementation_id)
        if profile is None:
            raise ConfigError(f"P4Info {label} refers to unknown action profile {t.implementation_id:#x}")
        if table.impl == "simple" or table.profile is not profile.profile:
            raise ConfigError(f"P4Info {label} is implemented by '{profile.name}' but the JSON table is not")
        profile.table_ids.append(t.preamble.id)
    elif table.impl != "simple":
        raise ConfigError(f"P4Info {label} has no implementation but the JSON table uses action profile "
                          f"'{table.profile.name}'")
    own = {r.preamble.id for r in (direct_counter_by_table.get(t.preamble.id),
                                   direct_meter_by_table.get(t.preamble.id)) if r is not None}
    for rid in t.direct_resource_ids:
        if rid not in own:
            raise ConfigError(f"P4Info {label} refers to direct resource {rid:#x}, which is not a direct "
                              f"counter or meter of this table")
    needs_priority = any(f.match_type in (TERNARY, RANGE, OPTIONAL) for f in fields)
    return TableMap(
        id=t.preamble.id, name=t.preamble.name, table=table, fields=tuple(fields),
        field_by_id={f.id: f for f in fields}, actions=actions, scopes=scopes,
        needs_priority=needs_priority, is_const=bool(t.is_const_table) or table.immutable,
        const_default=bool(t.const_default_action_id) or table.default_const,
        idle_timeout=t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL, profile=profile)


def _field_map(label: str, mf: Any, position: int, json_kind: str, json_width: int, json_mask: str | None) -> FieldMap:
    where = f"P4Info {label}, match field '{mf.name}' (id {mf.id})"
    if mf.match_type not in _JSON_KINDS:
        other = mf.other_match_type or f"match type {mf.match_type}"
        raise ConfigError(f"{where}: match kind '{other}' is not supported")
    if json_kind not in _JSON_KINDS[mf.match_type]:
        raise ConfigError(f"{where} is {MATCH_TYPE_NAMES[mf.match_type]} but the JSON key is '{json_kind}'")
    if mf.bitwidth <= 0:
        raise ConfigError(f"{where} has bitwidth {mf.bitwidth}")
    shift = 0
    if mf.bitwidth != json_width:
        # A key on a slice f[h:l] is the whole field f with mask ((1 << w) - 1) << l in the JSON.
        mask = int(json_mask, 16) if json_mask else 0
        lsb = (mask & -mask).bit_length() - 1 if mask else -1
        if mf.bitwidth > json_width or mask == 0 or mask != ((1 << mf.bitwidth) - 1) << lsb:
            raise ConfigError(f"{where} is {mf.bitwidth} bits wide but the JSON key field is {json_width} bits")
        shift = lsb
    return FieldMap(mf.id, mf.name, mf.bitwidth, mf.match_type, position, json_kind, json_width, shift)


def _check_action(label: str, am: ActionMap, spec: ActionSpec) -> None:
    if len(am.params) != len(spec.params):
        raise ConfigError(f"P4Info {label}: action '{am.name}' has {len(am.params)} parameters, "
                          f"the JSON action {len(spec.params)}")
    json_names = [n for n, _ in spec.params]
    by_name = all(p.name in json_names for p in am.params) and len(set(json_names)) == len(json_names)
    params = []
    for i, p in enumerate(am.params):
        pos = json_names.index(p.name) if by_name else i
        width = spec.params[pos][1]
        if p.bitwidth != width:
            raise ConfigError(f"P4Info action '{am.name}', parameter '{p.name}' is {p.bitwidth} bits wide, "
                              f"the JSON parameter {width}")
        params.append(ParamMap(p.id, p.name, p.bitwidth, pos))
    am.params = tuple(params)
    am.param_by_id = {p.id: p for p in params}


def _check_controller_header(pm: PacketMetadataMap, program: Program) -> None:
    """Some JSON header type must hold exactly these fields (BMv2 may add ``_padding``)."""
    want = [(name, width) for _, name, width in pm.fields]
    for ht in program.json.get("header_types", []):
        have = [(f[0], f[1]) for f in ht.get("fields", []) if not str(f[0]).startswith("_padding")]
        if have == want:
            return
    desc = ", ".join(f"{n}:{w}" for n, w in want)
    raise ConfigError(f"P4Info controller_packet_metadata '{pm.name}' ({desc}) matches no header type "
                      f"of the BMv2 JSON")
