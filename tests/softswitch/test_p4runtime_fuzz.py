"""Mutated P4Runtime messages thrown at a softswitch process: every RPC ends with a status within
its deadline, none of them is INTERNAL (the server's word for its own bug), the process lives, and
a good controller is served afterwards.

The messages start as valid ones built from the P4Info of the test programs (an entity of every
kind the program has, Write batches and Reads of them, pipeline pushes, stream messages); each is
then changed at random, with a fixed seed: fields set to edge values (zero, all ones, far too
wide, negative, unknown enum values), sub-messages cleared or repeated, and the serialized bytes
flipped, cut, spliced and duplicated. The number of messages is fixed, so the test takes the
same bounded time on every run.
"""
from __future__ import annotations

import random
import time

import grpc
import pytest
from google.protobuf import descriptor
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from p4rt_support import INS, CompiledProgram, Client, require_program, softswitch_process

SEED = 20240611
PROGRAMS = ("tables", "stateful", "parser_features", "packetio", "replication")
WRITES, READS, PIPELINES, STREAMS = 600, 300, 20, 10      # per program
STREAM_MESSAGES = 12
DEADLINE = 10.0                                          # seconds per RPC
PRIMARY = (0, 1000)                                      # above any election id the fuzzer starts with

Set = pb.SetForwardingPipelineConfigRequest


# -- valid messages from a P4Info --------------------------------------------------------------------
def _one(bits: int) -> bytes:
    return (1).to_bytes(max(1, (bits + 7) // 8), "big")


def _field_match(mf: p4info_pb2.MatchField) -> pb.FieldMatch:
    fm = pb.FieldMatch(field_id=mf.id)
    kind = mf.match_type
    if kind == p4info_pb2.MatchField.LPM:
        fm.lpm.value, fm.lpm.prefix_len = (1 << (mf.bitwidth - 1)).to_bytes((mf.bitwidth + 7) // 8, "big"), 1
    elif kind == p4info_pb2.MatchField.TERNARY:
        fm.ternary.value, fm.ternary.mask = _one(mf.bitwidth), _one(mf.bitwidth)
    elif kind == p4info_pb2.MatchField.RANGE:
        fm.range.low, fm.range.high = _one(mf.bitwidth), (2).to_bytes(max(1, (mf.bitwidth + 7) // 8), "big")
    elif kind == p4info_pb2.MatchField.OPTIONAL:
        fm.optional.value = _one(mf.bitwidth)
    else:
        fm.exact.value = _one(mf.bitwidth)
    return fm


def _action(info: p4info_pb2.P4Info, action_id: int) -> pb.Action:
    a = next(x for x in info.actions if x.preamble.id == action_id)
    return pb.Action(action_id=action_id, params=[pb.Action.Param(param_id=p.id, value=_one(p.bitwidth))
                                                   for p in a.params])


def seed_entities(info: p4info_pb2.P4Info) -> list[pb.Entity]:
    """An entity of every kind the P4Info has, valid for it, plus wildcards for reads."""
    out: list[pb.Entity] = []
    keys = {}
    for t in info.tables:
        te = pb.TableEntry(table_id=t.preamble.id, match=[_field_match(mf) for mf in t.match_fields])
        if any(mf.match_type in (p4info_pb2.MatchField.TERNARY, p4info_pb2.MatchField.RANGE,
                                 p4info_pb2.MatchField.OPTIONAL) for mf in t.match_fields):
            te.priority = 10
        if t.implementation_id:
            te.action.action_profile_member_id = 1
        elif t.action_refs:
            te.action.action.CopyFrom(_action(info, t.action_refs[0].id))
        keys[t.preamble.id] = te
        out += [pb.Entity(table_entry=te), pb.Entity(table_entry=pb.TableEntry(table_id=t.preamble.id)),
                pb.Entity(table_entry=pb.TableEntry(table_id=t.preamble.id, is_default_action=True))]
    for p in info.action_profiles:
        table = next((t for t in info.tables if t.implementation_id == p.preamble.id), None)
        if table is not None and table.action_refs:
            out.append(pb.Entity(action_profile_member=pb.ActionProfileMember(
                action_profile_id=p.preamble.id, member_id=1, action=_action(info, table.action_refs[0].id))))
        out.append(pb.Entity(action_profile_group=pb.ActionProfileGroup(
            action_profile_id=p.preamble.id, group_id=1, members=[pb.ActionProfileGroup.Member(member_id=1, weight=1)])))
    for c in info.counters:
        out.append(pb.Entity(counter_entry=pb.CounterEntry(counter_id=c.preamble.id, index=pb.Index(index=0),
                                                           data=pb.CounterData(packet_count=1, byte_count=64))))
    for m in info.meters:
        out.append(pb.Entity(meter_entry=pb.MeterEntry(meter_id=m.preamble.id, index=pb.Index(index=0),
                                                       config=pb.MeterConfig(cir=1000, cburst=100, pir=2000,
                                                                             pburst=200))))
    for r in info.registers:
        out.append(pb.Entity(register_entry=pb.RegisterEntry(register_id=r.preamble.id, index=pb.Index(index=0),
                                                             data={"bitstring": b"\x01"})))
    for d in info.direct_counters:
        out.append(pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
            table_entry=keys[d.direct_table_id], data=pb.CounterData(packet_count=5))))
    for d in info.direct_meters:
        out.append(pb.Entity(direct_meter_entry=pb.DirectMeterEntry(
            table_entry=keys[d.direct_table_id], config=pb.MeterConfig(cir=10, cburst=10, pir=10, pburst=10))))
    for v in info.value_sets:
        out.append(pb.Entity(value_set_entry=pb.ValueSetEntry(value_set_id=v.preamble.id, members=[
            pb.ValueSetMember(match=[_field_match(mf) for mf in v.match])])))
    pre = pb.PacketReplicationEngineEntry
    out.append(pb.Entity(packet_replication_engine_entry=pre(multicast_group_entry=pb.MulticastGroupEntry(
        multicast_group_id=1, replicas=[pb.Replica(egress_port=1, instance=0), pb.Replica(egress_port=2, instance=1)]))))
    out.append(pb.Entity(packet_replication_engine_entry=pre(clone_session_entry=pb.CloneSessionEntry(
        session_id=1, replicas=[pb.Replica(egress_port=3, instance=0)]))))
    return out


def seed_stream_messages(info: p4info_pb2.P4Info) -> list[pb.StreamMessageRequest]:
    out = [pb.StreamMessageRequest(arbitration=pb.MasterArbitrationUpdate(device_id=1, election_id=pb.Uint128(low=3))),
           pb.StreamMessageRequest(packet=pb.PacketOut(payload=b"\x00" * 60)),
           pb.StreamMessageRequest(digest_ack=pb.DigestListAck(digest_id=1, list_id=1)),
           pb.StreamMessageRequest(other={"type_url": "x/y", "value": b"z"}),
           pb.StreamMessageRequest()]
    for header in info.controller_packet_metadata:
        if header.preamble.name == "packet_out":
            out.append(pb.StreamMessageRequest(packet=pb.PacketOut(payload=b"\x01" * 60, metadata=[
                pb.PacketMetadata(metadata_id=m.id, value=_one(m.bitwidth)) for m in header.metadata])))
    return out


# -- mutations --------------------------------------------------------------------------------------------
_INT_EDGES = {
    descriptor.FieldDescriptor.CPPTYPE_INT32: (0, 1, -1, 2**31 - 1, -2**31),
    descriptor.FieldDescriptor.CPPTYPE_INT64: (0, 1, -1, 2**63 - 1, -2**63),
    descriptor.FieldDescriptor.CPPTYPE_UINT32: (0, 1, 2**32 - 1),
    descriptor.FieldDescriptor.CPPTYPE_UINT64: (0, 1, 2**64 - 1),
}


def _edge_value(rng: random.Random, f: descriptor.FieldDescriptor):
    t = f.cpp_type
    if t in _INT_EDGES:
        return rng.choice(_INT_EDGES[t] + (rng.randint(0, 1000),))
    if t == descriptor.FieldDescriptor.CPPTYPE_ENUM:
        return rng.randint(-2, 12)
    if t == descriptor.FieldDescriptor.CPPTYPE_BOOL:
        return rng.random() < 0.5
    if t == descriptor.FieldDescriptor.CPPTYPE_STRING and f.type == descriptor.FieldDescriptor.TYPE_BYTES:
        size = rng.choice((0, 1, 2, 3, 4, 5, 16, 17, 300, 70_000))
        fill = rng.choice((b"\x00", b"\xff", None))
        return fill * size if fill is not None else rng.randbytes(size)
    if t == descriptor.FieldDescriptor.CPPTYPE_STRING:
        return rng.choice(("", "x", "é\x00\uffff", "n" * 5000))
    return None


def _nodes(msg: Message) -> list[Message]:
    """``msg`` and every sub-message in it."""
    out = [msg]
    for f, value in msg.ListFields():
        if f.cpp_type == descriptor.FieldDescriptor.CPPTYPE_MESSAGE and not f.message_type.GetOptions().map_entry:
            for v in (value if f.is_repeated else (value,)):
                out += _nodes(v)
    return out


def mutate_fields(rng: random.Random, msg: Message, changes: int) -> None:
    """Change a few fields anywhere in ``msg`` (every sub-message is as likely to be picked, so
    the deep ones, where match values and parameters are, get their share): scalars to edge
    values, sub-messages cleared, repeated, added or set empty."""
    for _ in range(changes):
        m = rng.choice(_nodes(msg))
        present = [f for f, _ in m.ListFields()]
        fields = present if present and rng.random() < 0.7 else list(m.DESCRIPTOR.fields)
        fields = [f for f in fields if not (f.message_type is not None and f.message_type.GetOptions().map_entry)]
        if not fields:
            continue
        f = rng.choice(fields)
        repeated = f.is_repeated
        if f.cpp_type == descriptor.FieldDescriptor.CPPTYPE_MESSAGE:
            roll = rng.random()
            if roll < 0.3:
                m.ClearField(f.name)
            elif repeated:
                items = getattr(m, f.name)
                if items and roll < 0.6:
                    items.add().CopyFrom(rng.choice(items))
                else:
                    items.add()
            else:
                getattr(m, f.name).SetInParent()
            continue
        value = _edge_value(rng, f)
        try:
            if repeated:
                getattr(m, f.name).append(value)
            else:
                setattr(m, f.name, value)
        except (ValueError, TypeError):
            pass                                # a value this field's type cannot hold at all


def mutate_bytes(rng: random.Random, data: bytes, other: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        i = rng.randint(0, len(b))
        if roll < 0.3 and b:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif roll < 0.45:
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif roll < 0.6:
            del b[i:i + rng.randint(1, 64)]
        elif roll < 0.7:
            del b[i:]
        elif roll < 0.85:
            b[i:i] = b[i:i + rng.randint(1, 256)]
        else:
            b += other[rng.randint(0, len(other)):]        # a spliced tail: protobuf merges fields
    return bytes(b)


def mutated(rng: random.Random, msg: Message, corpus: list[bytes]) -> bytes:
    m = type(msg)()
    m.CopyFrom(msg)
    if rng.random() < 0.7:
        mutate_fields(rng, m, rng.randint(1, 3))
    data = m.SerializeToString()
    if rng.random() < 0.5:
        data = mutate_bytes(rng, data, rng.choice(corpus))
    return data


# -- requests ---------------------------------------------------------------------------------------------
def _write(rng: random.Random, entities: list[pb.Entity]) -> pb.WriteRequest:
    req = pb.WriteRequest(device_id=1, election_id=pb.Uint128(high=PRIMARY[0], low=PRIMARY[1]))
    for e in rng.sample(entities, rng.randint(1, min(5, len(entities)))):
        req.updates.add(type=rng.choice((pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE)), entity=e)
    return req


def _read(rng: random.Random, entities: list[pb.Entity]) -> pb.ReadRequest:
    return pb.ReadRequest(device_id=1, entities=rng.sample(entities, rng.randint(1, min(3, len(entities)))))


def _pipeline(prog: CompiledProgram) -> Set:
    req = Set(device_id=1, election_id=pb.Uint128(high=PRIMARY[0], low=PRIMARY[1]), action=Set.VERIFY_AND_COMMIT)
    req.config.p4info.CopyFrom(prog.p4info)
    req.config.p4_device_config = prog.json
    return req


class Tally:
    """The statuses seen, and every answer that breaks the rules."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.bad: list[str] = []

    def record(self, what: str, code: grpc.StatusCode, details: str, trailer: bytes | None = None) -> None:
        self.codes[code.name] = self.codes.get(code.name, 0) + 1
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL):
            self.bad.append(f"{what}: {code.name}: {details}")
        if trailer is not None:
            status = status_pb2.Status.FromString(trailer)
            for d in status.details:
                e = pb.Error()
                if d.Unpack(e) and e.canonical_code == code_pb2.INTERNAL:
                    self.bad.append(f"{what}: an update failed with INTERNAL: {e.message}")


def _call(tally: Tally, what: str, fn, data: bytes, streaming: bool = False) -> None:
    try:
        result = fn(data, timeout=DEADLINE)
        if streaming:
            for _ in result:
                pass
        tally.record(what, grpc.StatusCode.OK, "")
    except grpc.RpcError as e:
        trailer = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin")
        tally.record(what, e.code(), e.details() or "", trailer)


def _fuzz_streams(rng: random.Random, tally: Tally, channel: grpc.Channel, info: p4info_pb2.P4Info) -> None:
    stream = channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=None,
                                   response_deserializer=None)
    seeds = seed_stream_messages(info)
    corpus = [m.SerializeToString() for m in seeds]
    for n in range(STREAMS):
        first = pb.StreamMessageRequest(arbitration=pb.MasterArbitrationUpdate(
            device_id=1, election_id=pb.Uint128(low=n + 1))).SerializeToString()
        messages = [first] + [mutated(rng, rng.choice(seeds), corpus) for _ in range(STREAM_MESSAGES)]
        # the client half-closes after its messages: the server must end the stream with a status
        _call(tally, f"StreamChannel #{n}", stream, iter(messages), streaming=True)


@pytest.fixture(params=["python", "native"])
def target(request):
    """The switch process on its Python path (``--native off``, whatever SOFTSWITCH_NATIVE says),
    and on its native one (``--native on``: a pushed program runs natively or the push fails, so
    the good controller's push at the end proves the native path took it)."""
    if request.param == "native":
        from softswitch.native.build import missing
        if missing():
            pytest.skip(f"the native data path cannot be built here: {missing()}")
    with softswitch_process(extra_args=("--native", "on" if request.param == "native" else "off")) as t:
        t.native = request.param == "native"
        yield t


def _native_refusal(name: str) -> str | None:
    """Why the native generator cannot do test program ``name``, or None."""
    from softswitch.native.codegen import Unsupported, generate
    from softswitch.pipeline.program import Program
    try:
        generate(Program(require_program(name).json))
    except Unsupported as e:
        return str(e)
    return None


def test_mutated_requests_always_get_a_status(target):
    rng = random.Random(SEED)
    tally = Tally()
    primary = Client(target.grpc_addr, election=PRIMARY)
    primary.open_stream()
    channel = grpc.insecure_channel(target.grpc_addr)
    raw = {name: channel.unary_unary(f"/p4.v1.P4Runtime/{name}", request_serializer=None, response_deserializer=None)
           for name in ("Write", "SetForwardingPipelineConfig", "GetForwardingPipelineConfig", "Capabilities")}
    read = channel.unary_stream("/p4.v1.P4Runtime/Read", request_serializer=None, response_deserializer=None)
    t0 = time.monotonic()
    sent = 0
    programs = list(PROGRAMS)
    if target.native:       # a push of a program the native path cannot do fails (UNIMPLEMENTED), by name
        for name, why in [(n, _native_refusal(n)) for n in PROGRAMS]:
            if why:
                print(f"\nnot fuzzed on the native path: {name} ({why})")
                programs.remove(name)
    for name in programs:
        prog = require_program(name)
        primary.set_pipeline(prog)
        entities = seed_entities(prog.p4info)
        corpus = [e.SerializeToString() for e in entities]
        for _ in range(WRITES):
            _call(tally, f"{name}: Write", raw["Write"], mutated(rng, _write(rng, entities), corpus))
        for _ in range(READS):
            _call(tally, f"{name}: Read", read, mutated(rng, _read(rng, entities), corpus), streaming=True)
        for _ in range(PIPELINES):
            data = mutated(rng, _pipeline(prog), corpus)
            _call(tally, f"{name}: SetForwardingPipelineConfig", raw["SetForwardingPipelineConfig"], data)
        for what, msg in (("GetForwardingPipelineConfig", pb.GetForwardingPipelineConfigRequest(device_id=1)),
                          ("Capabilities", pb.CapabilitiesRequest())):
            for _ in range(5):
                _call(tally, f"{name}: {what}", raw[what], mutated(rng, msg, corpus))
        _fuzz_streams(rng, tally, channel, prog.p4info)
        sent += WRITES + READS + PIPELINES + 10 + STREAMS * (STREAM_MESSAGES + 1)
    print(f"\n{sent} mutated messages in {time.monotonic() - t0:.1f} s; statuses: {tally.codes}")
    assert tally.bad == [], tally.bad[:20]
    assert target.proc.poll() is None, "the softswitch process died"
    # a good controller is still served: push a pipeline, write and read an entry
    prog = require_program("tables")
    primary.set_pipeline(prog)
    entry = pb.Entity(table_entry=pb.TableEntry(
        table_id=prog.table_id("t_exact"), match=[pb.FieldMatch(field_id=prog.field_id("t_exact", "k16"),
                                                                exact=pb.FieldMatch.Exact(value=b"\x07"))]))
    entry.table_entry.action.action.CopyFrom(_action(prog.p4info, prog.action_id("set_exact")))
    primary.write_ok((INS, entry))
    assert [e.table_entry.match for e in primary.read(pb.Entity(table_entry=pb.TableEntry(
        table_id=prog.table_id("t_exact"))))] == [entry.table_entry.match]
    primary.close()
    channel.close()
