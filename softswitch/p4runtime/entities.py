"""Action profile members and groups, counters, meters, registers and parser value sets."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from p4.v1 import p4data_pb2, p4runtime_pb2

from ..runtime.tables import TableError
from . import codec
from .errors import P4RTError, from_table_error, invalid, not_found, out_of_range, unimplemented, \
    ALREADY_EXISTS, FAILED_PRECONDITION, RESOURCE_EXHAUSTED
from .p4info_map import EXACT, ProfileMap
from .pipeline import Pipeline
from .reads import ReadScope
from .table_entries import (action_to_proto, counter_values, matches_by_id, meter_config_proto, meter_config_values,
                            resolve_action)

Update = p4runtime_pb2.Update


def _only_modify(utype: int, what: str) -> None:
    if utype != Update.MODIFY:
        raise invalid(f"{what} only supports MODIFY, not {Update.Type.Name(utype)}")


def _op(fn) -> None:
    try:
        fn()
    except TableError as e:
        raise from_table_error(e) from None


# -- action profile members ------------------------------------------------------------------
def _entries_using(pipe: Pipeline, pm: ProfileMap, member: int | None = None, group: int | None = None) -> int:
    n = 0
    for tid in pm.table_ids:
        for e in pipe.map.tables[tid].table:
            if (member is not None and e.member == member) or (group is not None and e.group == group):
                n += 1
    return n


def write_member(pipe: Pipeline, utype: int, msg: p4runtime_pb2.ActionProfileMember) -> None:
    pm = pipe.map.profile(msg.action_profile_id)
    prof = pm.profile
    mid = msg.member_id
    if mid == 0:
        raise invalid("member_id 0 is reserved (it means all members in reads)")
    if utype == Update.DELETE:
        if mid not in prof.members:
            raise not_found(f"action profile '{pm.name}' has no member {mid}")
        users = _entries_using(pipe, pm, member=mid)
        if users:
            raise P4RTError(FAILED_PRECONDITION, f"action profile '{pm.name}': member {mid} is used by {users} "
                                                 f"table entries")
        _op(lambda: prof.delete_member(mid, False))
        return
    if utype not in (Update.INSERT, Update.MODIFY):
        raise invalid("update type is not set")
    if not msg.HasField("action"):
        raise invalid(f"action profile '{pm.name}', member {mid}: the action is not set")
    spec, data = resolve_action(pipe.map, pm.actions, msg.action, f"action profile '{pm.name}'")
    if utype == Update.INSERT:
        _op(lambda: prof.insert_member(mid, spec, data))
    else:
        _op(lambda: prof.modify_member(mid, spec, data))


def _named_by_id(scope: ReadScope, key: tuple, wanted: int, copy_all: Callable[[], dict],
                 copy_one: Callable[[int], Any | None]) -> Iterable[tuple[int, Any]]:
    """(id, copy) of the object ``wanted`` names, or of all of them when it is 0."""
    if wanted:
        one = copy_one(wanted)
        return [(wanted, one)] if one is not None else []
    return scope.once(key, copy_all).items()


def read_members(scope: ReadScope, msg: p4runtime_pb2.ActionProfileMember) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    profiles = [pipe.map.profile(msg.action_profile_id)] if msg.action_profile_id else list(pipe.map.profiles.values())

    def copy(m) -> tuple:                     # modify_member changes a member in place
        return (m.action, m.data)
    sources = [(pm, _named_by_id(
        scope, ("members", pm.id), msg.member_id,
        lambda pm=pm: {m.id: copy(m) for m in pm.profile.members.values()},
        lambda mid, pm=pm: copy(pm.profile.members[mid]) if mid in pm.profile.members else None))
        for pm in profiles]

    def build(item: tuple) -> p4runtime_pb2.Entity:
        pm, mid, (action, data) = item
        e = p4runtime_pb2.ActionProfileMember(action_profile_id=pm.id, member_id=mid)
        a = action_to_proto(pipe.map, action, data)
        if a is not None:
            e.action.CopyFrom(a)
        return p4runtime_pb2.Entity(action_profile_member=e)
    return scope.each(((pm, mid, c) for pm, named in sources for mid, c in named), build)


# -- action profile groups -------------------------------------------------------------------
def write_group(pipe: Pipeline, utype: int, msg: p4runtime_pb2.ActionProfileGroup) -> None:
    pm = pipe.map.profile(msg.action_profile_id)
    prof = pm.profile
    gid = msg.group_id
    if not pm.with_selector:
        raise invalid(f"action profile '{pm.name}' has no selector: it has members only, no groups")
    if gid == 0:
        raise invalid("group_id 0 is reserved (it means all groups in reads)")
    key = (pm.id, gid)
    if utype == Update.DELETE:
        if gid not in prof.groups:
            raise not_found(f"action profile '{pm.name}' has no group {gid}")
        users = _entries_using(pipe, pm, group=gid)
        if users:
            raise P4RTError(FAILED_PRECONDITION, f"action profile '{pm.name}': group {gid} is used by {users} "
                                                 f"table entries")
        _op(lambda: prof.delete_group(gid, False))
        pipe.group_max_size.pop(key, None)
        return
    if utype not in (Update.INSERT, Update.MODIFY):
        raise invalid("update type is not set")
    if utype == Update.INSERT:
        if msg.max_size < 0:
            raise invalid(f"group {gid}: max_size cannot be negative")
        if pm.max_group_size and msg.max_size > pm.max_group_size:
            raise invalid(f"group {gid}: max_size {msg.max_size} exceeds the max_group_size {pm.max_group_size} "
                          f"of action profile '{pm.name}'")
        if gid in prof.groups:
            raise P4RTError(ALREADY_EXISTS, f"action profile '{pm.name}': group {gid} exists")
        user_max = msg.max_size
    else:
        if gid not in prof.groups:
            raise not_found(f"action profile '{pm.name}' has no group {gid}")
        user_max = pipe.group_max_size.get(key, 0)
        if msg.max_size and msg.max_size != user_max:
            raise invalid(f"group {gid}: max_size cannot change after the group was inserted "
                          f"(was {user_max}, got {msg.max_size})")
    weights: dict[int, int] = {}
    for mem in msg.members:
        if mem.weight <= 0:
            raise invalid(f"group {gid}: member {mem.member_id} has weight {mem.weight}; weights must be positive")
        if mem.WhichOneof("watch_kind") is not None:
            raise unimplemented("watch ports of action selector members are not supported")
    total = sum(mem.weight for mem in msg.members)
    limit = user_max or pm.max_group_size
    if limit and total > limit:
        raise P4RTError(RESOURCE_EXHAUSTED, f"group {gid}: the sum of member weights ({total}) exceeds the group's "
                                            f"max size {limit}")
    for mem in msg.members:
        if mem.member_id not in prof.members:
            raise not_found(f"action profile '{pm.name}' has no member {mem.member_id}")
        if mem.member_id in weights:
            raise invalid(f"group {gid}: member {mem.member_id} is listed twice (use its weight instead)")
        weights[mem.member_id] = mem.weight
    if utype == Update.INSERT:
        _op(lambda: prof.insert_group(gid, limit, weights))
    else:
        _op(lambda: prof.modify_group(gid, limit, weights))
    pipe.group_max_size[key] = user_max


def read_groups(scope: ReadScope, msg: p4runtime_pb2.ActionProfileGroup) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    profiles = [pipe.map.profile(msg.action_profile_id)] if msg.action_profile_id else list(pipe.map.profiles.values())

    def copy(pm: ProfileMap, g) -> tuple:     # writes replace a group's weights dict, never change it
        return (g.weights, pipe.group_max_size.get((pm.id, g.id), 0))
    sources = [(pm, _named_by_id(
        scope, ("groups", pm.id), msg.group_id,
        lambda pm=pm: {g.id: copy(pm, g) for g in pm.profile.groups.values()},
        lambda gid, pm=pm: copy(pm, pm.profile.groups[gid]) if gid in pm.profile.groups else None))
        for pm in profiles]

    def build(item: tuple) -> p4runtime_pb2.Entity:
        pm, gid, (weights, max_size) = item
        e = p4runtime_pb2.ActionProfileGroup(action_profile_id=pm.id, group_id=gid, max_size=max_size)
        for mid in sorted(weights):
            e.members.add(member_id=mid, weight=weights[mid])
        return p4runtime_pb2.Entity(action_profile_group=e)
    return scope.each(((pm, gid, c) for pm, named in sources for gid, c in named), build)


# -- indexed arrays --------------------------------------------------------------------------
def _indexes(msg, size: int, name: str) -> range:
    """The cells an entry addresses: its index, or all of them when unset."""
    if not msg.HasField("index"):
        return range(size)
    i = msg.index.index
    if i < 0:
        raise invalid(f"'{name}': index {i} is negative")
    if i >= size:
        raise out_of_range(f"'{name}': index {i} is out of range (size {size})")
    return range(i, i + 1)


def write_counter(pipe: Pipeline, utype: int, msg: p4runtime_pb2.CounterEntry) -> None:
    cm = pipe.map.counter(msg.counter_id)
    _only_modify(utype, "CounterEntry")
    cells = _indexes(msg, cm.size, cm.name)
    if not msg.HasField("data"):
        return
    packets, nbytes = counter_values(msg.data, cm.unit, f"counter '{cm.name}'")
    for i in cells:
        cm.array.write(i, packets, nbytes)


def _cells(scope: ReadScope, msg, key: tuple, size: int, name: str, copy_all: Callable[[], list],
           copy_one: Callable[[int], Any]) -> Iterable[tuple[int, Any]]:
    """(index, copied value) of the cells an entry addresses; a whole array is copied once."""
    cells = _indexes(msg, size, name)
    if msg.HasField("index"):
        return [(i, copy_one(i)) for i in cells]
    return enumerate(scope.once(key, copy_all))


def read_counters(scope: ReadScope, msg: p4runtime_pb2.CounterEntry) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    counters = [pipe.map.counter(msg.counter_id)] if msg.counter_id else list(pipe.map.counters.values())
    sources = [(cm, _cells(scope, msg, ("counter", cm.id), cm.size, cm.name,
                           lambda cm=cm: (cm.array.sync(), list(zip(cm.array.packets, cm.array.bytes)))[1], cm.array.read))
               for cm in counters]

    def build(item: tuple) -> p4runtime_pb2.Entity:
        cm, i, (packets, nbytes) = item
        return p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
            counter_id=cm.id, index=p4runtime_pb2.Index(index=i),
            data=p4runtime_pb2.CounterData(packet_count=packets, byte_count=nbytes)))
    return scope.each(((cm, i, v) for cm, cells in sources for i, v in cells), build)


def write_meter(pipe: Pipeline, utype: int, msg: p4runtime_pb2.MeterEntry) -> None:
    mm = pipe.map.meter(msg.meter_id)
    _only_modify(utype, "MeterEntry")
    if msg.HasField("counter_data"):
        raise unimplemented("per-color meter counters (counter_data) are not supported")
    cells = _indexes(msg, mm.size, mm.name)
    values = meter_config_values(msg.config, mm.type, f"meter '{mm.name}'") if msg.HasField("config") else None
    for i in cells:
        meter = mm.array.meters[i]
        if values is None:
            meter.reset()
        else:
            meter.configure(*values)


def read_meters(scope: ReadScope, msg: p4runtime_pb2.MeterEntry) -> Iterator[p4runtime_pb2.Entity]:
    if msg.HasField("counter_data"):
        raise unimplemented("per-color meter counters (counter_data) are not supported")
    pipe = scope.pipe
    meters = [pipe.map.meter(msg.meter_id)] if msg.meter_id else list(pipe.map.meters.values())
    sources = [(mm, _cells(scope, msg, ("meter", mm.id), mm.size, mm.name,
                           lambda mm=mm: [m.config() for m in mm.array.meters],
                           lambda i, mm=mm: mm.array.meters[i].config()))
               for mm in meters]

    def build(item: tuple) -> p4runtime_pb2.Entity:
        mm, i, config = item
        e = p4runtime_pb2.MeterEntry(meter_id=mm.id, index=p4runtime_pb2.Index(index=i))
        cfg = meter_config_proto(config)
        if cfg is not None:
            e.config.CopyFrom(cfg)
        return p4runtime_pb2.Entity(meter_entry=e)
    return scope.each(((mm, i, v) for mm, cells in sources for i, v in cells), build)


def write_register(pipe: Pipeline, utype: int, msg: p4runtime_pb2.RegisterEntry) -> None:
    rm = pipe.map.register(msg.register_id)
    _only_modify(utype, "RegisterEntry")
    cells = _indexes(msg, rm.size, rm.name)
    if not msg.HasField("data"):
        raise invalid(f"register '{rm.name}': data is not set")
    kind = msg.data.WhichOneof("data")
    if kind != "bitstring":
        raise invalid(f"register '{rm.name}' holds {'int' if rm.signed else 'bit'}<{rm.bitwidth}> values: "
                      f"data must be a bitstring, not {kind or 'nothing'}")
    what = f"register '{rm.name}'"
    if rm.signed:
        value = codec.to_sint(msg.data.bitstring, rm.bitwidth, what) & ((1 << rm.bitwidth) - 1)
    else:
        value = codec.to_uint(msg.data.bitstring, rm.bitwidth, what)
    for i in cells:
        rm.array.write(i, value)


def read_registers(scope: ReadScope, msg: p4runtime_pb2.RegisterEntry) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    registers = [pipe.map.register(msg.register_id)] if msg.register_id else list(pipe.map.registers.values())
    sources = [(rm, _cells(scope, msg, ("register", rm.id), rm.size, rm.name,
                           lambda rm=rm: (rm.array.sync(), list(rm.array.values))[1], rm.array.read))
               for rm in registers]

    def build(item: tuple) -> p4runtime_pb2.Entity:
        rm, i, raw = item
        raw = raw or 0
        data = (codec.from_sint(codec.to_signed(raw, rm.bitwidth)) if rm.signed else codec.from_uint(raw))
        return p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(
            register_id=rm.id, index=p4runtime_pb2.Index(index=i), data=p4data_pb2.P4Data(bitstring=data)))
    return scope.each(((rm, i, v) for rm, cells in sources for i, v in cells), build)


# -- parser value sets -----------------------------------------------------------------------
def write_value_set(pipe: Pipeline, utype: int, msg: p4runtime_pb2.ValueSetEntry) -> None:
    vm = pipe.map.value_set(msg.value_set_id)
    _only_modify(utype, "ValueSetEntry")
    if len(msg.members) > vm.size:
        raise P4RTError(RESOURCE_EXHAUSTED, f"value set '{vm.name}' holds at most {vm.size} members, "
                                            f"{len(msg.members)} given")
    values: list[int] = []
    canonical: list[p4runtime_pb2.ValueSetMember] = []
    for n, member in enumerate(msg.members):
        given = matches_by_id(vm.field_by_id, member.match, f"value set '{vm.name}', member {n}")
        if any(vm.field_by_id[fid].match_type != EXACT for fid in given):
            raise unimplemented(f"value set '{vm.name}': only exact match fields are supported")
        compressed = 0
        out = p4runtime_pb2.ValueSetMember()
        for f in vm.fields:
            fm = given.get(f.id)
            if fm is None:
                raise invalid(f"value set '{vm.name}', member {n}: match field '{f.name}' is missing")
            v = _field_value_vs(vm.name, f, fm)
            compressed = (compressed << f.bitwidth) | v
            out.match.add(field_id=f.id).exact.value = codec.from_uint(v)
        padded = vm.vset.pad(compressed)
        if padded in values:
            raise P4RTError(ALREADY_EXISTS, f"value set '{vm.name}': member {n} is a duplicate")
        values.append(padded)
        canonical.append(out)
    vm.vset.set_values(values)
    pipe.value_set_members[vm.id] = canonical


def _field_value_vs(name: str, f, fm: p4runtime_pb2.FieldMatch) -> int:
    if fm.WhichOneof("field_match_type") != "exact":
        raise invalid(f"value set '{name}', match field '{f.name}' is an exact field")
    return codec.to_uint(fm.exact.value, f.bitwidth, f"value set '{name}', match field '{f.name}'")


def read_value_sets(scope: ReadScope, msg: p4runtime_pb2.ValueSetEntry) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    sets = [pipe.map.value_set(msg.value_set_id)] if msg.value_set_id else list(pipe.map.value_sets.values())
    out = []
    for vm in sets:
        e = p4runtime_pb2.ValueSetEntry(value_set_id=vm.id)
        e.members.extend(pipe.value_set_members.get(vm.id, []))
        out.append(p4runtime_pb2.Entity(value_set_entry=e))
    return iter(out)


# -- digests (configuration only: softswitch sends no DigestList) -----------------------------
def write_digest(pipe: Pipeline, utype: int, msg: p4runtime_pb2.DigestEntry) -> None:
    """Stored and read back as PI does, so controllers that configure digests work; the data
    plane does not generate digests, so no DigestList is ever sent."""
    if msg.digest_id not in pipe.map.digests:
        raise not_found(f"no digest with id {msg.digest_id:#x} in the P4Info")
    configured = msg.digest_id in pipe.digest_configs
    if utype == Update.INSERT:
        if configured:
            raise P4RTError(ALREADY_EXISTS, f"digest {msg.digest_id:#x} is already configured")
    elif utype == Update.MODIFY:
        if not configured:
            raise not_found(f"digest {msg.digest_id:#x} is not configured")
    elif utype == Update.DELETE:
        if not configured:
            raise not_found(f"digest {msg.digest_id:#x} is not configured")
        del pipe.digest_configs[msg.digest_id]
        return
    else:
        raise invalid("update type is not set")
    entry = p4runtime_pb2.DigestEntry()
    entry.CopyFrom(msg)
    pipe.digest_configs[msg.digest_id] = entry


def read_digests(scope: ReadScope, msg: p4runtime_pb2.DigestEntry) -> Iterator[p4runtime_pb2.Entity]:
    pipe = scope.pipe
    if msg.digest_id:
        if msg.digest_id not in pipe.map.digests:
            raise not_found(f"no digest with id {msg.digest_id:#x} in the P4Info")
        if msg.digest_id not in pipe.digest_configs:
            raise not_found(f"digest {msg.digest_id:#x} is not configured")
        ids = [msg.digest_id]
    else:
        ids = sorted(pipe.digest_configs)
    return iter([p4runtime_pb2.Entity(digest_entry=pipe.digest_configs[i]) for i in ids])

