"""softswitch's P4Runtime server with tables.p4 pushed, through real gRPC: the pipeline's
Get with every response type, VERIFY, VERIFY_AND_SAVE + COMMIT and RECONCILE_AND_COMMIT; every
match kind written and read back canonically; validation and its error codes; per-update
errors of a batch; default and const entries; action profiles; direct counters and meters in
the data plane; deadlines and malformed entities, after which the server still works. Skipped
until p4c has built tests/p4/build/tables.json (the rest of the server: test_p4runtime_server.py).
"""
from __future__ import annotations

import time

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from p4rt_support import (DEL, INS, MOD, Client, action, client, exact, lpm, optional,  # noqa: F401
                          require_program, rng, running_switch, switch, table_entry, ternary, update_errors, veths)

SetReq = pb.SetForwardingPipelineConfigRequest
GetReq = pb.GetForwardingPipelineConfigRequest
VETH_PREFIX = "pt"


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
