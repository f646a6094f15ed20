"""One controller process for a whole fabric: many switches, each kept at its desired state.

`FabricController(fabric, pipeline)` computes the forwarding state of every switch from the
topology model (`controller.routing`), turns it into P4Runtime entities (`controller.entries`) and
gives each switch a `SwitchAgent`. An agent's `reconcile()` is idempotent:

1. connect (new channel + stream + arbitration) when there is no healthy session;
2. read the pipeline cookie; push the pipeline (VERIFY_AND_COMMIT) when the device has none or
   another one - e.g. after the target restarted;
3. read what the switch holds in the tables and action profile the controller owns, and write the
   difference (`controller.reconcile.plan`).

`start()` reconciles every switch in parallel (a thread pool; gRPC releases the GIL) and raises
`FabricError` naming every switch that failed and why; `start_reconcile_loop()` keeps a background
thread that reconciles a switch again as soon as its stream breaks, its last attempt failed or its
desired state changed (`set_link_up`), and every ``full_check_interval`` seconds anyway.
`read_port_counters()` reads ``egress_port_counter``/``ingress_port_counter`` (and ECN's
``ecn_marked``) for tests, demos and the metrics exporter.

Every switch gets its own ECMP hash seed (``ecmp_seeds``, on by default: with one hash everywhere
a fat-tree's tiers choose alike and half the cores stay idle); pass ``ecmp_seeds=False`` to watch
that polarisation.

Features plug in; the core names none of them. A `StateSource` adds desired state to every
switch (`add_state_source`): aggregation jobs, load-balancing modes and TE pins, flow sampling,
emulated loss, ECN and INT (`controller.telemetry.Telemetry`), failure handling's backups. A
`Feature` is a state source with a life cycle (threads, packet-in handlers: failure handling,
`controller.failover.FailureHandler`): once started it registers with `add_feature`, `feature(kind)`
finds it, and `close()` stops every one still running, the last started first.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, TypeVar

from p4.v1 import p4runtime_pb2

from controller import entries as E
from controller.errors import ReadError, SwitchConnectionError, SwitchError, WriteError, switch_label
from controller.p4info import P4Info
from controller.reconcile import Plan, owner_key, plan
from controller.routing import SwitchForwarding, compute_forwarding
from controller.switch import DEFAULT_RPC_TIMEOUT, PacketHandler, SwitchConnection
from controller.topology import TopologyModel
from topologies.fabric import Fabric, Switch

log = logging.getLogger(__name__)

MAX_BACKOFF = 8.0
DEFAULT_BUILD_DIR = Path(__file__).resolve().parent.parent / "p4src" / "build"


@dataclass(frozen=True)
class Pipeline:
    """What SetForwardingPipelineConfig sends: the P4Info and the target config (BMv2 JSON).

    ``cookie`` identifies the pipeline on the device (a hash of both), so a reconnecting
    controller can tell whether the device still runs it."""

    p4info: P4Info
    device_config: bytes
    cookie: int
    p4info_path: Path | None = None     # the files it was read from (`from_files`), for users' tools
    json_path: Path | None = None

    @classmethod
    def from_files(cls, p4info_path: str | Path, json_path: str | Path) -> "Pipeline":
        p4info_path, json_path = Path(p4info_path), Path(json_path)
        for path in (p4info_path, json_path):
            if not path.is_file():
                raise FileNotFoundError(f"pipeline file {path} does not exist (run `make p4`?)")
        config = json_path.read_bytes()
        info = P4Info.from_file(p4info_path)
        digest = hashlib.sha256(info.message.SerializeToString(deterministic=True) + config).digest()
        return cls(info, config, int.from_bytes(digest[:8], "big") or 1, p4info_path.resolve(), json_path.resolve())

    @classmethod
    def from_build_dir(cls, build_dir: str | Path = DEFAULT_BUILD_DIR, program: str = "fabric") -> "Pipeline":
        """``<build_dir>/<program>.p4info.txtpb`` + ``<build_dir>/<program>.json``."""
        build_dir = Path(build_dir)
        return cls.from_files(build_dir / f"{program}.p4info.txtpb", build_dir / f"{program}.json")


class StateSource(Protocol):
    """More desired state for the switches (aggregation jobs, loss emulation, ...): the owner
    keys (`controller.reconcile.owner_key`) a source owns on a switch, and its entities there,
    PRE entries first. Registered with `FabricController.add_state_source`."""

    def owned(self, switch: str) -> set[tuple]: ...

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]: ...


class Feature(StateSource, Protocol):
    """A state source with a life cycle (threads, packet-in handlers): ``start()`` installs it,
    registers it with `FabricController.add_feature` and returns it; ``stop()`` ends it, removes
    what it installed and unregisters it (`FabricController.remove_feature`)."""

    def start(self) -> "Feature": ...

    def stop(self) -> None: ...


F = TypeVar("F")


@dataclass
class SwitchStatus:
    """What the controller knows about one switch (a snapshot)."""

    name: str
    device_id: int
    address: str
    connected: bool = False
    in_sync: bool = False
    pipeline_pushes: int = 0
    connects: int = 0
    reconciles: int = 0
    last_plan: str = ""
    last_error: str | None = None
    last_error_time: float | None = None


@dataclass(frozen=True)
class PortCounter:
    packets: int
    bytes: int


class FabricError(Exception):
    """Some switches failed; ``errors`` maps switch name -> the exception."""

    def __init__(self, action: str, errors: dict[str, BaseException]) -> None:
        self.errors = errors
        lines = [f"{action} failed on {len(errors)} switch(es):"]
        for name, err in sorted(errors.items()):
            text = str(err) if isinstance(err, SwitchError) else f"{name}: {type(err).__name__}: {err}"
            lines.append("  " + text.replace("\n", "\n    "))
        super().__init__("\n".join(lines))


class SwitchAgent:
    """Keeps one switch at its desired state (one session at a time, one reconcile at a time)."""

    def __init__(
        self,
        switch: Switch,
        pipeline: Pipeline,
        *,
        election_id: int | tuple[int, int] = (0, 1),
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
        connect_timeout: float = 10.0,
        on_stream_broken: Callable[["SwitchAgent", str], None] | None = None,
    ) -> None:
        self.switch = switch
        self.pipeline = pipeline
        self.election_id = election_id
        self.rpc_timeout = rpc_timeout
        self.connect_timeout = connect_timeout
        self._on_stream_broken = on_stream_broken
        self.conn: SwitchConnection | None = None
        # the session on which the switch was last reconciled: it runs the pipeline and its tables
        # (a restarted switch has a session before that, and answers packet-outs with errors)
        self.programmed_on: SwitchConnection | None = None
        # Packet-in handlers of every session with this switch (see SwitchConnection).
        self.packet_handlers: list[PacketHandler] = []
        self.status = SwitchStatus(switch.name, switch.device_id, switch.grpc_address)
        self.desired: list[p4runtime_pb2.Entity] = []
        self.owns: set[tuple] = set()
        self._desired_version = 0
        self._synced_version = -1
        self._failures = 0
        self._retry_at = 0.0
        self._lock = threading.RLock()          # the session: connecting, reconciling, closing
        self._connecting: SwitchConnection | None = None   # a connect under way (`abort` ends it)
        self._aborted = False
        # the desired state alone: a recompute never waits for a session (connecting to a dead
        # switch takes up to connect_timeout)
        self._desired_lock = threading.Lock()

    @property
    def label(self) -> str:
        return switch_label(self.switch.name, self.switch.device_id, self.switch.grpc_address)

    def set_desired(self, desired: Iterable[p4runtime_pb2.Entity], owns: set[tuple]) -> None:
        with self._desired_lock:
            self.desired = list(desired)
            self.owns = set(owns)
            self._desired_version += 1
            self.status.in_sync = False

    def desired_state(self) -> tuple[list[p4runtime_pb2.Entity], set[tuple]]:
        """What the switch should hold and what of it the controller owns, as of now."""
        with self._desired_lock:
            return self.desired, self.owns

    def needs_reconcile(self) -> bool:
        """No healthy session, or the switch may differ from the desired state."""
        conn = self.conn
        return conn is None or not conn.connected or self._synced_version != self._desired_version

    def due(self) -> bool:
        """needs_reconcile(), unless still backing off after failed attempts (0.5 s doubling
        to at most MAX_BACKOFF s, so a switch that keeps rejecting is not hammered)."""
        return self.needs_reconcile() and time.monotonic() >= self._retry_at

    def connection(self) -> SwitchConnection:
        """The live session (connects when needed)."""
        with self._lock:
            if self.conn is not None and self.conn.connected:
                return self.conn
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            if self._aborted:
                raise SwitchConnectionError(self.switch.name, self.switch.device_id, "the controller is closing",
                                            self.switch.grpc_address)
            conn = SwitchConnection(
                self.switch.name,
                self.switch.grpc_address,
                self.switch.device_id,
                election_id=self.election_id,
                rpc_timeout=self.rpc_timeout,
                p4info=self.pipeline.p4info,
                on_stream_broken=self._stream_broken,
                packet_handlers=self.packet_handlers,
            )
            self._connecting = conn
            try:
                conn.connect(timeout=self.connect_timeout)
            finally:
                self._connecting = None
            self.conn = conn
            self.status.connects += 1
            self.status.connected = True
            return conn

    def _stream_broken(self, conn: SwitchConnection, reason: str) -> None:
        self.status.connected = False
        self.status.in_sync = False
        self._record_error(f"stream broken: {reason}")
        if self._on_stream_broken is not None:
            self._on_stream_broken(self, reason)

    def _record_error(self, text: str) -> None:
        self.status.last_error = text
        self.status.last_error_time = time.time()

    def ensure_pipeline(self, conn: SwitchConnection) -> bool:
        """Push the pipeline unless the device already runs it; True when pushed."""
        if conn.pipeline_cookie() == self.pipeline.cookie:
            return False
        log.info("%s: pushing pipeline (cookie %#x)", self.label, self.pipeline.cookie)
        conn.set_pipeline(self.pipeline.p4info, self.pipeline.device_config, self.pipeline.cookie)
        self.status.pipeline_pushes += 1
        return True

    def read_actual(self, conn: SwitchConnection, owns: set[tuple] | None = None) -> tuple[list[p4runtime_pb2.Entity], bool]:
        """Entities the switch holds in what the controller owns (``owns``, default: what it
        owns now); second value: whether PRE (clone session) entries could be read."""
        owns = self.owns if owns is None else owns
        wildcards = []
        for kind, ident in sorted({k[:2] for k in owns if k[0] in ("table", "profile")}):
            if kind == "table":
                wildcards.append(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=ident)))
            else:
                wildcards.append(
                    p4runtime_pb2.Entity(action_profile_member=p4runtime_pb2.ActionProfileMember(action_profile_id=ident))
                )
                wildcards.append(
                    p4runtime_pb2.Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup(action_profile_id=ident))
                )
        actual = list(conn.read(wildcards)) if wildcards else []
        for _kind, ident in sorted(k for k in owns if k[0] == "default"):
            request = p4runtime_pb2.TableEntry(table_id=ident, is_default_action=True)
            try:
                actual += list(conn.read([p4runtime_pb2.Entity(table_entry=request)]))
            except ReadError:
                pass  # a target that cannot read default entries: the plan writes them again
        pre_readable = True
        for key in owns:
            if key[0] != "packet_replication_engine_entry":
                continue
            pre = p4runtime_pb2.PacketReplicationEngineEntry()
            if key[1] == "clone":
                pre.clone_session_entry.session_id = key[2]
            else:
                pre.multicast_group_entry.multicast_group_id = key[2]
            try:
                actual += list(conn.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)]))
            except ReadError as err:
                if err.code != "NOT_FOUND":  # NOT_FOUND: simply absent
                    pre_readable = False  # a target that cannot read PRE entries back
        return actual, pre_readable

    def reconcile(self) -> Plan:
        """Bring the switch to its desired state; raises SwitchError naming the switch."""
        with self._lock:
            with self._desired_lock:
                version, desired, owns = self._desired_version, self.desired, self.owns
            self.status.reconciles += 1
            try:
                conn = self.connection()
                self.ensure_pipeline(conn)
                actual, pre_readable = self.read_actual(conn, owns)
                todo = plan(desired, actual, owns)
                if not pre_readable:
                    todo = self._upsert_pre(conn, todo)
                conn.write(todo.updates())
            except SwitchError as err:
                self._failed(err)
                raise
            self._synced(version, todo)
            self.programmed_on = conn
            log.info("%s: in sync (%s)", self.label, todo.summary())
            return todo

    def _failed(self, err: SwitchError) -> None:
        """A reconcile or write failed: not in sync, back off, drop a broken session."""
        self._record_error(str(err))
        self.status.in_sync = False
        self._failures += 1
        self._retry_at = time.monotonic() + min(MAX_BACKOFF, 0.5 * 2 ** (self._failures - 1))
        if isinstance(err, SwitchConnectionError) and self.conn is not None:
            self.conn.close()
            self.conn = None
            self.status.connected = False

    def _synced(self, version: int, todo: Plan) -> None:
        """The switch holds desired state ``version`` (written by ``todo``)."""
        self._synced_version = version
        self._failures = 0
        self._retry_at = 0.0
        self.status.in_sync = True
        self.status.last_plan = todo.summary()
        self.status.last_error = None

    def replace_owned(self, owns: set[tuple], entities: Iterable[p4runtime_pb2.Entity]) -> Plan:
        """Make ``entities`` the desired state in what ``owns`` covers, the rest left as it is,
        and write it: when the switch held the desired state until now, only the difference
        (one batch, nothing read back, no other table touched); else a whole `reconcile`."""
        entities = list(entities)
        with self._lock:
            with self._desired_lock:
                conn = self.conn
                in_sync = (conn is not None and conn.connected and self._synced_version == self._desired_version)
                before = [e for e in self.desired if owner_key(e) in owns]
                self.desired = [e for e in self.desired if owner_key(e) not in owns] + entities
                self._desired_version += 1
                version = self._desired_version
                self.status.in_sync = False
            if not in_sync:
                return self.reconcile()
            todo = plan(entities, before, owns)
            try:
                conn.write(todo.updates())
            except SwitchError as err:
                self._failed(err)       # the next reconcile reads the switch back and repairs it
                raise
            self._synced(version, todo)
            log.debug("%s: %s written", self.label, todo.summary())
            return todo

    def _upsert_pre(self, conn: SwitchConnection, todo: Plan) -> Plan:
        """PRE entries the target cannot read back: INSERT, or MODIFY if they exist."""
        kind = "packet_replication_engine_entry"
        pres = [e for e in todo.inserts if e.WhichOneof("entity") == kind]
        todo.inserts = [e for e in todo.inserts if e.WhichOneof("entity") != kind]
        for e in pres:
            try:
                conn.insert([e])
            except WriteError as err:
                if all(f.code == "ALREADY_EXISTS" for f in err.failures) and err.failures:
                    conn.modify([e])
                else:
                    raise
        return todo

    def abort(self) -> None:
        """Connect no more (the controller is closing): a connect under way ends now, none starts
        again."""
        self._aborted = True
        self._end_connect()

    def _end_connect(self) -> None:
        """End a connect under way (it would hold the session for up to ``connect_timeout``
        against a switch that does not answer)."""
        pending = self._connecting
        if pending is not None:
            pending.close()

    def close(self) -> None:
        """Drop the session (a later `connection` opens a new one)."""
        self._end_connect()
        with self._lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            self.status.connected = False


class FabricController:
    """Connects to every switch of ``fabric``, pushes ``pipeline`` and keeps routes installed."""

    def __init__(
        self,
        fabric: Fabric,
        pipeline: Pipeline,
        *,
        election_id: int | tuple[int, int] = (0, 1),
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
        connect_timeout: float = 10.0,
        max_workers: int | None = None,
        punt_lldp: bool = False,
        ecmp_seeds: bool = True,
    ) -> None:
        self.fabric = fabric
        self.pipeline = pipeline
        self.model = TopologyModel(fabric)
        self.punt_lldp = punt_lldp
        self.ecmp_seeds = ecmp_seeds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None
        self.agents: dict[str, SwitchAgent] = {
            sw.name: SwitchAgent(
                sw,
                pipeline,
                election_id=election_id,
                rpc_timeout=rpc_timeout,
                connect_timeout=connect_timeout,
                on_stream_broken=lambda agent, reason: self._wake.set(),
            )
            for sw in fabric.switches
        }
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers or min(32, max(1, len(self.agents))), thread_name_prefix="fabric-ctl"
        )
        self.forwarding: dict[str, SwitchForwarding] = {}
        self.state_sources: list[StateSource] = []
        self.features: list[Feature] = []      # started features, in the order they started
        # One recompute at a time: the last one to finish holds the newest state of every source.
        self._recompute_lock = threading.RLock()
        self.recompute()

    # --- desired state ---------------------------------------------------------------------

    def recompute(self) -> dict[str, SwitchForwarding]:
        """Recompute routes from the topology model and hand each agent its desired entities."""
        with self._recompute_lock:
            return self._recompute()

    def _recompute(self) -> dict[str, SwitchForwarding]:
        self.forwarding = compute_forwarding(self.model)
        p4info = self.pipeline.p4info
        owned_tables = [E.MY_STATION, E.ARP_REPLY, E.NDP_REPLY, E.ROUTING_V4, E.ROUTING_V6, E.NEXT_HASHED]
        if self.punt_lldp:
            owned_tables.append(E.ACL)
        owned_default_tables: list[str] = []
        if self.ecmp_seeds:
            owned_default_tables.append(E.HASH_CONFIG)
        owns = {("table", p4info.table_id(t)) for t in owned_tables}
        owns |= {("default", p4info.table_id(t)) for t in owned_default_tables}
        owns.add(("profile", p4info.action_profile_id(E.ECMP_SELECTOR)))
        for name, state in self.forwarding.items():
            ents = E.forwarding_entities(p4info, state, punt_lldp=self.punt_lldp)
            pre, tables, defaults = list(ents.pre), [], []
            if self.ecmp_seeds:
                defaults.append(E.hash_seed_entity(p4info, state.device_id))
            owned = owns | {owner_key(e) for e in pre}
            for source in self.state_sources:
                extra = source.entities(name)
                pre += [e for e in extra if e.WhichOneof("entity") == "packet_replication_engine_entry"]
                tables += [e for e in extra if e.WhichOneof("entity") != "packet_replication_engine_entry"]
                owned |= source.owned(name)
            desired = [*pre, *ents.members, *ents.groups, *ents.tables, *tables, *defaults]
            self.agents[name].set_desired(desired, owned)
        self._wake.set()
        return self.forwarding

    def add_state_source(self, source: StateSource) -> None:
        """Make ``source``'s entities part of every switch's desired state from now on."""
        self.state_sources.append(source)
        self.recompute()

    def state_source(self, kind: type[F]) -> F | None:
        """The registered state source of class ``kind`` (the first added), or None."""
        return next((s for s in self.state_sources if isinstance(s, kind)), None)

    def remove_state_source(self, source: StateSource) -> None:
        """Stop installing ``source``'s entities (they are deleted at the next reconcile)."""
        if source in self.state_sources:
            self.state_sources.remove(source)
            self.recompute()

    def add_feature(self, feature: Feature) -> None:
        """A feature has started: `feature` finds it, `close` stops it."""
        if feature not in self.features:
            self.features.append(feature)

    def remove_feature(self, feature: Feature) -> None:
        """A feature has stopped."""
        if feature in self.features:
            self.features.remove(feature)

    def feature(self, kind: type[F]) -> F | None:
        """The running feature of class ``kind`` (the first started), or None."""
        return next((f for f in self.features if isinstance(f, kind)), None)

    def stop_features(self) -> None:
        """Stop every running feature, the last started first; every one is stopped whatever
        another's stop did (the first error is raised after)."""
        error: BaseException | None = None
        for feature in reversed(list(self.features)):
            try:
                feature.stop()
            except BaseException as err:  # noqa: BLE001 - raised once all were stopped
                error = error or err
            self.remove_feature(feature)
        if error is not None:
            raise error

    def apply_now(self, names: Iterable[str]) -> None:
        """Recompute, then reconcile the named switches at once (not waiting for the loop);
        FabricError names every switch that failed."""
        self.recompute()
        results = self.reconcile(names)
        errors = {n: r for n, r in results.items() if isinstance(r, BaseException)}
        if errors:
            raise FabricError("install", errors)

    def apply_source(self, source: StateSource, names: Iterable[str]) -> None:
        """Write ``source``'s entities on the named switches at once, in parallel, one batch a
        switch holding only what changed since its entities were last desired: no recompute of
        the routes, nothing read back (`SwitchAgent.replace_owned`; a switch that was not in sync
        is reconciled whole). For a source whose changes must land fast (TE pins); FabricError
        names every switch that failed."""
        chosen = list(names)
        wanted = {name: (source.owned(name), source.entities(name)) for name in chosen}
        futures = {name: self._executor.submit(self.agents[name].replace_owned, *wanted[name]) for name in chosen}
        errors: dict[str, BaseException] = {}
        for name, fut in futures.items():
            try:
                fut.result()
            except BaseException as err:  # noqa: BLE001 - collected and reported per switch
                errors[name] = err
        if errors:
            raise FabricError("install", errors)

    def set_link_up(self, a: str, b: str, up: bool) -> None:
        """Mark a switch-switch link up/down and recompute; the reconcile loop (or the next
        `reconcile()`) installs the new routes."""
        self.model.set_link_up(a, b, up)
        self.recompute()

    # --- reconciliation --------------------------------------------------------------------

    def reconcile(self, names: Iterable[str] | None = None) -> dict[str, Plan | BaseException]:
        """Reconcile the named switches (all by default) in parallel; never raises per switch."""
        chosen = list(names) if names is not None else list(self.agents)
        futures = {name: self._executor.submit(self.agents[name].reconcile) for name in chosen}
        results: dict[str, Plan | BaseException] = {}
        for name, fut in futures.items():
            try:
                results[name] = fut.result()
            except BaseException as err:  # noqa: BLE001 - collected and reported per switch
                results[name] = err
        return results

    def start(self) -> dict[str, Plan]:
        """Connect to every switch, push the pipeline, install everything; FabricError when any
        switch failed (the others are left configured)."""
        results = self.reconcile()
        errors = {n: r for n, r in results.items() if isinstance(r, BaseException)}
        if errors:
            raise FabricError("connect/install", errors)
        return results  # type: ignore[return-value]

    def start_reconcile_loop(self, interval: float = 1.0, full_check_interval: float = 30.0) -> None:
        """Background thread: reconcile switches that need it (broken stream, failed attempt,
        changed routes) every ``interval`` s, and every switch every ``full_check_interval`` s.
        A slow or dead switch only occupies its own worker: the others are served meanwhile."""
        if self._loop is not None:
            return
        self._stop.clear()

        def loop() -> None:
            last_full = time.monotonic()
            running: dict[str, Future] = {}
            while not self._stop.is_set():
                self._wake.wait(interval)
                self._wake.clear()
                if self._stop.is_set():
                    break
                for name, fut in list(running.items()):
                    if fut.done():
                        del running[name]
                        if fut.exception() is not None:
                            log.warning("reconcile %s: %s", name, fut.exception())
                full = time.monotonic() - last_full >= full_check_interval
                if full:
                    last_full = time.monotonic()
                for name, agent in self.agents.items():
                    if name not in running and (full or agent.due()):
                        running[name] = self._executor.submit(agent.reconcile)
            for fut in running.values():
                fut.cancel()

        self._loop = threading.Thread(target=loop, name="fabric-reconcile", daemon=True)
        self._loop.start()

    def stop_reconcile_loop(self) -> None:
        if self._loop is None:
            return
        self._stop.set()
        self._wake.set()
        self._loop.join(timeout=60)
        self._loop = None

    def wait_in_sync(self, timeout: float = 30.0, names: Iterable[str] | None = None) -> bool:
        """Wait until the named (default: all) switches are in sync; False on timeout."""
        chosen = list(names) if names is not None else list(self.agents)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.agents[n].status.in_sync and not self.agents[n].needs_reconcile() for n in chosen):
                return True
            time.sleep(0.1)
        return False

    # --- observation -----------------------------------------------------------------------

    def status(self) -> dict[str, SwitchStatus]:
        return {name: agent.status for name, agent in self.agents.items()}

    def connection(self, name: str) -> SwitchConnection:
        """The live session with switch ``name`` (for packet I/O, reads, tests)."""
        try:
            agent = self.agents[name]
        except KeyError:
            raise KeyError(f"no switch named {name!r} in {self.fabric.describe()}") from None
        return agent.connection()

    def read_port_counters(self, name: str, counter: str = E.EGRESS_PORT_COUNTER) -> dict[int, PortCounter]:
        """port -> packets/bytes of a per-port counter of switch ``name`` (non-zero cells only)."""
        conn = self.connection(name)
        cells = conn.read_counter(self.pipeline.p4info.counter_id(counter))
        return {port: PortCounter(p, b) for port, (p, b) in sorted(cells.items()) if p or b}

    def abort_connects(self) -> None:
        """End every connect under way and start none: the first step of closing (a switch that
        does not answer would otherwise hold each session for its connect timeout)."""
        for agent in self.agents.values():
            agent.abort()

    def close(self) -> None:
        self.abort_connects()
        try:
            self.stop_features()
        finally:                  # the sessions and threads go whatever a feature's stop did
            self.stop_reconcile_loop()
            for agent in self.agents.values():
                agent.close()
            self._executor.shutdown(wait=True)

    def __enter__(self) -> "FabricController":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
