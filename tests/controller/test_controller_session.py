"""SwitchConnection and FabricController against small in-process P4Runtime servers.

`TinyTarget` is a minimal P4Runtime *server* (a stand-in for the switch, not for the code under
test): it arbitrates primaries, keeps a pipeline cookie, stores entities, answers Reads and rejects
Writes with per-update ``p4.v1.Error`` details exactly as the spec (and BMv2) do. It lets these
tests exercise the real client code - arbitration, deadlines, error parsing, reconnection,
re-push after a restart, reconciliation - without a P4 target installed.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent import futures

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller import entries as E
from controller.errors import NotPrimaryError, SwitchConnectionError, WriteError
from controller.fabric_controller import FabricController, FabricError, Pipeline
from controller.p4info import P4Info
from controller.switch import SwitchConnection
from test_controller_p4info import SAMPLE_P4INFO
from topologies.fabric import leaf_spine

P4INFO = P4Info(text_format.Parse(SAMPLE_P4INFO, p4info_pb2.P4Info()))


def _key(entity: p4runtime_pb2.Entity) -> tuple:
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        t = entity.table_entry
        return (kind, t.table_id, tuple(m.SerializeToString() for m in t.match), t.priority)
    if kind == "action_profile_member":
        return (kind, entity.action_profile_member.action_profile_id, entity.action_profile_member.member_id)
    if kind == "action_profile_group":
        return (kind, entity.action_profile_group.action_profile_id, entity.action_profile_group.group_id)
    if kind == "packet_replication_engine_entry":
        return (kind, entity.packet_replication_engine_entry.clone_session_entry.session_id)
    raise ValueError(kind)


class TinyTarget(p4runtime_pb2_grpc.P4RuntimeServicer):
    """A minimal P4Runtime server for one device."""

    def __init__(self, device_id: int, port: int = 0) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.streams: dict[int, tuple[tuple[int, int], queue.Queue]] = {}
        self.cookie: int | None = None
        self.pipeline_pushes = 0
        self.store: dict[tuple, p4runtime_pb2.Entity] = {}
        self.write_delay = 0.0
        self.reject_tables: set[int] = set()
        self.counter = {1: (10, 1000), 2: (0, 0), 3: (7, 700)}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=0).wait()

    # arbitration -----------------------------------------------------------------------------
    def _primary(self) -> tuple[int, int] | None:
        return max((e for e, _ in self.streams.values()), default=None)

    def _announce(self) -> None:
        primary = self._primary()
        for election, out in self.streams.values():
            msg = p4runtime_pb2.StreamMessageResponse()
            msg.arbitration.device_id = self.device_id
            msg.arbitration.election_id.high, msg.arbitration.election_id.low = primary  # type: ignore[misc]
            msg.arbitration.status.code = code_pb2.OK if election == primary else code_pb2.ALREADY_EXISTS
            out.put(msg)

    def StreamChannel(self, request_iterator, context):
        out: queue.Queue = queue.Queue()
        sid = id(out)

        def reader() -> None:
            try:
                for req in request_iterator:
                    if req.HasField("arbitration"):
                        e = req.arbitration.election_id
                        with self.lock:
                            self.streams[sid] = ((e.high, e.low), out)
                            self._announce()
            except Exception:  # noqa: BLE001 - the client went away
                pass
            out.put(None)

        threading.Thread(target=reader, daemon=True).start()
        try:
            while context.is_active():
                try:
                    msg = out.get(timeout=0.1)
                except queue.Empty:
                    continue
                if msg is None:
                    break
                yield msg
        finally:
            with self.lock:
                self.streams.pop(sid, None)
                self._announce()

    def _check_primary(self, election, context) -> None:
        if (election.high, election.low) != self._primary():
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not primary")

    # pipeline ----------------------------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request, context):
        self._check_primary(request.election_id, context)
        with self.lock:
            self.cookie = request.config.cookie.cookie
            self.store.clear()
            self.pipeline_pushes += 1
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        if self.cookie is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        response.config.cookie.cookie = self.cookie
        return response

    # write / read ------------------------------------------------------------------------------
    def Write(self, request, context):
        self._check_primary(request.election_id, context)
        time.sleep(self.write_delay)
        errors = []
        with self.lock:
            for u in request.updates:
                key = _key(u.entity)
                err = p4runtime_pb2.Error(canonical_code=code_pb2.OK)
                if u.entity.HasField("table_entry") and u.entity.table_entry.table_id in self.reject_tables:
                    err = p4runtime_pb2.Error(canonical_code=code_pb2.RESOURCE_EXHAUSTED, message="Table is full")
                elif u.type == p4runtime_pb2.Update.INSERT:
                    if key in self.store:
                        err = p4runtime_pb2.Error(canonical_code=code_pb2.ALREADY_EXISTS, message="Match entry exists")
                    else:
                        self.store[key] = u.entity
                elif u.type == p4runtime_pb2.Update.MODIFY:
                    if key not in self.store:
                        err = p4runtime_pb2.Error(canonical_code=code_pb2.NOT_FOUND, message="No such entry")
                    else:
                        self.store[key] = u.entity
                else:
                    if self.store.pop(key, None) is None:
                        err = p4runtime_pb2.Error(canonical_code=code_pb2.NOT_FOUND, message="No such entry")
                errors.append(err)
        if any(e.canonical_code != code_pb2.OK for e in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure")
            for e in errors:
                status.details.add().Pack(e)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "Write failure")
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        response = p4runtime_pb2.ReadResponse()
        with self.lock:
            stored = list(self.store.values())
        for want in request.entities:
            kind = want.WhichOneof("entity")
            if kind == "counter_entry":
                for index, (packets, octets) in self.counter.items():
                    c = response.entities.add().counter_entry
                    c.counter_id = want.counter_entry.counter_id
                    c.index.index = index
                    c.data.packet_count, c.data.byte_count = packets, octets
                continue
            for e in stored:
                if e.WhichOneof("entity") != kind:
                    continue
                if kind == "table_entry" and want.table_entry.table_id not in (0, e.table_entry.table_id):
                    continue
                if kind == "packet_replication_engine_entry" and _key(e) != _key(want):
                    continue
                response.entities.add().CopyFrom(e)
        yield response


@pytest.fixture
def target():
    t = TinyTarget(device_id=7)
    yield t
    t.stop()


def connect(t: TinyTarget, election=(0, 1), **kw) -> SwitchConnection:
    conn = SwitchConnection("s7", t.address, t.device_id, election_id=election, p4info=P4INFO, **kw)
    conn.connect(timeout=5)
    return conn


# --- SwitchConnection -----------------------------------------------------------------------


def test_connect_timeout_names_the_switch() -> None:
    conn = SwitchConnection("p9e9", "127.0.0.1:1", 99)
    with pytest.raises(SwitchConnectionError, match=r"p9e9 \(device 99\) at 127.0.0.1:1: no P4Runtime server answered within 0.5 s"):
        conn.connect(timeout=0.5)


def test_primary_pipeline_write_read(target: TinyTarget) -> None:
    with connect(target) as conn:
        assert conn.is_primary
        assert conn.pipeline_cookie() is None
        conn.set_pipeline(P4INFO, b"{}", cookie=1234)
        assert conn.pipeline_cookie() == 1234
        ents = [E.my_station(P4INFO, "02:00:00:00:00:07"), E.route(P4INFO, "10.0.0.0/24", 1)]
        conn.insert(ents)
        assert len(conn.read_table()) == 2
        assert len(conn.read_table(P4INFO.table_id(E.ROUTING_V4))) == 1
        assert conn.read_counter(P4INFO.counter_id(E.EGRESS_PORT_COUNTER)) == {1: (10, 1000), 2: (0, 0), 3: (7, 700)}


def test_second_client_is_not_primary(target: TinyTarget) -> None:
    with connect(target, election=(0, 5)):
        with pytest.raises(NotPrimaryError, match=r"s7 \(device 7\).*not primary with election id \(0, 2\): ALREADY_EXISTS"):
            connect(target, election=(0, 2))


def test_rejected_updates_are_reported_with_entity_and_error(target: TinyTarget) -> None:
    with connect(target) as conn:
        conn.set_pipeline(P4INFO, b"{}", cookie=1)
        conn.insert([E.route(P4INFO, "10.1.0.0/24", 3)])
        batch = [E.route(P4INFO, "10.2.0.0/24", 3), E.route(P4INFO, "10.1.0.0/24", 3)]
        with pytest.raises(WriteError) as info:
            conn.insert(batch)
        err = info.value
        assert (err.switch, err.device_id, err.total) == ("s7", 7, 2)
        (failure,) = err.failures
        assert (failure.index, failure.update_type, failure.code) == (1, "INSERT", "ALREADY_EXISTS")
        assert str(err).splitlines() == [
            f"s7 (device 7) at {target.address}: write failed: 1 of 2 updates rejected",
            "  update 1: INSERT table FabricIngress.forwarding.routing_v4 [ipv4_dst=10.1.0.0/24] -> "
            "FabricIngress.forwarding.set_next_id(next_id=3): ALREADY_EXISTS: Match entry exists",
        ]
        # the other update of the batch was applied (CONTINUE_ON_ERROR)
        assert len(conn.read_table()) == 2


def test_write_indices_span_batches(target: TinyTarget) -> None:
    with connect(target) as conn:
        conn.set_pipeline(P4INFO, b"{}", cookie=1)
        conn.insert([E.route(P4INFO, "10.0.5.0/24", 1)])
        updates = [
            p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=E.route(P4INFO, f"10.0.{i}.0/24", 1))
            for i in range(8)
        ]
        with pytest.raises(WriteError) as info:
            conn.write(updates, batch_size=3)
        assert [f.index for f in info.value.failures] == [5]


def test_slow_switch_hits_the_deadline(target: TinyTarget) -> None:
    with connect(target, rpc_timeout=0.3) as conn:
        conn.set_pipeline(P4INFO, b"{}", cookie=1)
        target.write_delay = 1.0
        with pytest.raises(SwitchConnectionError, match=r"s7 \(device 7\).*DEADLINE_EXCEEDED"):
            conn.insert([E.route(P4INFO, "10.0.0.0/24", 1)])


def test_stream_break_is_noticed(target: TinyTarget) -> None:
    broken = threading.Event()
    conn = connect(target, on_stream_broken=lambda c, why: broken.set())
    target.stop()
    assert broken.wait(5)
    assert conn.broken and not conn.connected
    with pytest.raises(SwitchConnectionError, match="stream broken"):
        conn.pipeline_cookie()
    conn.close()


# --- FabricController -----------------------------------------------------------------------


@pytest.fixture
def fabric_targets():
    fab = leaf_spine(2, 1, 1)
    targets = {sw.name: TinyTarget(sw.device_id) for sw in fab.switches}
    fab.switches = [dataclasses.replace(sw, grpc_port=targets[sw.name].port) for sw in fab.switches]
    yield fab, targets
    for t in targets.values():
        t.stop()


def pipeline() -> Pipeline:
    return Pipeline(P4INFO, b"{}", cookie=0xABC)


def test_controller_installs_every_switch(fabric_targets) -> None:
    fab, targets = fabric_targets
    with FabricController(fab, pipeline(), ecmp_seeds=False, rpc_timeout=5) as ctl:
        plans = ctl.start()
        for name, t in targets.items():
            assert t.pipeline_pushes == 1 and t.cookie == 0xABC
            assert len(t.store) == len(ctl.agents[name].desired) == len(plans[name].inserts)
        # idempotent: a second pass changes nothing and does not re-push the pipeline
        again = ctl.reconcile()
        assert all(not p for p in again.values())
        assert all(t.pipeline_pushes == 1 for t in targets.values())
        assert ctl.read_port_counters("l0") == {1: E_counter(10, 1000), 3: E_counter(7, 700)}


def E_counter(packets: int, octets: int):
    from controller.fabric_controller import PortCounter

    return PortCounter(packets, octets)


def test_controller_reports_failing_switches_by_name(fabric_targets) -> None:
    fab, targets = fabric_targets
    targets["s0"].reject_tables.add(P4INFO.table_id(E.ROUTING_V6))
    with FabricController(fab, pipeline(), ecmp_seeds=False, rpc_timeout=5) as ctl:
        with pytest.raises(FabricError) as info:
            ctl.start()
        assert set(info.value.errors) == {"s0"}
        text = str(info.value)
        assert "connect/install failed on 1 switch(es)" in text
        assert "s0 (device 3)" in text and "routing_v6 [ipv6_dst=fd00:1::/64]" in text and "RESOURCE_EXHAUSTED" in text
        assert ctl.status()["l0"].in_sync and not ctl.status()["s0"].in_sync


def test_controller_reinstalls_a_restarted_switch(fabric_targets) -> None:
    fab, targets = fabric_targets
    with FabricController(fab, pipeline(), ecmp_seeds=False, rpc_timeout=5, connect_timeout=2) as ctl:
        ctl.start()
        ctl.start_reconcile_loop(interval=0.2)
        old = targets["l1"]
        old.stop()
        targets["l1"] = TinyTarget(old.device_id, port=old.port)  # came back empty, no pipeline
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(targets["l1"].store) < len(ctl.agents["l1"].desired):
            time.sleep(0.1)
        assert targets["l1"].pipeline_pushes == 1
        assert len(targets["l1"].store) == len(ctl.agents["l1"].desired)
        assert ctl.wait_in_sync(timeout=10)
        status = ctl.status()["l1"]
        assert status.connects == 2 and status.pipeline_pushes == 2


def test_controller_repairs_drift_and_follows_link_changes(fabric_targets) -> None:
    fab, targets = fabric_targets
    with FabricController(fab, pipeline(), ecmp_seeds=False, rpc_timeout=5) as ctl:
        ctl.start()
        t = targets["l0"]
        # someone deleted a route behind the controller's back
        victim = next(k for k, e in t.store.items() if k[0] == "table_entry" and k[1] == P4INFO.table_id(E.ROUTING_V4))
        del t.store[victim]
        assert len(ctl.reconcile(["l0"])["l0"].inserts) == 1
        # the only spine link of l0 fails: l0 loses its route to l1's subnet and the uplink group
        ctl.set_link_up("l0", "s0", False)
        result = ctl.reconcile()
        assert result["l0"].deletes and not result["l0"].inserts
        assert all(not (k[1] == P4INFO.table_id(E.ROUTING_V4) and b"\x0a\xc8\x01\x00" in k[2][0]) for k in t.store if k[0] == "table_entry")


def test_a_recompute_does_not_wait_for_a_dead_switch_s_connect(fabric_targets) -> None:
    """Connecting to a killed switch takes the whole connect timeout; meanwhile a recompute (a
    reroute around that switch) hands every agent its new desired state without waiting."""
    fab, targets = fabric_targets
    with FabricController(fab, pipeline(), ecmp_seeds=False, rpc_timeout=5, connect_timeout=3) as ctl:
        ctl.start()
        targets["s0"].stop()
        agent = ctl.agents["s0"]
        agent.close()
        errors: list[BaseException] = []

        def reconnect() -> None:
            try:
                agent.reconcile()
            except Exception as err:      # the dead switch: a connection error naming it
                errors.append(err)

        connecting = threading.Thread(target=reconnect)
        connecting.start()
        deadline = time.monotonic() + 2
        while agent.status.reconciles == 0 and time.monotonic() < deadline:
            time.sleep(0.01)          # the reconcile holds the session now and is connecting
        version = agent._desired_version
        ctl.recompute()
        assert connecting.is_alive(), "the recompute waited for the connect attempt"
        assert agent._desired_version == version + 1 and not agent.status.in_sync
        connecting.join()
        assert errors and "s0" in str(errors[0])
