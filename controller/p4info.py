"""P4Info helper: names <-> ids, canonical P4Runtime byte strings, readable descriptions.

`P4Info` wraps one ``p4.config.v1.P4Info`` message. Objects are looked up by their fully
qualified name (``FabricIngress.forwarding.routing_v4``) or by their P4Info alias (the shortest
unique suffix, e.g. ``routing_v4``); an unknown name raises `P4InfoError` listing what exists.

Values follow the P4Runtime spec's canonical binary form (section 8.4): big-endian, the shortest
string that holds the value, ``0`` -> ``b"\\x00"``. `encode` accepts ints, bytes, MAC strings
(``aa:bb:cc:dd:ee:ff``) and IPv4/IPv6 addresses (strings or ``ipaddress`` objects) and checks that
the value fits the bit width; `decode` accepts canonical or zero-padded strings.

The builders (`table_entry`, `action`, `counter_entry`, ...) return protobuf messages ready for
`controller.switch.SwitchConnection.write`; `describe_entity` renders one back into text such as
``FabricIngress.forwarding.routing_v4 [hdr.ipv4.dst_addr=10.0.1.0/24] -> set_next_id(next_id=3)``
for error messages and logs.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

Value = Union[int, bytes, str, ipaddress.IPv4Address, ipaddress.IPv6Address]
# Match values: exact/optional -> Value; lpm -> (Value, prefix_len) or "10.0.0.0/8" or an
# ip_network; ternary -> (Value, mask); range -> (low, high).
MatchValue = Union[Value, tuple[Value, int], tuple[Value, Value], ipaddress.IPv4Network, ipaddress.IPv6Network]


class P4InfoError(KeyError):
    """A name or value that does not fit the P4Info (the message names it)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# --- canonical values -------------------------------------------------------------------------


def to_int(value: Value, bitwidth: int | None = None) -> int:
    """Turn an int, bytes, MAC string or IP address (string or object) into an integer."""
    if isinstance(value, bool):
        raise P4InfoError(f"boolean {value!r} is not a P4Runtime value")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.count(":") == 5 and all(len(p) in (1, 2) for p in text.split(":")) and "::" not in text:
            try:
                return int("".join(p.zfill(2) for p in text.split(":")), 16)
            except ValueError:
                pass
        try:
            return int(ipaddress.ip_address(text))
        except ValueError:
            pass
        try:
            return int(text, 0)
        except ValueError:
            raise P4InfoError(f"cannot read {value!r} as a MAC, IP address or number") from None
    raise P4InfoError(f"cannot encode {value!r} ({type(value).__name__}) as a P4Runtime value")


def encode_int(value: int, bitwidth: int) -> bytes:
    """Canonical encoding of a non-negative integer that must fit ``bitwidth`` bits."""
    if value < 0:
        raise P4InfoError(f"value {value} is negative")
    if bitwidth > 0 and value >= 1 << bitwidth:
        raise P4InfoError(f"value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode(value: Value, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytes of ``value`` for a field of ``bitwidth`` bits."""
    return encode_int(to_int(value, bitwidth), bitwidth)


def decode(data: bytes) -> int:
    """Integer of a P4Runtime byte string (canonical or padded)."""
    return int.from_bytes(data, "big")


def canonical(data: bytes) -> bytes:
    """Strip leading zero bytes (keeping one for zero)."""
    stripped = data.lstrip(b"\x00")
    return stripped or b"\x00"


def format_value(value: int, bitwidth: int, name: str = "") -> str:
    """Readable text for a field value: MAC for 48 bits, IPv6 for 128, dotted IPv4 for 32-bit
    fields whose name mentions an IP address, decimal otherwise."""
    lname = name.lower()
    if bitwidth == 48:
        raw = f"{value:012x}"
        return ":".join(raw[i : i + 2] for i in range(0, 12, 2))
    if bitwidth == 128 and value < 1 << 128:
        return str(ipaddress.IPv6Address(value))
    if bitwidth == 32 and value < 1 << 32 and ("ip" in lname or "addr" in lname):
        return str(ipaddress.IPv4Address(value))
    return str(value)


# --- P4Info ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str  # "exact", "lpm", "ternary", "range", "optional"


_MATCH_KINDS = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}


class P4Info:
    """Names -> ids (and back) for one pipeline's P4Info, and builders of P4Runtime entities."""

    def __init__(self, message: p4info_pb2.P4Info) -> None:
        self.message = message
        self._by_name: dict[str, dict[str, Any]] = {}
        self._by_id: dict[int, Any] = {}
        for kind in (
            "tables",
            "actions",
            "action_profiles",
            "counters",
            "direct_counters",
            "meters",
            "direct_meters",
            "controller_packet_metadata",
            "registers",
            "digests",
        ):
            names: dict[str, Any] = {}
            for obj in getattr(message, kind):
                pre = obj.preamble
                names[pre.name] = obj
                if pre.alias and pre.alias not in names:
                    names[pre.alias] = obj
                self._by_id[pre.id] = obj
            self._by_name[kind] = names

    @classmethod
    def from_file(cls, path: str | Path) -> "P4Info":
        """Load a P4Info in text format (``.txt``, ``.txtpb``, ``.pb.txt``) or binary (others)."""
        path = Path(path)
        data = path.read_bytes()
        msg = p4info_pb2.P4Info()
        if path.suffix in (".txt", ".txtpb", ".textproto") or path.name.endswith(".pb.txt"):
            text_format.Parse(data.decode(), msg, allow_unknown_field=True)
        else:
            msg.ParseFromString(data)
        return cls(msg)

    # --- lookups ---------------------------------------------------------------------------

    def _get(self, kind: str, name: str) -> Any:
        try:
            return self._by_name[kind][name]
        except KeyError:
            known = sorted({o.preamble.name for o in self._by_name[kind].values()})
            raise P4InfoError(f"no {kind[:-1].replace('_', ' ')} named {name!r} in the P4Info; known: {known}") from None

    def table(self, name: str) -> p4info_pb2.Table:
        return self._get("tables", name)

    def action_info(self, name: str) -> p4info_pb2.Action:
        return self._get("actions", name)

    def action_profile(self, name: str) -> p4info_pb2.ActionProfile:
        return self._get("action_profiles", name)

    def counter(self, name: str) -> p4info_pb2.Counter:
        return self._get("counters", name)

    def direct_counter(self, name: str) -> p4info_pb2.DirectCounter:
        return self._get("direct_counters", name)

    def register(self, name: str) -> p4info_pb2.Register:
        return self._get("registers", name)

    def packet_metadata(self, name: str) -> p4info_pb2.ControllerPacketMetadata:
        """``packet_in`` or ``packet_out`` controller header."""
        return self._get("controller_packet_metadata", name)

    def table_id(self, name: str) -> int:
        return self.table(name).preamble.id

    def action_id(self, name: str) -> int:
        return self.action_info(name).preamble.id

    def action_profile_id(self, name: str) -> int:
        return self.action_profile(name).preamble.id

    def counter_id(self, name: str) -> int:
        return self.counter(name).preamble.id

    def name_of(self, object_id: int) -> str:
        obj = self._by_id.get(object_id)
        return obj.preamble.name if obj is not None else f"<id {object_id:#x}>"

    def match_field(self, table: str, field: str) -> MatchFieldInfo:
        t = self.table(table)
        for mf in t.match_fields:
            if mf.name == field:
                return MatchFieldInfo(mf.id, mf.name, mf.bitwidth, _MATCH_KINDS.get(mf.match_type, "other"))
        known = [mf.name for mf in t.match_fields]
        raise P4InfoError(f"table {t.preamble.name} has no match field {field!r}; its fields: {known}")

    def match_field_by_id(self, table_id: int, field_id: int) -> MatchFieldInfo:
        t = self._by_id[table_id]
        for mf in t.match_fields:
            if mf.id == field_id:
                return MatchFieldInfo(mf.id, mf.name, mf.bitwidth, _MATCH_KINDS.get(mf.match_type, "other"))
        raise P4InfoError(f"table {t.preamble.name} has no match field id {field_id}")

    def action_param(self, action: str, param: str) -> p4info_pb2.Action.Param:
        a = self.action_info(action)
        for p in a.params:
            if p.name == param:
                return p
        known = [p.name for p in a.params]
        raise P4InfoError(f"action {a.preamble.name} has no parameter {param!r}; its parameters: {known}")

    def table_action_profile(self, table: str) -> p4info_pb2.ActionProfile | None:
        """The action profile/selector that implements ``table``, if any."""
        impl = self.table(table).implementation_id
        return self._by_id.get(impl) if impl else None

    def packet_metadata_field(self, header: str, field: str) -> p4info_pb2.ControllerPacketMetadata.Metadata:
        h = self.packet_metadata(header)
        for m in h.metadata:
            if m.name == field:
                return m
        raise P4InfoError(f"controller header {header} has no field {field!r}; its fields: {[m.name for m in h.metadata]}")

    # --- builders --------------------------------------------------------------------------

    def field_match(self, table: str, field: str, value: MatchValue) -> p4runtime_pb2.FieldMatch:
        info = self.match_field(table, field)
        fm = p4runtime_pb2.FieldMatch(field_id=info.id)
        where = f"{self.table(table).preamble.name} field {field}"
        try:
            if info.kind in ("exact", "optional"):
                target = fm.exact if info.kind == "exact" else fm.optional
                target.value = encode(value, info.bitwidth)  # type: ignore[arg-type]
            elif info.kind == "lpm":
                addr, plen = _lpm_parts(value)
                if not 0 <= plen <= info.bitwidth:
                    raise P4InfoError(f"prefix length {plen} outside 0..{info.bitwidth}")
                num = to_int(addr, info.bitwidth)
                host_bits = info.bitwidth - plen
                num = (num >> host_bits) << host_bits  # canonical: no bits beyond the prefix
                fm.lpm.value = encode_int(num, info.bitwidth)
                fm.lpm.prefix_len = plen
            elif info.kind == "ternary":
                val, mask = value  # type: ignore[misc]
                m = to_int(mask, info.bitwidth)
                fm.ternary.value = encode_int(to_int(val, info.bitwidth) & m, info.bitwidth)
                fm.ternary.mask = encode_int(m, info.bitwidth)
            elif info.kind == "range":
                low, high = value  # type: ignore[misc]
                fm.range.low = encode(low, info.bitwidth)
                fm.range.high = encode(high, info.bitwidth)
            else:
                raise P4InfoError(f"match kind {info.kind} is not supported")
        except P4InfoError as exc:
            raise P4InfoError(f"{where} ({info.kind}, {info.bitwidth} bits): {exc}") from None
        except (TypeError, ValueError) as exc:
            raise P4InfoError(f"{where} ({info.kind}, {info.bitwidth} bits): bad value {value!r}: {exc}") from None
        return fm

    def action(self, name: str, **params: Value) -> p4runtime_pb2.Action:
        a = self.action_info(name)
        msg = p4runtime_pb2.Action(action_id=a.preamble.id)
        given = dict(params)
        for p in a.params:
            if p.name not in given:
                raise P4InfoError(f"action {a.preamble.name} needs parameter {p.name!r}")
            try:
                value = encode(given.pop(p.name), p.bitwidth)
            except P4InfoError as exc:
                raise P4InfoError(f"action {a.preamble.name} parameter {p.name}: {exc}") from None
            msg.params.add(param_id=p.id, value=value)
        if given:
            raise P4InfoError(f"action {a.preamble.name} has no parameter(s) {sorted(given)}")
        return msg

    def table_entry(
        self,
        table: str,
        match: Mapping[str, MatchValue] | None = None,
        *,
        action: str | None = None,
        params: Mapping[str, Value] | None = None,
        group_id: int | None = None,
        member_id: int | None = None,
        priority: int = 0,
        default: bool = False,
    ) -> p4runtime_pb2.TableEntry:
        """A table entry with exactly one of: ``action`` (+ ``params``), ``group_id`` or
        ``member_id`` (tables behind an action profile). Ternary/range/optional tables need a
        priority > 0."""
        t = self.table(table)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id, priority=priority, is_default_action=default)
        for field, value in (match or {}).items():
            entry.match.append(self.field_match(table, field, value))
        chosen = [x is not None for x in (action, group_id, member_id)]
        if sum(chosen) != 1:
            raise P4InfoError(f"table {t.preamble.name}: give exactly one of action, group_id, member_id")
        if action is not None:
            entry.action.action.CopyFrom(self.action(action, **(params or {})))
        elif group_id is not None:
            entry.action.action_profile_group_id = group_id
        else:
            entry.action.action_profile_member_id = member_id  # type: ignore[assignment]
        return entry

    def profile_member(self, profile: str, member_id: int, action: str, **params: Value) -> p4runtime_pb2.ActionProfileMember:
        return p4runtime_pb2.ActionProfileMember(
            action_profile_id=self.action_profile_id(profile),
            member_id=member_id,
            action=self.action(action, **params),
        )

    def profile_group(
        self, profile: str, group_id: int, members: Sequence[int], max_size: int = 0
    ) -> p4runtime_pb2.ActionProfileGroup:
        group = p4runtime_pb2.ActionProfileGroup(
            action_profile_id=self.action_profile_id(profile), group_id=group_id, max_size=max_size
        )
        for m in members:
            group.members.add(member_id=m, weight=1)
        return group

    def counter_entry(self, counter: str, index: int | None = None) -> p4runtime_pb2.CounterEntry:
        """A counter entry to read: one index, or all cells when ``index`` is None."""
        entry = p4runtime_pb2.CounterEntry(counter_id=self.counter_id(counter))
        if index is not None:
            entry.index.index = index
        return entry

    def packet_out(self, payload: bytes, **metadata: Value) -> p4runtime_pb2.PacketOut:
        h = self.packet_metadata("packet_out")
        msg = p4runtime_pb2.PacketOut(payload=payload)
        for m in h.metadata:
            if m.name in metadata:
                msg.metadata.add(metadata_id=m.id, value=encode(metadata[m.name], m.bitwidth))
        unknown = set(metadata) - {m.name for m in h.metadata}
        if unknown:
            raise P4InfoError(f"packet_out has no metadata {sorted(unknown)}")
        return msg

    def packet_in_metadata(self, packet: p4runtime_pb2.PacketIn) -> dict[str, int]:
        h = self.packet_metadata("packet_in")
        names = {m.id: m.name for m in h.metadata}
        return {names.get(m.metadata_id, str(m.metadata_id)): decode(m.value) for m in packet.metadata}

    # --- descriptions ----------------------------------------------------------------------

    def describe_action(self, action: p4runtime_pb2.Action) -> str:
        a = self._by_id.get(action.action_id)
        if a is None:
            return f"<action id {action.action_id:#x}>"
        widths = {p.id: (p.name, p.bitwidth) for p in a.params}
        args = []
        for p in action.params:
            pname, width = widths.get(p.param_id, (str(p.param_id), 0))
            args.append(f"{pname}={format_value(decode(p.value), width, pname)}")
        return f"{a.preamble.name}({', '.join(args)})"

    def describe_match(self, entry: p4runtime_pb2.TableEntry) -> str:
        parts = []
        for fm in entry.match:
            try:
                info = self.match_field_by_id(entry.table_id, fm.field_id)
                name, width = info.name, info.bitwidth
            except (KeyError, P4InfoError):
                name, width = str(fm.field_id), 0
            which = fm.WhichOneof("field_match_type")
            if which == "exact":
                text = format_value(decode(fm.exact.value), width, name)
            elif which == "optional":
                text = format_value(decode(fm.optional.value), width, name)
            elif which == "lpm":
                text = f"{format_value(decode(fm.lpm.value), width, name)}/{fm.lpm.prefix_len}"
            elif which == "ternary":
                text = f"{format_value(decode(fm.ternary.value), width, name)}&&&{decode(fm.ternary.mask):#x}"
            elif which == "range":
                text = f"{decode(fm.range.low)}..{decode(fm.range.high)}"
            else:
                text = "?"
            parts.append(f"{name}={text}")
        if entry.priority:
            parts.append(f"priority={entry.priority}")
        return "[" + ", ".join(parts) + "]" if parts else "[default]"

    def describe_entity(self, entity: p4runtime_pb2.Entity) -> str:
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            e = entity.table_entry
            act = e.action
            kind = act.WhichOneof("type")
            if kind == "action":
                target = self.describe_action(act.action)
            elif kind == "action_profile_group_id":
                target = f"group {act.action_profile_group_id}"
            elif kind == "action_profile_member_id":
                target = f"member {act.action_profile_member_id}"
            else:
                target = "(no action)"
            return f"table {self.name_of(e.table_id)} {self.describe_match(e)} -> {target}"
        if which == "action_profile_member":
            m = entity.action_profile_member
            return f"{self.name_of(m.action_profile_id)} member {m.member_id} -> {self.describe_action(m.action)}"
        if which == "action_profile_group":
            g = entity.action_profile_group
            return f"{self.name_of(g.action_profile_id)} group {g.group_id} members {[m.member_id for m in g.members]}"
        if which == "packet_replication_engine_entry":
            pre = entity.packet_replication_engine_entry
            if pre.HasField("clone_session_entry"):
                c = pre.clone_session_entry
                return f"clone session {c.session_id} -> ports {[r.egress_port for r in c.replicas]}"
            if pre.HasField("multicast_group_entry"):
                mg = pre.multicast_group_entry
                return f"multicast group {mg.multicast_group_id} -> ports {[r.egress_port for r in mg.replicas]}"
        if which == "counter_entry":
            c = entity.counter_entry
            return f"counter {self.name_of(c.counter_id)}[{c.index.index if c.HasField('index') else '*'}]"
        return f"{which} entity"


def _lpm_parts(value: MatchValue) -> tuple[Value, int]:
    if isinstance(value, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return value.network_address, value.prefixlen
    if isinstance(value, str) and "/" in value:
        net = ipaddress.ip_network(value, strict=False)
        return net.network_address, net.prefixlen
    if isinstance(value, tuple) and len(value) == 2:
        return value[0], int(value[1])  # type: ignore[arg-type]
    raise P4InfoError(f"LPM value {value!r} must be (value, prefix_len), 'addr/len' or an ip_network")
