"""PacketReplicationEngineEntry: multicast groups and clone sessions.

Limits are those simple_switch_grpc has through PI: multicast group ids 1..32767 (PI keeps
32768 and above for the groups behind clone sessions), clone session ids 1..32767, egress
ports 0..511, replication ids (``instance``) 0..65535, no class of service for clone sessions.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from p4.v1 import p4runtime_pb2

from ..runtime.tables import TableError
from .errors import P4RTError, from_table_error, invalid, not_found, out_of_range, unimplemented, ALREADY_EXISTS
from .pipeline import CloneSessionRecord, McGroupRecord, PreState, ReplicaRecord
from .reads import ReadScope

Update = p4runtime_pb2.Update
FIRST_RESERVED_GROUP = 1 << 15        # PI's PreMcMgr::first_reserved_group_id()
MAX_CLONE_SESSION = (1 << 15) - 1     # PI's kMaxCloneSessionId - 1
MAX_PORT = 511                        # simple_switch's port numbers are 9 bits
MAX_INSTANCE = 0xFFFF                 # egress_rid is 16 bits


def _replicas(replicas, what: str) -> list[ReplicaRecord]:
    out, seen = [], set()
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        if kind == "egress_port":
            port, raw = r.egress_port, None
        elif kind == "port":
            raw = r.port
            if not raw:
                raise invalid(f"{what}: a replica's port is an empty string")
            if len(raw) > 4:
                raise unimplemented(f"{what}: ports of more than 4 bytes are not supported")
            port = int.from_bytes(raw, "big")
        else:
            raise invalid(f"{what}: a replica has no port")
        if port > MAX_PORT:
            raise invalid(f"{what}: egress port {port} is outside 0..{MAX_PORT}")
        if r.instance > MAX_INSTANCE:
            raise invalid(f"{what}: replica instance {r.instance} is outside 0..{MAX_INSTANCE}")
        if (port, r.instance) in seen:
            raise invalid(f"{what}: replica (port {port}, instance {r.instance}) is given twice")
        seen.add((port, r.instance))
        out.append(ReplicaRecord(port, r.instance, raw))
    return out


def _replica_protos(records: list[ReplicaRecord]) -> list[p4runtime_pb2.Replica]:
    out = []
    for r in sorted(records, key=lambda r: (r.instance, r.port)):
        rep = p4runtime_pb2.Replica(instance=r.instance)
        if r.port_bytes is not None:
            rep.port = r.port_bytes
        else:
            rep.egress_port = r.port
        out.append(rep)
    return out


def _op(fn) -> None:
    try:
        fn()
    except TableError as e:
        raise from_table_error(e) from None


def write_pre(pre: PreState, utype: int, msg: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
    kind = msg.WhichOneof("type")
    if kind == "multicast_group_entry":
        return _write_group(pre, utype, msg.multicast_group_entry)
    if kind == "clone_session_entry":
        return _write_session(pre, utype, msg.clone_session_entry)
    raise invalid("PacketReplicationEngineEntry has neither a multicast group nor a clone session")


def _check_group_id(gid: int) -> None:
    if gid == 0:
        raise invalid("multicast group id 0 is reserved (it means all groups in reads)")
    if gid >= FIRST_RESERVED_GROUP:
        raise out_of_range(f"multicast group id {gid} is too high (at most {FIRST_RESERVED_GROUP - 1})")


def _deleted(records: dict, key: int, what: str, utype: int, delete: Callable[[int], None]) -> bool:
    """Whether ``utype`` was a DELETE, now done (``key``'s engine entry and its record gone);
    otherwise the INSERT of a key not yet written or the MODIFY of one that is, checked."""
    exists = key in records
    if utype not in (Update.INSERT, Update.MODIFY, Update.DELETE):
        raise invalid("update type is not set")
    if utype == Update.INSERT and exists:
        raise P4RTError(ALREADY_EXISTS, f"{what} exists")
    if utype != Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")
    if utype != Update.DELETE:
        return False
    _op(lambda: delete(key))
    del records[key]
    return True


def _write_group(pre: PreState, utype: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
    gid = g.multicast_group_id
    _check_group_id(gid)
    what = f"multicast group {gid}"
    if _deleted(pre.groups, gid, what, utype, pre.engine.delete_group):
        return
    replicas = _replicas(g.replicas, what)
    pairs = [(r.port, r.instance) for r in replicas]
    write = pre.engine.insert_group if utype == Update.INSERT else pre.engine.modify_group
    _op(lambda: write(gid, pairs))
    pre.groups[gid] = McGroupRecord(replicas, g.metadata)


def _write_session(pre: PreState, utype: int, s: p4runtime_pb2.CloneSessionEntry) -> None:
    sid = s.session_id
    if sid == 0:
        raise invalid("clone session id 0 is reserved (it means all sessions in reads)")
    if sid > MAX_CLONE_SESSION:
        raise invalid(f"clone session id {sid} is outside 1..{MAX_CLONE_SESSION}")
    what = f"clone session {sid}"
    if _deleted(pre.sessions, sid, what, utype, pre.engine.delete_session):
        return
    replicas = _replicas(s.replicas, what)
    if s.class_of_service:
        raise unimplemented(f"{what}: class of service is not supported (as on BMv2)")
    if not 0 <= s.packet_length_bytes <= 0xFFFF:
        raise invalid(f"{what}: packet_length_bytes {s.packet_length_bytes} is outside 0..65535")
    pairs = [(r.port, r.instance) for r in replicas]
    write = pre.engine.insert_session if utype == Update.INSERT else pre.engine.modify_session
    _op(lambda: write(sid, pairs, 0, s.packet_length_bytes))
    pre.sessions[sid] = CloneSessionRecord(replicas, 0, s.packet_length_bytes)


def read_pre(scope: ReadScope, msg: p4runtime_pb2.PacketReplicationEngineEntry) -> Iterator[p4runtime_pb2.Entity]:
    """Multicast groups or clone sessions; writes replace their records, never change them, so
    a copy of the dict is a copy of the state."""
    pre: PreState = scope.pipe.pre
    kind = msg.WhichOneof("type")
    if kind == "multicast_group_entry":
        gid = msg.multicast_group_entry.multicast_group_id
        if gid >= FIRST_RESERVED_GROUP:
            raise out_of_range(f"multicast group id {gid} is too high (at most {FIRST_RESERVED_GROUP - 1})")
        return scope.each(_one_or_all(scope, pre.groups, gid, "multicast group"), _group_entity)
    if kind == "clone_session_entry":
        sid = msg.clone_session_entry.session_id
        return scope.each(_one_or_all(scope, pre.sessions, sid, "clone session"), _session_entity)
    raise invalid("PacketReplicationEngineEntry has neither a multicast group nor a clone session")


def _one_or_all(scope: ReadScope, records: dict, key: int, what: str) -> list[tuple[int, Any]]:
    """(key, record) of ``key``, or of every record where ``key`` is 0 (a wildcard read)."""
    if not key:
        return sorted(scope.once(f"{what}s", lambda: dict(records)).items())
    if key not in records:
        raise not_found(f"{what} {key} does not exist")
    return [(key, records[key])]


def _group_entity(item: tuple[int, McGroupRecord]) -> p4runtime_pb2.Entity:
    gid, rec = item
    e = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=gid, metadata=rec.metadata)
    e.replicas.extend(_replica_protos(rec.replicas))
    return p4runtime_pb2.Entity(
        packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=e))


def _session_entity(item: tuple[int, CloneSessionRecord]) -> p4runtime_pb2.Entity:
    sid, rec = item
    e = p4runtime_pb2.CloneSessionEntry(session_id=sid, class_of_service=rec.class_of_service,
                                        packet_length_bytes=rec.packet_length_bytes)
    e.replicas.extend(_replica_protos(rec.replicas))
    return p4runtime_pb2.Entity(
        packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=e))
