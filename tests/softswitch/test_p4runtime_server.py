"""softswitch's P4Runtime server, through real gRPC with the p4runtime protos.

Each test starts a real in-process softswitch (`softswitch.switch.Switch`); tests that move
packets give it veth ports whose host ends live in their own network namespaces. Tests that
need the compiled test programs (tests/p4/build/*.json + *.p4info.txtpb) skip until p4c has
built them.

Covered: Capabilities; binding errors; arbitration (primary/backup notifications, duplicate
election ids, wrong device, primary leaving, PERMISSION_DENIED for backups); pipeline push
(VERIFY, VERIFY_AND_SAVE + COMMIT, RECONCILE_AND_COMMIT, Get with every response type, bad
configs); every entity kind written, read back canonically and checked in the data plane;
validation and its error codes; per-update error details of a batch; packet-in/packet-out;
malformed requests, deadlines and stream limits, after which the server still works.
"""
from __future__ import annotations

import socket
import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2
from p4.v1 import p4runtime_pb2 as pb

from emulation.testbed import Testbed
from p4rt_support import (DEL, INS, MOD, Client, Stream, action, exact, lpm, optional,
                          require_program, require_root, rng, running_switch, table_entry, ternary, update_errors)

SetReq = pb.SetForwardingPipelineConfigRequest
GetReq = pb.GetForwardingPipelineConfigRequest


@pytest.fixture
def switch():
    """A softswitch without ports (device 1); yields its gRPC address."""
    with running_switch(ports={}, cpu_port=255) as (sw, addr):
        yield sw, addr


@pytest.fixture
def client(switch):
    c = Client(switch[1])
    yield c
    c.close()


@pytest.fixture
def veths():
    require_root()
    v = Testbed(nports=0, prefix="pr")
    yield v
    v.teardown()


# ================================================================================================
# No compiled program needed
# ================================================================================================
def test_capabilities(client):
    rep = client.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5)
    assert rep.p4runtime_api_version == "1.4.1"


def test_address_in_use_is_an_oserror_naming_it():
    from softswitch.p4runtime.server import P4RuntimeServer
    from softswitch.switch import Switch, SwitchConfig

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        addr = f"127.0.0.1:{busy.getsockname()[1]}"
        with pytest.raises(OSError, match=addr):
            P4RuntimeServer(Switch(SwitchConfig(device_id=1, grpc_addr=addr)), addr)
        sw = Switch(SwitchConfig(device_id=1, grpc_addr=addr))
        with pytest.raises(OSError, match=addr):
            sw.start()


def test_before_any_pipeline(client):
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Write(pb.WriteRequest(device_id=1, updates=[pb.Update(type=INS, entity=table_entry(1))]))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as e:
        list(client.stub.Read(pb.ReadRequest(device_id=1, entities=[pb.Entity(table_entry=pb.TableEntry())])))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as e:
        client.stub.GetForwardingPipelineConfig(GetReq(device_id=1))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_unknown_device_id_is_not_found(client):
    for call, req in ((client.stub.Write, pb.WriteRequest(device_id=9)),
                      (client.stub.GetForwardingPipelineConfig, GetReq(device_id=9)),
                      (client.stub.SetForwardingPipelineConfig, SetReq(device_id=9, action=SetReq.VERIFY))):
        with pytest.raises(grpc.RpcError) as e:
            call(req, timeout=5)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        list(client.stub.Read(pb.ReadRequest(device_id=9)))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    s = Stream(client.stub)
    s.arbitrate((0, 1), device_id=9)
    assert s.wait_end() == grpc.StatusCode.NOT_FOUND
    s.close()


def _arbitration(s: Stream) -> pb.MasterArbitrationUpdate:
    msg = s.next("arbitration")
    assert msg is not None, "no arbitration notification"
    return msg.arbitration


def test_arbitration_primary_backup_and_failover(client):
    a = Stream(client.stub)
    a.arbitrate((0, 5))
    n = _arbitration(a)
    assert n.status.code == code_pb2.OK and n.election_id.low == 5 and n.device_id == 1

    b = Stream(client.stub)                          # higher id: becomes primary, everyone is told
    b.arbitrate((0, 7))
    nb, na = _arbitration(b), _arbitration(a)
    assert nb.status.code == code_pb2.OK and nb.election_id.low == 7
    assert na.status.code == code_pb2.ALREADY_EXISTS and na.election_id.low == 7

    c = Stream(client.stub)                          # lower id: backup, only c hears back
    c.arbitrate((0, 3))
    nc = _arbitration(c)
    assert nc.status.code == code_pb2.ALREADY_EXISTS and nc.election_id.low == 7
    assert a.next("arbitration", timeout=0.3) is None

    d = Stream(client.stub)                          # an election id in use ends the stream
    d.arbitrate((0, 5))
    assert d.wait_end() == grpc.StatusCode.INVALID_ARGUMENT

    # a backup cannot write or push a pipeline; the primary is checked before anything else
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Write(pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=5)))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as e:
        client.stub.SetForwardingPipelineConfig(SetReq(device_id=1, election_id=pb.Uint128(low=3),
                                                       action=SetReq.VERIFY))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as e:                   # no election id at all
        client.stub.Write(pb.WriteRequest(device_id=1))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as e:                   # the primary passes, then: no pipeline
        client.stub.Write(pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=7)))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    # the primary leaves: the highest remaining (a, 5) takes over and all are told
    b.close()
    na, nc = _arbitration(a), _arbitration(c)
    assert na.status.code == code_pb2.OK and na.election_id.low == 5
    assert nc.status.code == code_pb2.ALREADY_EXISTS and nc.election_id.low == 5
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Write(pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=5)))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION   # primary now: past the check

    # c raises its election id above a: primary changes again
    c.arbitrate((1, 0))
    nc, na = _arbitration(c), _arbitration(a)
    assert nc.status.code == code_pb2.OK and (nc.election_id.high, nc.election_id.low) == (1, 0)
    assert na.status.code == code_pb2.ALREADY_EXISTS

    # a later update naming another device ends that stream with FAILED_PRECONDITION
    a.arbitrate((0, 5), device_id=2)
    assert a.wait_end() == grpc.StatusCode.FAILED_PRECONDITION
    for s in (a, c, d):
        s.close()


def test_unset_election_id_is_never_primary(client):
    s = Stream(client.stub)
    s.arbitrate(None)
    n = _arbitration(s)
    assert n.status.code == code_pb2.NOT_FOUND and not n.HasField("election_id")
    p = Stream(client.stub)
    p.arbitrate((0, 1))
    assert _arbitration(p).status.code == code_pb2.OK
    assert _arbitration(s).status.code == code_pb2.ALREADY_EXISTS
    s.close()
    p.close()


def test_role_config_is_rejected(client):
    s = Stream(client.stub)
    req = pb.StreamMessageRequest()
    req.arbitration.device_id = 1
    req.arbitration.election_id.low = 1
    req.arbitration.role.name = "r"
    req.arbitration.role.config.Pack(pb.Uint128(low=1))
    s.send(req)
    assert s.wait_end() == grpc.StatusCode.INVALID_ARGUMENT
    s.close()


def test_stream_count_is_bounded_and_unary_rpcs_still_work(client):
    from softswitch.p4runtime.streams import MAX_JOINED_STREAMS
    streams = []
    for i in range(MAX_JOINED_STREAMS):
        s = Stream(client.stub)
        s.arbitrate((0, i + 1))
        assert _arbitration(s) is not None
        streams.append(s)
    extra = Stream(client.stub)                      # full, and it would not be primary: refused
    extra.arbitrate((0, 0))
    assert extra.wait_end() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert client.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5).p4runtime_api_version
    streams[0].close()
    time.sleep(0.3)
    again = Stream(client.stub)
    again.arbitrate((0, 100))
    assert _arbitration(again).status.code == code_pb2.OK
    for s in streams[1:] + [extra, again]:
        s.close()


def test_garbage_request_bytes_do_not_hurt_the_server(client):
    raw = client.channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=None, response_deserializer=None)
    for junk in (b"\xff\xff\xff\xff", b"\x0a\xff\xff\xff\x0f", bytes(range(256)) * 4):
        with pytest.raises(grpc.RpcError) as e:
            raw(junk, timeout=5)
        assert e.value.code() != grpc.StatusCode.OK
    stream = client.channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=None,
                                          response_deserializer=None)
    with pytest.raises(grpc.RpcError):
        list(stream(iter([b"\xff\xfe\xfd"]), timeout=5))
    assert client.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5).p4runtime_api_version == "1.4.1"


def test_bad_pipeline_configs(client):
    def set_(req):
        with pytest.raises(grpc.RpcError) as e:
            client.stub.SetForwardingPipelineConfig(req, timeout=10)
        return e.value

    assert set_(SetReq(device_id=1)).code() == grpc.StatusCode.INVALID_ARGUMENT          # no action
    assert set_(SetReq(device_id=1, action=SetReq.VERIFY_AND_COMMIT)).code() == grpc.StatusCode.INVALID_ARGUMENT
    req = SetReq(device_id=1, action=SetReq.VERIFY_AND_COMMIT)
    req.config.p4info.tables.add().preamble.name = "x"
    req.config.p4_device_config = b"{ this is not json"
    err = set_(req)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "JSON" in err.details()
    req.config.p4_device_config = b""
    assert set_(req).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert set_(SetReq(device_id=1, action=SetReq.COMMIT)).code() == grpc.StatusCode.NOT_FOUND
    assert set_(SetReq(device_id=1, action=77)).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert client.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5).p4runtime_api_version


# ================================================================================================
# With the compiled test programs
# ================================================================================================
@pytest.fixture
def tables_prog():
    return require_program("tables")


@pytest.fixture
def tables_client(client, tables_prog):
    client.open_stream()
    client.set_pipeline(tables_prog, cookie=0xC0FFEE)
    return client


def _match_key(prog, table, **fields) -> list[pb.FieldMatch]:
    return [exact(prog.field_id(table, k), v) for k, v in fields.items()]


def test_pipeline_get_every_response_type(tables_client, tables_prog):
    c, prog = tables_client, tables_prog
    full = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.ALL)).config
    assert full.p4info == prog.p4info and full.p4_device_config == prog.json and full.cookie.cookie == 0xC0FFEE
    only = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.COOKIE_ONLY)).config
    assert not only.HasField("p4info") and not only.p4_device_config and only.cookie.cookie == 0xC0FFEE
    pc = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.P4INFO_AND_COOKIE)).config
    assert pc.p4info == prog.p4info and not pc.p4_device_config
    dc = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.DEVICE_CONFIG_AND_COOKIE)).config
    assert dc.p4_device_config == prog.json and not dc.HasField("p4info")
    with pytest.raises(grpc.RpcError) as e:
        c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=9))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_pipeline_verify_names_what_does_not_fit(tables_client, tables_prog):
    c, prog = tables_client, tables_prog
    bad = p4info_pb2.P4Info()
    bad.CopyFrom(prog.p4info)
    bad.tables[0].preamble.name = "TblIngress.no_such_table"
    with pytest.raises(grpc.RpcError) as e:
        c.set_pipeline(prog, action=SetReq.VERIFY, p4info=bad)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no_such_table" in e.value.details()
    bad.CopyFrom(prog.p4info)
    bad.actions[-1].params.add(id=99, name="extra", bitwidth=8)
    with pytest.raises(grpc.RpcError) as e:
        c.set_pipeline(prog, action=SetReq.VERIFY_AND_COMMIT, p4info=bad)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.actions[-1].preamble.name in e.value.details()
    bad.CopyFrom(prog.p4info)
    bad.direct_counters[0].preamble.name = "TblIngress.nope"
    with pytest.raises(grpc.RpcError) as e:
        c.set_pipeline(prog, action=SetReq.VERIFY, p4info=bad)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nope" in e.value.details()
    # a failed push leaves the committed pipeline alone
    got = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.COOKIE_ONLY)).config
    assert got.cookie.cookie == 0xC0FFEE


def test_pipeline_verify_save_commit_and_reset(tables_client, tables_prog):
    c, prog = tables_client, tables_prog
    tid = prog.table_id("t_exact")
    entry = table_entry(tid, _match_key(prog, "t_exact", k16=b"\x00\x01"), action(prog.action_id("set_exact"), b"\x07"))
    c.write_ok((INS, entry))
    c.set_pipeline(prog, action=SetReq.VERIFY, cookie=1)         # VERIFY changes nothing
    assert len(c.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid)))) == 1
    cookie = c.stub.GetForwardingPipelineConfig(GetReq(device_id=1, response_type=GetReq.COOKIE_ONLY)).config
    assert cookie.cookie.cookie == 0xC0FFEE
    c.set_pipeline(prog, action=SetReq.VERIFY_AND_SAVE, cookie=2)  # reads/writes now refer to the saved one
    assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid))) == []
    c.write_ok((INS, entry))
    c.stub.SetForwardingPipelineConfig(SetReq(device_id=1, election_id=pb.Uint128(low=1), action=SetReq.COMMIT))
    assert len(c.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid)))) == 1
    with pytest.raises(grpc.RpcError) as e:                        # nothing saved any more
        c.stub.SetForwardingPipelineConfig(SetReq(device_id=1, election_id=pb.Uint128(low=1), action=SetReq.COMMIT))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    c.set_pipeline(prog, cookie=3)                                  # VERIFY_AND_COMMIT clears the state
    assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid))) == []


def test_reconcile_and_commit_keeps_the_forwarding_state(tables_client, tables_prog):
    c, prog = tables_client, tables_prog
    tid = prog.table_id("t_exact")
    entry = table_entry(tid, _match_key(prog, "t_exact", k16=b"\x00\x01"), action(prog.action_id("set_exact"), b"\x07"),
                        counter_data=pb.CounterData(packet_count=3, byte_count=300))
    prof = prog.id("action_profiles", "prof")
    member = pb.Entity(action_profile_member=pb.ActionProfileMember(
        action_profile_id=prof, member_id=4, action=action(prog.action_id("set_prof"), b"\x44")))
    dflt = table_entry(prog.table_id("t_defparam"), act=action(prog.action_id("set_defparam"), b"\x99"),
                       is_default_action=True)
    c.write_ok((INS, entry), (INS, member))
    c.write_ok((MOD, dflt))
    mc = pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry(multicast_group_id=3, replicas=[pb.Replica(egress_port=2)])))
    c.write_ok((INS, mc))
    c.set_pipeline(prog, action=SetReq.RECONCILE_AND_COMMIT, cookie=9)
    req = pb.TableEntry(table_id=tid)
    req.counter_data.SetInParent()
    (got,) = c.read(pb.Entity(table_entry=req))
    assert got.table_entry.counter_data.packet_count == 3 and got.table_entry.action == entry.table_entry.action
    assert len(c.read(pb.Entity(action_profile_member=pb.ActionProfileMember(action_profile_id=prof)))) == 1
    (d,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=prog.table_id("t_defparam"), is_default_action=True)))
    assert d.table_entry.action.action.params[0].value == b"\x99"
    assert len(c.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry())))) == 1
    # a config whose ids do not fit the state is refused and changes nothing
    moved = p4info_pb2.P4Info()
    moved.CopyFrom(prog.p4info)
    for t in moved.tables:
        if t.preamble.id == tid:
            t.preamble.id += 0x1000
    for dc in moved.direct_counters:
        if dc.direct_table_id == tid:
            dc.direct_table_id += 0x1000
    with pytest.raises(grpc.RpcError) as e:
        c.set_pipeline(prog, action=SetReq.RECONCILE_AND_COMMIT, p4info=moved)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(c.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid)))) == 1


def test_table_entries_every_match_kind_read_back_canonically(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    fid = p.field_id
    ex = table_entry(p.table_id("t_exact"), [exact(fid("t_exact", "k16"), b"\x00\x00\x00\x05")],   # padded value
                     action(p.action_id("set_exact"), b"\x00\x11"))
    lp = table_entry(p.table_id("t_lpm"), [lpm(fid("t_lpm", "k32"), b"\x0a\x01\x00\x00", 16)],
                     action(p.action_id("set_lpm"), b"\x22"))
    te = table_entry(p.table_id("t_ternary"), [ternary(fid("t_ternary", "t1"), b"\x0f", b"\x0f")],
                     action(p.action_id("set_ternary"), b"\x33"), priority=10)
    rg = table_entry(p.table_id("t_range"), [rng(fid("t_range", "r16"), b"\x00\x10", b"\x00\x20")],
                     action(p.action_id("set_range"), b"\x44"), priority=1)
    op = table_entry(p.table_id("t_optional"), [optional(fid("t_optional", "o8"), b"\x07")],
                     action(p.action_id("set_optional"), b"\x55"), priority=2)
    c.write_ok((INS, ex), (INS, lp), (INS, te), (INS, rg), (INS, op))
    by_table = {e.table_entry.table_id: e.table_entry for e in c.read(pb.Entity(table_entry=pb.TableEntry()))}
    got = by_table[p.table_id("t_exact")]
    assert got.match[0].exact.value == b"\x05"                        # canonical: shortest string
    assert got.action.action.params[0].value == b"\x11"
    assert by_table[p.table_id("t_lpm")].match[0].lpm.value == b"\x0a\x01\x00\x00"
    assert by_table[p.table_id("t_lpm")].match[0].lpm.prefix_len == 16
    tern = by_table[p.table_id("t_ternary")]
    assert [m.field_id for m in tern.match] == [fid("t_ternary", "t1")]   # don't-care t2 omitted
    assert tern.priority == 10
    assert by_table[p.table_id("t_range")].match[0].range.low == b"\x10"
    assert by_table[p.table_id("t_optional")].match[0].optional.value == b"\x07"
    # MODIFY and DELETE
    ex2 = pb.Entity()
    ex2.CopyFrom(ex)
    ex2.table_entry.action.action.params[0].value = b"\x99"
    c.write_ok((MOD, ex2))
    (e,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_exact"))))
    assert e.table_entry.action.action.params[0].value == b"\x99"
    c.write_ok((DEL, ex), (DEL, te))
    assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_exact")))) == []
    assert c.write_error((DEL, ex))[0] == "NOT_FOUND"
    assert c.write_error((MOD, ex))[0] == "NOT_FOUND"
    assert c.write_error((INS, lp))[0] == "ALREADY_EXISTS"
    # read one entry by its key, and filter by priority
    (one,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_lpm"), match=lp.table_entry.match)))
    assert one.table_entry.match == lp.table_entry.match
    assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_range"), priority=5))) == []


def test_table_entry_validation_codes(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    fid = p.field_id
    t_exact, t_lpm, t_tern = p.table_id("t_exact"), p.table_id("t_lpm"), p.table_id("t_ternary")
    set_exact = p.action_id("set_exact")
    k16 = fid("t_exact", "k16")
    cases = [
        ("OUT_OF_RANGE", table_entry(t_exact, [exact(k16, b"\x01\x00\x00")], action(set_exact, b"\x01"))),
        ("OUT_OF_RANGE", table_entry(t_exact, [exact(k16, b"")], action(set_exact, b"\x01"))),
        ("OUT_OF_RANGE", table_entry(t_exact, [exact(k16, b"\x01")], action(set_exact, b"\x01\x00\x00"))),
        ("OUT_OF_RANGE", table_entry(t_exact, [exact(k16, b"\x7f" * 1000)], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [], action(set_exact, b"\x01"))),                # missing exact
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(99, b"\x01")], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01"), exact(k16, b"\x01")], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [lpm(k16, b"\x01", 8)], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [pb.FieldMatch(field_id=k16)], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], action(set_exact, b"\x01"), priority=3)),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], action(p.action_id("set_lpm"), b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], action(0x01FFFFFF, b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], action(set_exact))),       # param missing
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], pb.Action(
            action_id=set_exact, params=[pb.Action.Param(param_id=7, value=b"\x01")]))),
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")])),                          # no action
        ("INVALID_ARGUMENT", table_entry(t_exact, [exact(k16, b"\x01")], action(set_exact, b"\x01"), is_const=True)),
        ("INVALID_ARGUMENT", table_entry(t_lpm, [lpm(fid("t_lpm", "k32"), b"\x0a\x01\x00\x00", 8)],
                                         action(p.action_id("set_lpm"), b"\x01"))),                 # trailing bits
        ("INVALID_ARGUMENT", table_entry(t_lpm, [lpm(fid("t_lpm", "k32"), b"\x0a", 0)],
                                         action(p.action_id("set_lpm"), b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_lpm, [lpm(fid("t_lpm", "k32"), b"\x0a", 33)],
                                         action(p.action_id("set_lpm"), b"\x01"))),
        ("INVALID_ARGUMENT", table_entry(t_tern, [ternary(fid("t_ternary", "t1"), b"\x1f", b"\x0f")],
                                         action(p.action_id("set_ternary"), b"\x01"), priority=1)),   # value & ~mask
        ("INVALID_ARGUMENT", table_entry(t_tern, [ternary(fid("t_ternary", "t1"), b"\x00", b"\x00")],
                                         action(p.action_id("set_ternary"), b"\x01"), priority=1)),
        ("INVALID_ARGUMENT", table_entry(t_tern, [ternary(fid("t_ternary", "t1"), b"\x01", b"\x0f")],
                                         action(p.action_id("set_ternary"), b"\x01"))),               # no priority
        ("INVALID_ARGUMENT", table_entry(p.table_id("t_range"), [rng(fid("t_range", "r16"), b"\x20", b"\x10")],
                                         action(p.action_id("set_range"), b"\x01"), priority=1)),
        ("INVALID_ARGUMENT", table_entry(p.table_id("t_range"), [rng(fid("t_range", "r16"), b"\x00", b"\xff\xff")],
                                         action(p.action_id("set_range"), b"\x01"), priority=1)),
        ("NOT_FOUND", table_entry(0x02ABCDEF, [exact(1, b"\x01")], action(set_exact, b"\x01"))),
        ("INVALID_ARGUMENT", pb.Entity()),                                                            # no entity
    ]
    errors = c.write(*[(INS, e) for _, e in cases])
    assert errors is not None
    assert [code for code, _ in errors] == [code for code, _ in cases], errors
    assert all(msg for _, msg in errors)
    assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t_exact))) == []
    for bad_type in (pb.Update.UNSPECIFIED, 9):
        assert c.write_error((bad_type, cases[0][1]))[0] == "INVALID_ARGUMENT"


def test_batch_with_one_good_and_one_bad_update(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    t = p.table_id("t_exact")
    good = table_entry(t, [exact(p.field_id("t_exact", "k16"), b"\x01")], action(p.action_id("set_exact"), b"\x01"))
    bad = table_entry(t, [exact(p.field_id("t_exact", "k16"), b"\x01\x00\x00")], action(p.action_id("set_exact"), b"\x01"))
    req = pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=1),
                          updates=[pb.Update(type=INS, entity=good), pb.Update(type=INS, entity=bad)])
    with pytest.raises(grpc.RpcError) as e:
        c.stub.Write(req, timeout=10)
    assert e.value.code() == grpc.StatusCode.UNKNOWN
    assert update_errors(e.value)[0] == ("OK", "")
    assert update_errors(e.value)[1][0] == "OUT_OF_RANGE"
    assert len(c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t)))) == 1       # the good one is in
    with pytest.raises(grpc.RpcError) as e:
        c.stub.Write(pb.WriteRequest(device_id=1, election_id=pb.Uint128(low=1), updates=req.updates[:1],
                                     atomicity=pb.WriteRequest.DATAPLANE_ATOMIC), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_default_entries(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    t = p.table_id("t_defparam")
    (d,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t, is_default_action=True)))
    assert d.table_entry.is_default_action
    assert d.table_entry.action.action.params[0].value == b"\x12\x34"
    new = table_entry(t, act=action(p.action_id("set_defparam"), b"\x56\x78"), is_default_action=True,
                      controller_metadata=77)
    c.write_ok((MOD, new))
    (d,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t, is_default_action=True)))
    assert d.table_entry.action.action.params[0].value == b"\x56\x78" and d.table_entry.controller_metadata == 77
    c.write_ok((MOD, table_entry(t, is_default_action=True)))                      # unset action: reset
    (d,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t, is_default_action=True)))
    assert d.table_entry.action.action.params[0].value == b"\x12\x34" and d.table_entry.controller_metadata == 0
    assert c.write_error((INS, new))[0] == "INVALID_ARGUMENT"
    assert c.write_error((DEL, new))[0] == "INVALID_ARGUMENT"
    with_key = pb.Entity()
    with_key.CopyFrom(new)
    with_key.table_entry.match.append(exact(p.field_id("t_defparam", "k32"), b"\x01"))
    assert c.write_error((MOD, with_key))[0] == "INVALID_ARGUMENT"
    const_default = table_entry(p.table_id("t_constdef"), act=action(p.action_id("set_constdef"), b"\x01"),
                                is_default_action=True)
    assert c.write_error((MOD, const_default))[0] == "PERMISSION_DENIED"
    # all default entries at once
    defaults = c.read(pb.Entity(table_entry=pb.TableEntry(is_default_action=True)))
    assert len(defaults) == len(p.p4info.tables)


def test_const_table(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    t = p.table_id("t_const")
    entries = [e.table_entry for e in c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t)))]
    assert sorted(e.match[0].exact.value for e in entries) == [b"\x01", b"\x02", b"\x03"]
    assert all(e.is_const for e in entries)
    new = table_entry(t, [exact(p.field_id("t_const", "o8"), b"\x09")], action(p.action_id("set_const"), b"\x01"))
    assert c.write_error((INS, new))[0] == "PERMISSION_DENIED"
    existing = pb.Entity(table_entry=entries[0])
    existing.table_entry.is_const = False
    assert c.write_error((DEL, existing))[0] == "PERMISSION_DENIED"
    assert c.write_error((MOD, existing))[0] == "PERMISSION_DENIED"       # action given


def test_action_profile_members_groups_and_indirect_entries(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    sel = p.id("action_profiles", "sel16")
    set_sel = p.action_id("set_sel16")

    def member(mid, v, prof=sel, act=set_sel):
        return pb.Entity(action_profile_member=pb.ActionProfileMember(
            action_profile_id=prof, member_id=mid, action=action(act, v)))

    def group(gid, *members, max_size=0):
        return pb.Entity(action_profile_group=pb.ActionProfileGroup(
            action_profile_id=sel, group_id=gid, max_size=max_size,
            members=[pb.ActionProfileGroup.Member(member_id=m, weight=w) for m, w in members]))

    c.write_ok((INS, member(1, b"\x01")), (INS, member(2, b"\x02")))
    c.write_ok((INS, group(10, (1, 2), (2, 1), max_size=8)))
    t = p.table_id("t_sel16")
    ent = pb.Entity(table_entry=pb.TableEntry(table_id=t, match=[exact(p.field_id("t_sel16", "k16"), b"\x05")]))
    ent.table_entry.action.action_profile_group_id = 10
    c.write_ok((INS, ent))
    (g,) = c.read(pb.Entity(action_profile_group=pb.ActionProfileGroup(action_profile_id=sel, group_id=10)))
    assert [(m.member_id, m.weight) for m in g.action_profile_group.members] == [(1, 2), (2, 1)]
    assert g.action_profile_group.max_size == 8
    (e,) = c.read(pb.Entity(table_entry=pb.TableEntry(table_id=t)))
    assert e.table_entry.action.action_profile_group_id == 10
    codes = [x[0] for x in c.write(
        (INS, member(1, b"\x09")),                          # exists
        (INS, member(3, b"\x01", act=p.action_id("set_exact"))),   # not an action of the profile's tables
        (INS, group(11, (42, 1))),                          # unknown member
        (INS, group(12, (1, 0))),                           # weight 0
        (INS, group(13, (1, 1), (1, 2))),                   # member twice
        (INS, group(14, (1, 5), (2, 5), max_size=8)),       # weights exceed max_size
        (MOD, group(10, (1, 1), max_size=4)),               # max_size cannot change
        (DEL, member(1, b"")),                              # still in group 10
        (DEL, group(10)),                                   # still used by the table entry
        (DEL, member(77, b"")),
        (INS, pb.Entity(action_profile_member=pb.ActionProfileMember(action_profile_id=0x11FFFFFF, member_id=1,
                                                                    action=action(set_sel, b"\x01")))),
    )]
    assert codes == ["ALREADY_EXISTS", "INVALID_ARGUMENT", "NOT_FOUND", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                     "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "FAILED_PRECONDITION",
                     "NOT_FOUND", "NOT_FOUND"]
    direct = table_entry(t, [exact(p.field_id("t_sel16", "k16"), b"\x06")], action(set_sel, b"\x01"))
    assert c.write_error((INS, direct))[0] == "INVALID_ARGUMENT"       # indirect table needs member/group
    missing = pb.Entity()
    missing.CopyFrom(ent)
    missing.table_entry.match[0].exact.value = b"\x07"
    missing.table_entry.action.action_profile_group_id = 99
    assert c.write_error((INS, missing))[0] == "NOT_FOUND"
    oneshot = pb.Entity()
    oneshot.CopyFrom(missing)
    oneshot.table_entry.action.action_profile_action_set.action_profile_actions.add(
        action=action(set_sel, b"\x01"), weight=1)
    assert c.write_error((INS, oneshot))[0] == "UNIMPLEMENTED"
    # tear down in dependency order
    c.write_ok((DEL, ent))
    c.write_ok((MOD, group(10, (2, 3))))
    c.write_ok((DEL, member(1, b"")))
    c.write_ok((DEL, group(10)), (DEL, member(2, b"")))
    assert c.read(pb.Entity(action_profile_member=pb.ActionProfileMember()),
                  pb.Entity(action_profile_group=pb.ActionProfileGroup())) == []


def test_direct_counter_and_meter_through_the_data_plane(veths, tables_prog):
    p = tables_prog
    h1, h2 = veths.add_port(), veths.add_port()
    with running_switch({1: h1.switch_iface, 2: h2.switch_iface}) as (sw, addr):
        c = Client(addr)
        try:
            c.open_stream()
            c.set_pipeline(p)
            fwd = p.table_id("fwd")
            c.write_ok((INS, table_entry(fwd, [exact(p.field_id("fwd", "ingress_port"), b"\x01")],
                                         action(p.action_id("set_port"), b"\x02"))))
            t = p.table_id("t_exact")
            key = [exact(p.field_id("t_exact", "k16"), b"\x00\x2a")]
            c.write_ok((INS, table_entry(t, key, action(p.action_id("set_exact"), b"\xab\xcd"))))
            tern = table_entry(p.table_id("t_ternary"), [ternary(p.field_id("t_ternary", "t1"), b"\x01", b"\xff")],
                               action(p.action_id("set_ternary"), b"\x01"), priority=1,
                               meter_config=pb.MeterConfig(cir=1, cburst=1, pir=1, pburst=1))
            c.write_ok((INS, tern))
            frame = _tbl_frame(k16=0x2A, t1=1)
            h1.drain()
            h2.drain()
            outs = []
            for _ in range(3):
                h1.send(frame)
                got = h2.wait_for(lambda f: f[12:14] == b"\x88\xb5")
                assert got is not None, "the packet did not come out of port 2"
                outs.append(got)
            assert _tbl_field(outs[0], "out_exact") == 0xABCD        # the entry took effect
            colors = [_tbl_field(o, "color") for o in outs]
            assert colors[0] == 0 and colors[-1] == 2                 # 1 packet/s, burst 1: red quickly
            req = pb.TableEntry(table_id=t)
            req.counter_data.SetInParent()
            (e,) = c.read(pb.Entity(table_entry=req))
            assert e.table_entry.counter_data.packet_count == 3
            assert e.table_entry.counter_data.byte_count == 3 * len(frame)
            (dc,) = c.read(pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
                table_entry=pb.TableEntry(table_id=t, match=key))))
            assert dc.direct_counter_entry.data.packet_count == 3
            c.write_ok((MOD, pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
                table_entry=pb.TableEntry(table_id=t, match=key), data=pb.CounterData(packet_count=100)))))
            (e,) = c.read(pb.Entity(table_entry=req))
            assert e.table_entry.counter_data.packet_count == 100
            assert c.write_error((INS, pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
                table_entry=pb.TableEntry(table_id=t, match=key)))))[0] == "INVALID_ARGUMENT"
            unknown = pb.TableEntry(table_id=t, match=[exact(p.field_id("t_exact", "k16"), b"\x09")])
            assert c.write_error((MOD, pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
                table_entry=unknown, data=pb.CounterData(packet_count=1)))))[0] == "NOT_FOUND"
            # meter config reads back; resetting it (config unset) makes every packet green again
            mreq = pb.TableEntry(table_id=p.table_id("t_ternary"))
            mreq.meter_config.SetInParent()
            (m,) = c.read(pb.Entity(table_entry=mreq))
            assert (m.table_entry.meter_config.cir, m.table_entry.meter_config.pburst) == (1, 1)
            # MODIFY without meter_config keeps the configuration (as simple_switch_grpc does)
            changed = pb.Entity()
            changed.CopyFrom(tern)
            changed.table_entry.ClearField("meter_config")
            changed.table_entry.action.action.params[0].value = b"\x02"
            c.write_ok((MOD, changed))
            (m,) = c.read(pb.Entity(table_entry=mreq))
            assert m.table_entry.meter_config.cir == 1 and m.table_entry.action.action.params[0].value == b"\x02"
            c.write_ok((MOD, pb.Entity(direct_meter_entry=pb.DirectMeterEntry(table_entry=tern.table_entry))))
            (m,) = c.read(pb.Entity(table_entry=mreq))
            assert not m.table_entry.HasField("meter_config")
            h1.send(frame)
            got = h2.wait_for(lambda f: f[12:14] == b"\x88\xb5")
            assert got is not None and _tbl_field(got, "color") == 0
            bad = pb.Entity(direct_meter_entry=pb.DirectMeterEntry(table_entry=tern.table_entry,
                                                                    config=pb.MeterConfig(cir=10, pir=5)))
            assert c.write_error((MOD, bad))[0] == "INVALID_ARGUMENT"      # committed rate above peak
        finally:
            c.close()


# tables.p4's header `tbl` (after Ethernet): field name -> (bit offset, width)
_TBL_FIELDS = [("k16", 16), ("k32", 32), ("t1", 8), ("t2", 16), ("r16", 16), ("o8", 8), ("out_exact", 16),
               ("out_lpm", 16), ("out_ternary", 16), ("out_range", 16), ("out_optional", 16), ("out_const", 16),
               ("out_constdef", 16), ("out_defparam", 16), ("out_prof", 16), ("out_sel16", 16), ("out_sel32", 16),
               ("sw_tag", 8), ("sw_value", 16), ("hit_tag", 8), ("out_hit", 16), ("color", 8)]


def _tbl_frame(**values: int) -> bytes:
    acc, nbits = 0, 0
    for name, width in _TBL_FIELDS:
        acc = (acc << width) | values.get(name, 0)
        nbits += width
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5"
    return eth + acc.to_bytes(nbits // 8, "big") + b"\x00" * 16


def _tbl_field(frame: bytes, name: str) -> int:
    nbits = sum(w for _, w in _TBL_FIELDS)
    acc = int.from_bytes(frame[14:14 + nbits // 8], "big")
    shift = nbits
    for n, w in _TBL_FIELDS:
        shift -= w
        if n == name:
            return (acc >> shift) & ((1 << w) - 1)
    raise KeyError(name)


def test_write_respects_the_deadline(switch, tables_prog):
    sw, addr = switch
    c = Client(addr)
    try:
        c.open_stream()
        c.set_pipeline(tables_prog)
        p = tables_prog
        entry = table_entry(p.table_id("t_exact"), [exact(p.field_id("t_exact", "k16"), b"\x01")],
                            action(p.action_id("set_exact"), b"\x01"))
        with sw.config_lock:                          # another request holds the device
            with pytest.raises(grpc.RpcError) as e:
                c.write((INS, entry), timeout=0.5)
            assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            time.sleep(0.3)
        time.sleep(0.3)
        assert c.read(pb.Entity(table_entry=pb.TableEntry(table_id=p.table_id("t_exact")))) == []   # never applied
        c.write_ok((INS, entry))
    finally:
        c.close()


def test_malformed_entities_are_rejected_and_the_server_goes_on(tables_client, tables_prog):
    c, p = tables_client, tables_prog
    junk = []
    for kind in ("table_entry", "action_profile_member", "action_profile_group", "counter_entry",
                 "direct_counter_entry", "meter_entry", "direct_meter_entry", "register_entry",
                 "value_set_entry", "packet_replication_engine_entry", "digest_entry", "extern_entry"):
        e = pb.Entity()
        getattr(e, kind).SetInParent()
        junk.append(e)
    for utype in (INS, MOD, DEL):
        errors = c.write(*[(utype, e) for e in junk])
        assert errors is not None and all(code != "OK" and code != "INTERNAL" for code, _ in errors), errors
    # garbage bytes inside otherwise well-formed messages
    garbage = table_entry(p.table_id("t_lpm"), [pb.FieldMatch(field_id=1, lpm=pb.FieldMatch.LPM(
        value=bytes(range(256)), prefix_len=-5))], action(p.action_id("set_lpm"), b"\xff" * 300))
    assert c.write_error((INS, garbage))[0] in ("OUT_OF_RANGE", "INVALID_ARGUMENT")
    reads = c.stub.Read(pb.ReadRequest(device_id=1, entities=[pb.Entity(), pb.Entity(
        table_entry=pb.TableEntry(table_id=0x02000000))]), timeout=5)
    with pytest.raises(grpc.RpcError) as e:
        list(reads)
    assert e.value.code() == grpc.StatusCode.UNKNOWN
    assert [code for code, _ in update_errors(e.value)] == ["INVALID_ARGUMENT", "NOT_FOUND"]
    with pytest.raises(grpc.RpcError) as e:                    # a single entity: its own status
        c.read(pb.Entity())
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert c.stub.Capabilities(pb.CapabilitiesRequest(), timeout=5).p4runtime_api_version == "1.4.1"
    ok = table_entry(p.table_id("t_exact"), [exact(p.field_id("t_exact", "k16"), b"\x01")],
                     action(p.action_id("set_exact"), b"\x01"))
    c.write_ok((INS, ok))


# -- stateful.p4: indexed counters, meters and registers ----------------------------------------------
def test_counters_meters_registers(switch):
    p = require_program("stateful")
    c = Client(switch[1])
    try:
        c.open_stream()
        c.set_pipeline(p)
        ctr, mtr, reg = p.id("counters", "ctr"), p.id("meters", "mtr"), p.id("registers", "reg")
        counters = c.read(pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr)))
        assert [e.counter_entry.index.index for e in counters] == list(range(16))
        c.write_ok((MOD, pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, index=pb.Index(index=3),
                                                                data=pb.CounterData(packet_count=5, byte_count=50)))))
        (one,) = c.read(pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, index=pb.Index(index=3))))
        assert (one.counter_entry.data.packet_count, one.counter_entry.data.byte_count) == (5, 50)
        c.write_ok((MOD, pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, data=pb.CounterData()))))
        assert all(e.counter_entry.data.packet_count == 0 for e in c.read(pb.Entity(counter_entry=pb.CounterEntry())))
        cfg = pb.MeterConfig(cir=100, cburst=10, pir=200, pburst=20)
        c.write_ok((MOD, pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr, index=pb.Index(index=2), config=cfg))))
        meters = c.read(pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr)))
        assert [e.meter_entry.index.index for e in meters if e.meter_entry.HasField("config")] == [2]
        assert meters[2].meter_entry.config == cfg
        c.write_ok((MOD, pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr, index=pb.Index(index=2)))))
        assert not c.read(pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr, index=pb.Index(index=2))))[0] \
            .meter_entry.HasField("config")
        value = p4data_pb2.P4Data(bitstring=b"\x00\x00\x12\x34")
        c.write_ok((MOD, pb.Entity(register_entry=pb.RegisterEntry(register_id=reg, index=pb.Index(index=7),
                                                                  data=value))))
        (r,) = c.read(pb.Entity(register_entry=pb.RegisterEntry(register_id=reg, index=pb.Index(index=7))))
        assert r.register_entry.data.bitstring == b"\x12\x34"
        c.write_ok((MOD, pb.Entity(register_entry=pb.RegisterEntry(register_id=reg,
                                                                  data=p4data_pb2.P4Data(bitstring=b"\x05")))))
        assert {e.register_entry.data.bitstring for e in c.read(pb.Entity(register_entry=pb.RegisterEntry()))} \
            == {b"\x05"}
        codes = [x[0] for x in c.write(
            (INS, pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, index=pb.Index(index=1)))),
            (DEL, pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr, index=pb.Index(index=1)))),
            (MOD, pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, index=pb.Index(index=16),
                                                         data=pb.CounterData(packet_count=1)))),
            (MOD, pb.Entity(counter_entry=pb.CounterEntry(counter_id=ctr, index=pb.Index(index=-1),
                                                         data=pb.CounterData(packet_count=1)))),
            (MOD, pb.Entity(register_entry=pb.RegisterEntry(register_id=reg, index=pb.Index(index=1),
                                                           data=p4data_pb2.P4Data(bitstring=b"\x01" * 5)))),
            (MOD, pb.Entity(register_entry=pb.RegisterEntry(register_id=reg, index=pb.Index(index=1)))),
            (MOD, pb.Entity(meter_entry=pb.MeterEntry(meter_id=mtr, index=pb.Index(index=1),
                                                     config=pb.MeterConfig(cir=-5)))),
            (MOD, pb.Entity(counter_entry=pb.CounterEntry(counter_id=0x12345678, index=pb.Index(index=1)))),
        )]
        assert codes == ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "OUT_OF_RANGE", "INVALID_ARGUMENT", "OUT_OF_RANGE",
                         "INVALID_ARGUMENT", "INVALID_ARGUMENT", "NOT_FOUND"]
    finally:
        c.close()


# -- parser_features.p4: value sets ------------------------------------------------------------------
def test_value_set(switch):
    p = require_program("parser_features")
    c = Client(switch[1])
    try:
        c.open_stream()
        c.set_pipeline(p)
        vs = p.id("value_sets", "pvs")
        fid = p.p4info.value_sets[0].match[0].id

        def members(*values):
            return pb.Entity(value_set_entry=pb.ValueSetEntry(value_set_id=vs, members=[
                pb.ValueSetMember(match=[exact(fid, v)]) for v in values]))

        c.write_ok((MOD, members(b"\x00\x11", b"\x22")))
        (got,) = c.read(pb.Entity(value_set_entry=pb.ValueSetEntry(value_set_id=vs)))
        assert [m.match[0].exact.value for m in got.value_set_entry.members] == [b"\x11", b"\x22"]
        codes = [x[0] for x in c.write((MOD, members(b"\x01", b"\x01")),
                                       (MOD, members(*[bytes([i]) for i in range(5)])),
                                       (INS, members(b"\x01")),
                                       (MOD, members(b"\x01\x00")))]
        assert codes == ["ALREADY_EXISTS", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "OUT_OF_RANGE"]
        c.write_ok((MOD, members()))
        (got,) = c.read(pb.Entity(value_set_entry=pb.ValueSetEntry(value_set_id=vs)))
        assert not got.value_set_entry.members
    finally:
        c.close()


# -- replication.p4: multicast groups and clone sessions ----------------------------------------------
def test_packet_replication_engine(veths):
    p = require_program("replication")
    hs = [veths.add_port() for _ in range(3)]
    with running_switch({i + 1: h.switch_iface for i, h in enumerate(hs)}) as (sw, addr):
        c = Client(addr)
        try:
            c.open_stream()
            c.set_pipeline(p)

            def mc(gid, *replicas, metadata=b""):
                return pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
                    multicast_group_entry=pb.MulticastGroupEntry(multicast_group_id=gid, metadata=metadata, replicas=[
                        pb.Replica(egress_port=port, instance=rid) for port, rid in replicas])))

            def clone(sid, *replicas, cos=0, length=0):
                return pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
                    clone_session_entry=pb.CloneSessionEntry(session_id=sid, class_of_service=cos,
                                                             packet_length_bytes=length, replicas=[
                                                                 pb.Replica(egress_port=port, instance=rid)
                                                                 for port, rid in replicas])))

            c.write_ok((INS, mc(7, (3, 1), (2, 1), metadata=b"meta")), (INS, clone(5, (3, 0), length=64)))
            (g,) = c.read(mc(7))
            grp = g.packet_replication_engine_entry.multicast_group_entry
            assert [(r.egress_port, r.instance) for r in grp.replicas] == [(2, 1), (3, 1)] and grp.metadata == b"meta"
            (s,) = c.read(clone(0))
            assert s.packet_replication_engine_entry.clone_session_entry.packet_length_bytes == 64
            codes = [x[0] for x in c.write(
                (INS, mc(7, (1, 1))), (INS, mc(0, (1, 1))), (INS, mc(40000, (1, 1))), (INS, mc(8, (1, 1), (1, 1))),
                (INS, clone(0, (1, 0))), (INS, clone(6, (1, 0), cos=2)), (MOD, mc(9, (1, 1))), (DEL, clone(99)),
                (INS, mc(10, (600, 1))))]
            assert codes == ["ALREADY_EXISTS", "INVALID_ARGUMENT", "OUT_OF_RANGE", "INVALID_ARGUMENT",
                             "INVALID_ARGUMENT", "UNIMPLEMENTED", "NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT"]
            with pytest.raises(grpc.RpcError) as e:             # one entity: its own status
                c.read(mc(123))
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            # multicast in the data plane: fwd sends port-1 packets to group 7 -> ports 2 and 3
            c.write_ok((INS, table_entry(p.table_id("fwd"), [exact(p.field_id("fwd", "ingress_port"), b"\x01")],
                                         action(p.action_id("set_mcast"), b"\x00\x07"))))
            for h in hs:
                h.drain()
            frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + b"\x45" + b"\x00" * 40
            hs[0].send(frame)
            assert hs[1].wait_for(lambda f: f[:14] == frame[:14]) is not None
            assert hs[2].wait_for(lambda f: f[:14] == frame[:14]) is not None
            c.write_ok((MOD, mc(7, (2, 1))))
            hs[0].send(frame)
            assert hs[1].wait_for(lambda f: f[:14] == frame[:14]) is not None
            assert hs[2].wait_for(lambda f: f[:14] == frame[:14], timeout=0.7) is None
            c.write_ok((DEL, mc(7)), (DEL, clone(5)))
            assert c.read(mc(0), clone(0)) == []
        finally:
            c.close()


# -- packetio.p4: packet-in and packet-out -------------------------------------------------------------
def test_packet_out_and_packet_in(veths):
    p = require_program("packetio")
    h1, h2 = veths.add_port(), veths.add_port()
    with running_switch({1: h1.switch_iface, 2: h2.switch_iface}, cpu_port=255) as (sw, addr):
        c = Client(addr)
        backup = Client(addr, election=(0, 1))
        try:
            primary_stream = c.open_stream(election=(0, 2))
            c.election = (0, 2)
            backup_stream = backup.open_stream(election=(0, 1), primary=False)
            c.set_pipeline(p)
            eg = p.metadata_id("packet_out", "egress_port")
            payload = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\x88" + b"packet-out!" * 4
            h2.drain()
            out = pb.StreamMessageRequest()
            out.packet.payload = payload
            out.packet.metadata.add(metadata_id=eg, value=b"\x02")
            primary_stream.send(out)
            assert h2.wait_for(lambda f: f.startswith(payload)) is not None, "packet-out did not leave port 2"
            # a backup's packet-out is refused (error on its stream) and not sent
            backup_stream.send(out)
            err = backup_stream.next("error")
            assert err is not None and err.error.canonical_code == code_pb2.PERMISSION_DENIED
            assert h2.wait_for(lambda f: f.startswith(payload), timeout=0.7) is None
            # malformed metadata: error, nothing sent
            bad = pb.StreamMessageRequest()
            bad.packet.payload = payload
            bad.packet.metadata.add(metadata_id=99, value=b"\x01")
            primary_stream.send(bad)
            err = primary_stream.next("error")
            assert err is not None and err.error.canonical_code == code_pb2.INVALID_ARGUMENT
            # an oversized packet-out: an error naming its size; the stream and its mastership stay
            huge = pb.StreamMessageRequest()
            huge.packet.payload = payload + b"x" * 70_000
            huge.packet.metadata.add(metadata_id=eg, value=b"\x02")
            primary_stream.send(huge)
            err = primary_stream.next("error")
            assert err is not None and err.error.canonical_code == code_pb2.INVALID_ARGUMENT, err
            assert "70" in err.error.message, err.error.message
            primary_stream.send(out)
            assert h2.wait_for(lambda f: f.startswith(payload)) is not None, "the stream did not survive"
            # packet-in: port 1 punts to the CPU; only the primary gets it, with ingress_port = 1
            frame = b"\x02\x00\x00\x00\x00\x09\x02\x00\x00\x00\x00\x01\x88\x88" + b"to the controller"
            h1.send(frame)
            msg = primary_stream.next("packet")
            assert msg is not None, "no packet-in"
            assert msg.packet.payload.startswith(frame)
            md = {m.metadata_id: m.value for m in msg.packet.metadata}
            assert md[p.metadata_id("packet_in", "ingress_port")] == b"\x01"
            assert backup_stream.next("packet", timeout=0.5) is None
        finally:
            c.close()
            backup.close()
