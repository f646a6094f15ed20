"""softswitch's P4Runtime server, through real gRPC with the p4runtime protos.

Each test starts a real in-process softswitch (`softswitch.switch.Switch`); tests that move
packets give it veth ports whose host ends live in their own network namespaces. Tests that
need the compiled test programs (tests/p4/build/*.json + *.p4info.txtpb) skip until p4c has
built them.

Covered here: Capabilities; binding errors; arbitration (primary/backup notifications, duplicate
election ids, wrong device, primary leaving, PERMISSION_DENIED for backups); bad pipeline
configs; stream limits and garbage requests, after which the server still works; indexed
counters, meters and registers; value sets; the packet replication engine; packet-in and
packet-out. A pushed program's tables (pipeline Get and commit modes, every match kind,
validation, batches, profiles, direct counters): test_p4runtime_tables.py.
"""
from __future__ import annotations

import socket
import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4data_pb2
from p4.v1 import p4runtime_pb2 as pb

from p4rt_support import (DEL, INS, MOD, Client, Stream, action, client, exact, require_program,  # noqa: F401
                          running_switch, switch, table_entry, veths)

SetReq = pb.SetForwardingPipelineConfigRequest
GetReq = pb.GetForwardingPipelineConfigRequest
VETH_PREFIX = "pr"


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
