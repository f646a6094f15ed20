"""Controller side of ECN and INT: the entities every switch gets, and how they are reconciled.

Checked against the compiled program's P4Info (p4src/build), whose names follow the contract in
p4src/README.md ("Congestion signals: ECN and INT").
"""

from __future__ import annotations

import ipaddress

import pytest
from p4.v1 import p4runtime_pb2

from controller import entries as E
from controller.telemetry import entries as TE
from controller.fabric_controller import FabricController, Pipeline
from controller.p4info import decode
from controller.reconcile import entity_key, owner_key, plan
from controller.telemetry.entries import (
    DEFAULT_ECN,
    EcnThresholds,
    TelemetryConfig,
    WatchRule,
    ip_ternary,
    telemetry_entities,
)
from controller.entries import hash_seed
from controller.telemetry import Telemetry
from topologies import addressing as ap
from topologies.fabric import fat_tree, leaf_spine

PIPELINE = Pipeline.from_build_dir()
P4INFO = PIPELINE.p4info
WATCH = WatchRule.flow("10.0.0.2", "10.3.1.3", 17, 40000, 5001)


def _tables(entities: list[p4runtime_pb2.Entity], table: str) -> list[p4runtime_pb2.TableEntry]:
    tid = P4INFO.table_id(table)
    return [e.table_entry for e in entities if e.WhichOneof("entity") == "table_entry" and e.table_entry.table_id == tid]


def _params(entry: p4runtime_pb2.TableEntry) -> dict[str, int]:
    action = P4INFO._by_id[entry.action.action.action_id]  # noqa: SLF001 - test introspection
    names = {p.id: p.name for p in action.params}
    return {names[p.param_id]: decode(p.value) for p in entry.action.action.params}


def test_contract_names_exist_in_the_build() -> None:
    for table in (TE.ECN_CONFIG, TE.INT_WATCHLIST, TE.INT_CONFIG, TE.INT_SINK_PORTS, TE.INT_REPORT_CONFIG, E.HASH_CONFIG):
        P4INFO.table(table)
    for action in (TE.ECN_SET_THRESHOLDS, TE.INT_MARK_SOURCE, TE.INT_CONFIGURE, TE.INT_MARK_SINK, TE.INT_CONFIGURE_REPORT,
                   E.SET_HASH_SEED):
        P4INFO.action_info(action)
    P4INFO.counter(TE.ECN_MARKED)
    assert [P4INFO.match_field(TE.INT_WATCHLIST, f).kind for f in ("ip_src", "ip_dst", "ip_proto", "l4_sport", "l4_dport")] == [
        "ternary", "ternary", "ternary", "range", "range"]


def test_edge_switch_gets_ecn_watchlist_sinks_defaults_and_clone_session() -> None:
    fabric = fat_tree(4)
    ents = telemetry_entities(P4INFO, fabric, "p0e0", TelemetryConfig(watchlist=(WATCH,)))
    ecn = _tables(ents.tables, TE.ECN_CONFIG)
    assert sorted(decode(e.match[0].exact.value) for e in ecn) == [1, 2, 3, 4]
    assert _params(ecn[0]) == {"kmin": DEFAULT_ECN.kmin, "kmax": DEFAULT_ECN.kmax, "pmax": round(0.2 * 65536)}
    (watch,) = _tables(ents.tables, TE.INT_WATCHLIST)
    assert watch.priority > 0 and _params(watch) == {"max_hop": 6}
    fields = {P4INFO.match_field_by_id(watch.table_id, m.field_id).name: m for m in watch.match}
    assert decode(fields["ip_src"].ternary.value) == int(ipaddress.ip_address("10.0.0.2"))
    assert decode(fields["l4_sport"].range.low) == decode(fields["l4_sport"].range.high) == 40000
    sinks = _tables(ents.tables, TE.INT_SINK_PORTS)
    assert sorted(decode(e.match[0].exact.value) for e in sinks) == [1, 2]
    int_config, report_config = ents.defaults
    assert int_config.table_entry.is_default_action and not int_config.table_entry.match
    assert _params(int_config.table_entry) == {"switch_id": 1, "mtu": 1500}
    assert _params(report_config.table_entry) == {
        "src_mac": ap.mac_to_int(ap.switch_mac(1)),
        "dst_mac": ap.mac_to_int(ap.TELEMETRY_COLLECTOR_MAC),
        "src_ip": int(ap.telemetry_source_ip(1)),
        "dst_ip": int(ap.TELEMETRY_COLLECTOR_IP),
        "dst_port": ap.TELEMETRY_COLLECTOR_PORT,
    }
    (clone,) = ents.pre
    session = clone.packet_replication_engine_entry.clone_session_entry
    assert session.session_id == TE.INT_REPORT_SESSION_ID
    assert [r.egress_port for r in session.replicas] == [ap.TELEMETRY_PORT]


def test_core_switch_has_no_watchlist_and_no_sinks() -> None:
    ents = telemetry_entities(P4INFO, fat_tree(4), "c0", TelemetryConfig(watchlist=(WATCH,)))
    assert not _tables(ents.tables, TE.INT_WATCHLIST) and not _tables(ents.tables, TE.INT_SINK_PORTS)
    assert len(_tables(ents.tables, TE.ECN_CONFIG)) == 4 and len(ents.defaults) == 2


def test_ecn_only_and_per_port_override() -> None:
    config = TelemetryConfig(int_enabled=False, ecn_ports={("p0e0", 1): EcnThresholds(1, 2, 1.0)})
    ents = telemetry_entities(P4INFO, fat_tree(4), "p0e0", config)
    assert not ents.defaults and not ents.pre and not _tables(ents.tables, TE.INT_SINK_PORTS)
    by_port = {decode(e.match[0].exact.value): _params(e) for e in _tables(ents.tables, TE.ECN_CONFIG)}
    assert by_port[1] == {"kmin": 1, "kmax": 2, "pmax": 65535} and by_port[2]["kmax"] == DEFAULT_ECN.kmax
    with pytest.raises(ValueError, match="p0e0 port 9"):
        telemetry_entities(P4INFO, fat_tree(4), "p0e0", TelemetryConfig(ecn_ports={("p0e0", 9): DEFAULT_ECN}))


def test_bad_values_are_named() -> None:
    with pytest.raises(ValueError, match="kmin=9, kmax=3"):
        EcnThresholds(9, 3, 0.1)
    with pytest.raises(ValueError, match="pmax=0"):
        EcnThresholds(1, 3, 0)
    with pytest.raises(ValueError, match="src_ports"):
        WatchRule(src_ports=(10, 5))
    with pytest.raises(ValueError, match="telemetry port 250"):
        telemetry_entities(P4INFO, leaf_spine(2, 200, 52), "l0", TelemetryConfig())


def test_hash_seeds_are_distinct_per_switch() -> None:
    fabric = fat_tree(8)
    seeds = [hash_seed(P4INFO, sw.device_id) for sw in fabric.switches]
    assert len(set(seeds)) == len(seeds) and 0 not in seeds


def test_ip_ternary() -> None:
    assert ip_ternary("10.0.0.0/8") == (0x0A000000, ((1 << 128) - 1) & ~((1 << 24) - 1))
    value, mask = ip_ternary("fd00::/16")
    assert value == 0xFD00 << 112 and mask == ((1 << 16) - 1) << 112


def test_default_entries_are_modified_never_inserted_or_deleted() -> None:
    ents = telemetry_entities(P4INFO, fat_tree(4), "p0e0", TelemetryConfig())
    int_config = ents.defaults[0]
    assert entity_key(int_config)[-1] == "default" and owner_key(int_config)[0] == "default"
    todo = plan([int_config], [], {owner_key(int_config)})
    assert todo.modifies == [int_config] and not todo.inserts
    assert not plan([int_config], [int_config], {owner_key(int_config)})  # in sync
    other = p4runtime_pb2.Entity()
    other.CopyFrom(int_config)
    other.table_entry.action.action.params[0].value = b"\x07"
    assert plan([int_config], [other], {owner_key(int_config)}).modifies == [int_config]
    assert not plan([], [other], {owner_key(int_config)})  # no longer desired: left alone


def test_fabric_controller_desired_state_with_and_without_telemetry() -> None:
    pipeline = PIPELINE
    fabric = fat_tree(4)
    with FabricController(fabric, pipeline, ecmp_seeds=False) as plain:
        plain_desired = {n: len(a.desired) for n, a in plain.agents.items()}
    with FabricController(fabric, pipeline, ecmp_seeds=True) as ctl:
        telemetry = Telemetry(ctl, TelemetryConfig())
        agent = ctl.agents["p0e0"]
        assert len(agent.desired) == plain_desired["p0e0"] + 4 + 2 + 2 + 1 + 1  # ecn, sinks, defaults, seed, clone
        assert ("default", P4INFO.table_id(E.HASH_CONFIG)) in agent.owns
        assert ("packet_replication_engine_entry", "clone", TE.INT_REPORT_SESSION_ID) in agent.owns
        before = len(agent.desired)
        telemetry.set_watchlist([WATCH])
        assert len(agent.desired) == before + 1
        assert len(ctl.agents["c0"].desired) == plain_desired["c0"] + 4 + 2 + 1 + 1
