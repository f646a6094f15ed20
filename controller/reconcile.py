"""Desired vs. actual state of a switch: the P4Runtime updates that turn one into the other.

Pure functions over ``p4.v1.Entity`` messages. Entities are compared in canonical form (byte
strings without leading zeros, group members sorted, read-only fields such as counter data
dropped), so what a target reads back - padded or canonical - compares equal to what the
controller wrote. Identity (the key) is, per P4Runtime: table entry -> table id, match, priority;
action profile member -> profile id, member id; group -> profile id, group id; clone session ->
session id; multicast group -> group id.

`plan(desired, actual, owns)` returns the updates in an order a target accepts: inserts and
modifies of PRE entries, members, groups, table entries (dependencies first), then deletes in the
reverse order. Entities in ``actual`` that the controller does not ``own`` (tables and profiles
written by someone else) are left alone.

Default entries (``is_default_action``: how keyless tables are configured) exist from the
pipeline's start and cannot be inserted or deleted: a desired default entry that differs from
what was read back - or that was not read back - becomes a MODIFY; one that is no longer desired
is left as it is. They are owned per table as ``("default", table_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from p4.v1 import p4runtime_pb2

from controller.p4info import canonical

Update = p4runtime_pb2.Update

# Dependency order of entity kinds for inserts (deletes use the reverse).
_ORDER = ["packet_replication_engine_entry", "action_profile_member", "action_profile_group", "table_entry"]


def canonical_entity(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """A copy of ``entity`` with byte strings canonical and read-only fields removed."""
    e = p4runtime_pb2.Entity()
    e.CopyFrom(entity)
    kind = e.WhichOneof("entity")
    if kind == "table_entry":
        t = e.table_entry
        t.ClearField("counter_data")
        t.ClearField("meter_config")
        t.ClearField("meter_counter_data")
        t.ClearField("time_since_last_hit")
        t.is_const = False
        matches = sorted(t.match, key=lambda m: m.field_id)
        t.ClearField("match")
        for m in matches:
            fm = t.match.add()
            fm.CopyFrom(m)
            which = fm.WhichOneof("field_match_type")
            if which == "exact":
                fm.exact.value = canonical(fm.exact.value)
            elif which == "lpm":
                fm.lpm.value = canonical(fm.lpm.value)
            elif which == "ternary":
                fm.ternary.value = canonical(fm.ternary.value)
                fm.ternary.mask = canonical(fm.ternary.mask)
            elif which == "range":
                fm.range.low = canonical(fm.range.low)
                fm.range.high = canonical(fm.range.high)
            elif which == "optional":
                fm.optional.value = canonical(fm.optional.value)
        if t.action.HasField("action"):
            _canonical_action(t.action.action)
    elif kind == "action_profile_member":
        _canonical_action(e.action_profile_member.action)
    elif kind == "action_profile_group":
        g = e.action_profile_group
        members = sorted(((m.member_id, m.weight or 1) for m in g.members))
        g.ClearField("members")
        for mid, weight in members:
            g.members.add(member_id=mid, weight=weight)
        g.max_size = 0  # not read back by every target
    elif kind == "packet_replication_engine_entry":
        pre = e.packet_replication_engine_entry
        if pre.HasField("clone_session_entry"):
            c = pre.clone_session_entry
            replicas = sorted((r.egress_port, r.instance) for r in c.replicas)
            c.ClearField("replicas")
            for port, inst in replicas:
                c.replicas.add(egress_port=port, instance=inst)
    return e


def _canonical_action(action: p4runtime_pb2.Action) -> None:
    params = sorted(action.params, key=lambda p: p.param_id)
    action.ClearField("params")
    for p in params:
        action.params.add(param_id=p.param_id, value=canonical(p.value))


def is_default_entry(entity: p4runtime_pb2.Entity) -> bool:
    return entity.WhichOneof("entity") == "table_entry" and entity.table_entry.is_default_action


def entity_key(entity: p4runtime_pb2.Entity) -> tuple:
    """The identity of an entity (what INSERT/DELETE refer to)."""
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        if entity.table_entry.is_default_action:
            return (kind, entity.table_entry.table_id, "default")
        t = canonical_entity(entity).table_entry
        return (kind, t.table_id, tuple(m.SerializeToString(deterministic=True) for m in t.match), t.priority)
    if kind == "action_profile_member":
        m = entity.action_profile_member
        return (kind, m.action_profile_id, m.member_id)
    if kind == "action_profile_group":
        g = entity.action_profile_group
        return (kind, g.action_profile_id, g.group_id)
    if kind == "packet_replication_engine_entry":
        pre = entity.packet_replication_engine_entry
        if pre.HasField("clone_session_entry"):
            return (kind, "clone", pre.clone_session_entry.session_id)
        return (kind, "multicast", pre.multicast_group_entry.multicast_group_id)
    raise ValueError(f"entities of kind {kind} are not reconciled")


def owner_key(entity: p4runtime_pb2.Entity) -> tuple:
    """What "owning" an entity means: its table, its action profile, or its PRE entry kind."""
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        if entity.table_entry.is_default_action:
            return ("default", entity.table_entry.table_id)
        return ("table", entity.table_entry.table_id)
    if kind in ("action_profile_member", "action_profile_group"):
        obj = getattr(entity, kind)
        return ("profile", obj.action_profile_id)
    if kind == "packet_replication_engine_entry":
        return entity_key(entity)
    raise ValueError(f"entities of kind {kind} are not reconciled")


@dataclass
class Plan:
    inserts: list[p4runtime_pb2.Entity] = field(default_factory=list)
    modifies: list[p4runtime_pb2.Entity] = field(default_factory=list)
    deletes: list[p4runtime_pb2.Entity] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.inserts or self.modifies or self.deletes)

    def updates(self) -> list[Update]:
        """Updates in dependency order: inserts/modifies parents-first, deletes children-first."""
        rank: Callable[[p4runtime_pb2.Entity], int] = lambda e: _ORDER.index(e.WhichOneof("entity"))
        out: list[Update] = []
        for kind in _ORDER:
            out += [Update(type=Update.INSERT, entity=e) for e in self.inserts if e.WhichOneof("entity") == kind]
            out += [Update(type=Update.MODIFY, entity=e) for e in self.modifies if e.WhichOneof("entity") == kind]
        for e in sorted(self.deletes, key=rank, reverse=True):
            out.append(Update(type=Update.DELETE, entity=e))
        return out

    def summary(self) -> str:
        return f"{len(self.inserts)} inserts, {len(self.modifies)} modifies, {len(self.deletes)} deletes"


def plan(
    desired: Iterable[p4runtime_pb2.Entity],
    actual: Iterable[p4runtime_pb2.Entity],
    owns: set[tuple] | None = None,
) -> Plan:
    """Updates that make ``actual`` equal ``desired`` over what the controller owns.

    ``owns`` is a set of `owner_key`s; None means: whatever ``desired`` touches."""
    want = {entity_key(e): e for e in desired}
    if owns is None:
        owns = {owner_key(e) for e in want.values()}
    have = {}
    for e in actual:
        if owner_key(e) in owns:
            have[entity_key(e)] = e
    result = Plan()
    for key, e in want.items():
        if key not in have:
            (result.modifies if is_default_entry(e) else result.inserts).append(e)
        elif canonical_entity(have[key]).SerializeToString(deterministic=True) != canonical_entity(e).SerializeToString(
            deterministic=True
        ):
            result.modifies.append(e)
    for key, e in have.items():
        if key not in want and not is_default_entry(e):
            result.deletes.append(_deletable(e))
    return result


def _deletable(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """An entity as read back, reduced to what a DELETE needs (no counter data etc.)."""
    return canonical_entity(entity)
