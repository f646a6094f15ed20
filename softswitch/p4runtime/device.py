"""The P4Runtime view of one softswitch: pipeline pushes, writes, reads and packet I/O.

Independent of gRPC (server.py adapts it). Locking: every RPC that touches pipeline state
holds the switch's ``config_lock``; write batches and program swaps also hold the data
plane's ``lock`` (taken after ``config_lock``), so a packet sees a batch whole or not at all.
Reads hold ``config_lock`` only while they copy what they read and build their answers after
releasing it (reads.py).
The data-plane thread only ever calls `on_packet_in`, which takes neither lock.

A pipeline push holds ``config_lock`` only for steps that do not grow with the program or the
state: the new pipeline is built and verified (its program generated) without it, and a
RECONCILE_AND_COMMIT copies the current state under it, fills the new pipeline without it (the
Writes applied meanwhile are kept in a journal) and takes it again to replay that journal and
swap the pipeline in. So Writes and Reads go on while a push is under way; pushes wait for one
another (``push_lock``).

Pipelines: ``current`` is the pipeline Read and Write refer to; ``committed`` the one the data
plane runs; they differ only between VERIFY_AND_SAVE and COMMIT (``pending``).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

from google.protobuf.message import DecodeError
from p4.v1 import p4runtime_pb2

from . import entities, pre_entries, table_entries
from .. import heap
from ..native.mode import NativeRefused, NativeUnavailable
from ..native.xsk import PortIOUnavailable
from ..pipeline.compiled import CompileError
from .arbitration import Arbiter, Connection, election_of
from .errors import P4RTError, invalid, not_found, unimplemented, ABORTED, DEADLINE_EXCEEDED, FAILED_PRECONDITION, \
    INTERNAL, PERMISSION_DENIED
from .packetio import packet_in_message, packet_out_frame
from .pipeline import Pipeline
from .reads import PLAN_SLICE, ReadPlan, ReadScope, Watch

log = logging.getLogger("softswitch.p4runtime")

Update = p4runtime_pb2.Update
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest

_WRITERS: dict[str, Callable] = {
    "table_entry": table_entries.write_table_entry,
    "action_profile_member": entities.write_member,
    "action_profile_group": entities.write_group,
    "counter_entry": entities.write_counter,
    "direct_counter_entry": table_entries.write_direct_counter,
    "meter_entry": entities.write_meter,
    "direct_meter_entry": table_entries.write_direct_meter,
    "register_entry": entities.write_register,
    "value_set_entry": entities.write_value_set,
    "digest_entry": entities.write_digest,
}
_READERS: dict[str, Callable] = {
    "table_entry": table_entries.read_table_entries,
    "action_profile_member": entities.read_members,
    "action_profile_group": entities.read_groups,
    "counter_entry": entities.read_counters,
    "direct_counter_entry": table_entries.read_direct_counters,
    "meter_entry": entities.read_meters,
    "direct_meter_entry": table_entries.read_direct_meters,
    "register_entry": entities.read_registers,
    "value_set_entry": entities.read_value_sets,
    "digest_entry": entities.read_digests,
    "packet_replication_engine_entry": pre_entries.read_pre,
}


class P4RuntimeDevice:
    def __init__(self, switch: Any):
        self.switch = switch
        self.device_id: int = switch.device_id
        self.lock: threading.RLock = switch.config_lock
        self.arbiter = Arbiter(self.device_id)
        self.current: Pipeline | None = None
        self.pending: Pipeline | None = None
        self.committed: Pipeline | None = None
        self.packet_in_dropped = 0
        self.push_lock = threading.Lock()                 # one pipeline push at a time
        self._journal: list[tuple[int, p4runtime_pb2.Entity]] | None = None   # see _reconcile

    # -- common checks -------------------------------------------------------------------------
    def check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise not_found(f"unknown device id {device_id} (this device is {self.device_id})")

    def _locked(self, timeout: float | None, lock: Any = None):
        """The config lock (or ``lock``), acquired within ``timeout`` seconds (None: wait)."""
        lock = lock or self.lock

        class _Guard:
            def __enter__(self_inner):
                ok = lock.acquire(timeout=max(0.0, timeout)) if timeout is not None else lock.acquire()
                if not ok:
                    raise P4RTError(DEADLINE_EXCEEDED, "deadline exceeded while waiting for another request")
                return self_inner

            def __exit__(self_inner, *exc):
                lock.release()
                return False
        return _Guard()

    def _dp_lock(self):
        dp = self.switch.dataplane
        return dp.lock if dp is not None else threading.RLock()

    def _pipeline(self) -> Pipeline:
        if self.current is None:
            raise P4RTError(FAILED_PRECONDITION, "no forwarding pipeline config set for this device "
                                                 "(use SetForwardingPipelineConfig)")
        return self.current

    # -- SetForwardingPipelineConfig / GetForwardingPipelineConfig -----------------------------
    def set_pipeline(self, request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
                     timeout: float | None = None) -> None:
        self.check_device(request.device_id)
        self.arbiter.check_writer(request.role, election_of(request))
        action = request.action
        if action == SetAction.UNSPECIFIED:
            raise invalid("SetForwardingPipelineConfig: action is not set")
        if action not in SetAction.Action.values():
            raise invalid(f"SetForwardingPipelineConfig: unknown action {action}")
        cfg = request.config
        if action == SetAction.COMMIT:
            if request.HasField("config") and (cfg.HasField("p4info") or cfg.p4_device_config):
                raise invalid("COMMIT realizes the saved config: it takes no config")
            with self._locked(timeout, self.push_lock), self._locked(timeout):
                if self.pending is None:
                    raise not_found("COMMIT: no saved config (VERIFY_AND_SAVE first)")
                self._commit(self.pending)
            return
        if not request.HasField("config") or not cfg.HasField("p4info"):
            raise invalid(f"{SetAction.Action.Name(action)} needs a config with a P4Info and a device config")
        cookie = cfg.cookie.cookie if cfg.HasField("cookie") else None
        # Building the pipeline verifies it (and compiles the program): done outside the lock.
        new = Pipeline(cfg.p4info, cfg.p4_device_config, cookie)
        if action == SetAction.VERIFY:
            return
        try:     # built outside the locks (seconds, once per program text); "on": native, or this fails
            new.native = self.switch.native_path.prepare(new.program)
        except NativeRefused as e:       # a program feature the native path lacks
            raise unimplemented(f"the native data path (--native on) cannot run this program: {e}") from None
        except NativeUnavailable as e:
            raise P4RTError(INTERNAL, f"the native data path (--native on) cannot be had: {e}") from None
        if new.native is None:           # the compiled path serves a program the native one does not
            try:
                self.switch.fast_path.prepare(new.program)     # "now": the compiled path, or this fails
            except CompileError as e:
                raise P4RTError(INTERNAL, f"the compiled packet path (--compiled now) cannot be had: {e}") from None
        with self._locked(timeout, self.push_lock):
            if action == SetAction.RECONCILE_AND_COMMIT and self.current is not None:
                self._reconcile(new, timeout)
                return
            with self._locked(timeout):
                if action == SetAction.VERIFY_AND_SAVE:
                    self.current = self.pending = new
                    log.info("device %d: pipeline saved (not yet committed)", self.device_id)
                else:
                    self._commit(new)

    def _commit(self, new: Pipeline) -> None:
        # takes the data plane's lock itself (or stops it for a data plane of another kind);
        # config_lock, held here, keeps Writes out until the swap below is done
        try:
            self.switch.use_program(new.program, new.pre.engine, getattr(new, "native", None))
        except PortIOUnavailable as e:      # "af_xdp": the new data plane does not run
            raise P4RTError(INTERNAL, f"AF_XDP port I/O (--port-io af_xdp) cannot be had: {e}") from None
        with self._dp_lock():
            self.current = self.committed = new
            self.pending = None
            self.switch.p4info = new.p4info
            self.switch.device_config = new.json
            self.switch.cookie = new.cookie or 0
        log.info("device %d: pipeline committed (%d tables)", self.device_id, len(new.map.tables))
        heap.trim()      # what building the pipeline freed (softswitch/heap.py)

    def _reconcile(self, new: Pipeline, timeout: float | None) -> None:
        """RECONCILE_AND_COMMIT: replay the forwarding state of the current pipeline into ``new``
        (same P4Info ids needed), then commit; if any of it does not fit, nothing changes.

        Only the copy of the state and the final swap hold the config lock: ``new``, which no
        one else sees yet, is filled without it, while Writes go on; the updates they apply
        meanwhile are journalled (`write`) and replayed into ``new``, in order, just before the
        swap. Counts and register values the data plane changes meanwhile are kept as copied."""
        with self._locked(timeout):
            old = self._pipeline()
            state = _forwarding_state(old)        # copied now; the entities are built below
            self._journal = []
        try:
            new.pre = old.pre                     # one PRE for both: its writes reach new too
            _replay(new, state, self._apply)
            with self._locked(timeout):
                if self.current is not old:
                    raise P4RTError(ABORTED, "RECONCILE_AND_COMMIT: the pipeline was replaced meanwhile: push again")
                _replay(new, self._journal, self._apply)
                self._commit(new)
        finally:
            self._journal = None

    def get_pipeline(self, request: p4runtime_pb2.GetForwardingPipelineConfigRequest
                     ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        self.check_device(request.device_id)
        kind = request.response_type
        if kind not in GetType.ResponseType.values():
            raise invalid(f"GetForwardingPipelineConfig: unknown response_type {kind}")
        pipe = self.current
        if pipe is None:
            raise P4RTError(FAILED_PRECONDITION, "no forwarding pipeline config set for this device")
        with_p4info = kind in (GetType.ALL, GetType.P4INFO_AND_COOKIE)
        with_device = kind in (GetType.ALL, GetType.DEVICE_CONFIG_AND_COOKIE)
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=pipe.config_message(with_p4info, with_device))

    # -- Write -----------------------------------------------------------------------------------
    def write(self, request: p4runtime_pb2.WriteRequest, updates: Sequence[bytes],
              timeout: float | None = None) -> list[P4RTError | None]:
        """Apply a batch: ``request`` carries everything but the updates, which come serialized
        and are parsed one by one as they are applied (a parsed update takes ~100 times its
        size, intake.py). One entry per update: None (done) or the error. RPC-wide problems raise."""
        self.check_device(request.device_id)
        self.arbiter.check_writer(request.role, election_of(request))
        self._pipeline()
        if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
            raise unimplemented("only CONTINUE_ON_ERROR atomicity is supported")
        results: list[P4RTError | None] = []
        with self._locked(timeout):
            pipe = self._pipeline()
            journal = self._journal               # a RECONCILE_AND_COMMIT is filling its pipeline
            with self._dp_lock():
                for i, raw in enumerate(updates):
                    try:
                        update = Update.FromString(raw)
                        self._apply(pipe, update.type, update.entity)
                        results.append(None)
                        if journal is not None and update.entity.WhichOneof("entity") not in _SHARED_ON_RECONCILE:
                            journal.append((update.type, update.entity))
                    except P4RTError as e:
                        results.append(e.detached())
                    except DecodeError as e:
                        results.append(invalid(f"update {i} is not a valid Update message: {e}"))
                    except Exception as e:  # a bug must not take the server down; report it
                        log.exception("device %d: internal error on update %d (%d bytes)", self.device_id, i, len(raw))
                        results.append(P4RTError(INTERNAL, f"internal error: {type(e).__name__}: {e}"))
        return results

    def _apply(self, pipe: Pipeline, utype: int, entity: p4runtime_pb2.Entity) -> None:
        if utype == Update.UNSPECIFIED:
            raise invalid("update type is not set")
        if utype not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise invalid(f"unknown update type {utype}")
        kind = entity.WhichOneof("entity")
        if kind is None:
            raise invalid("the update's entity is not set")
        writer = _WRITERS.get(kind)
        if writer is not None:
            writer(pipe, utype, getattr(entity, kind))
        elif kind == "packet_replication_engine_entry":
            pre_entries.write_pre(pipe.pre, utype, entity.packet_replication_engine_entry)
        else:
            raise unimplemented(f"{kind} is not supported by softswitch")

    # -- Read ------------------------------------------------------------------------------------
    def read(self, request: p4runtime_pb2.ReadRequest, watch: Watch | None = None) -> ReadPlan:
        """Validate each entity and copy what it names, under the lock (`PLAN_SLICE` entities
        per hold); the plan builds the answers afterwards, without the lock (reads.py)."""
        self.check_device(request.device_id)
        self._pipeline()
        entities = request.entities
        plan = ReadPlan([None] * len(entities), [None] * len(entities))
        scope: ReadScope | None = None
        for start in range(0, len(entities), PLAN_SLICE):
            if watch is not None:
                watch.check()
            with self._locked(watch.remaining() if watch is not None else None):
                pipe = self._pipeline()
                if scope is None:
                    scope = ReadScope(pipe, watch)
                elif pipe is not scope.pipe:
                    raise P4RTError(ABORTED, "the forwarding pipeline changed during the Read: read again")
                for i in range(start, min(start + PLAN_SLICE, len(entities))):
                    try:
                        plan.answers[i] = self._read_one(scope, entities[i])
                    except P4RTError as e:
                        plan.errors[i] = e.detached()
                    except Exception as e:
                        log.exception("device %d: internal error reading entity %d (%s)", self.device_id, i,
                                      entities[i].WhichOneof("entity"))
                        plan.errors[i] = P4RTError(INTERNAL, f"internal error: {type(e).__name__}: {e}")
        return plan

    def _read_one(self, scope: ReadScope, entity: p4runtime_pb2.Entity) -> Iterator[p4runtime_pb2.Entity]:
        kind = entity.WhichOneof("entity")
        if kind is None:
            raise invalid("the entity to read is not set (a wildcard read names the entity type)")
        reader = _READERS.get(kind)
        if reader is None:
            raise unimplemented(f"{kind} is not supported by softswitch")
        return reader(scope, getattr(entity, kind))

    # -- packet I/O ------------------------------------------------------------------------------
    def packet_out(self, conn: Connection, msg: p4runtime_pb2.PacketOut) -> None:
        if not self.arbiter.is_primary(conn):
            raise P4RTError(PERMISSION_DENIED, "only the primary controller can send packet-outs")
        pipe = self.committed
        if pipe is None:
            raise P4RTError(FAILED_PRECONDITION, "no forwarding pipeline config committed")
        frame = packet_out_frame(pipe.map.packet_out, msg)
        dp = self.switch.dataplane
        if dp is None:
            raise P4RTError(FAILED_PRECONDITION, "the data plane is not running")
        try:
            dp.inject_packet_out(frame)
        except ValueError as e:         # refused by the data plane: said on the stream, which goes on
            raise invalid(str(e)) from None

    def on_packet_in(self, frame: bytes) -> None:
        """Called by the data-plane thread for a frame leaving on the CPU port; never blocks."""
        pipe = self.committed
        msg = packet_in_message(pipe.map.packet_in if pipe is not None else None, frame)
        if msg is None:
            self.packet_in_dropped += 1
            return
        response = p4runtime_pb2.StreamMessageResponse(packet=msg)
        primaries = self.arbiter.primaries()
        if not primaries:
            self.packet_in_dropped += 1
        for conn in primaries:
            if not conn.outbox.put(response, droppable=True):
                self.packet_in_dropped += 1


# Entities a RECONCILE_AND_COMMIT hands over as they are (the new pipeline gets the old one's PRE)
_SHARED_ON_RECONCILE = frozenset({"packet_replication_engine_entry"})


def _replay(pipe: Pipeline, updates: Iterable[tuple[int, p4runtime_pb2.Entity]], apply: Callable) -> None:
    for utype, entity in updates:
        try:
            apply(pipe, utype, entity)
        except P4RTError as e:
            kind = entity.WhichOneof("entity")
            raise invalid(f"RECONCILE_AND_COMMIT: the forwarding state cannot be preserved by the new "
                          f"config ({kind}: {e})") from None


def _forwarding_state(pipe: Pipeline) -> Iterator[tuple[int, p4runtime_pb2.Entity]]:
    """What RECONCILE_AND_COMMIT replays, in dependency order (members before groups before
    table entries). Everything is copied when this is called (under the lock, as a Read
    copies); the entities are built as they are iterated (without it)."""
    scope = ReadScope(pipe)
    ins, mod = Update.INSERT, Update.MODIFY
    sources: list[tuple[int, Iterable[p4runtime_pb2.Entity]]] = [
        (ins, entities.read_members(scope, p4runtime_pb2.ActionProfileMember())),
        (ins, entities.read_groups(scope, p4runtime_pb2.ActionProfileGroup())),
    ]
    for tm in pipe.map.tables.values():
        if tm.is_const:
            continue
        sources.append((ins, _table_entities(pipe, tm, table_entries.table_views(scope, tm))))
        t = tm.table
        if (t.default_action, t.default_data) != t.initial_default or tm.id in pipe.default_meta:
            sources.append((mod, table_entries.read_table_entries(
                scope, p4runtime_pb2.TableEntry(table_id=tm.id, is_default_action=True))))
    sources += [
        (mod, (e for e in entities.read_counters(scope, p4runtime_pb2.CounterEntry())
               if e.counter_entry.data.packet_count or e.counter_entry.data.byte_count)),
        (mod, (e for e in entities.read_meters(scope, p4runtime_pb2.MeterEntry()) if e.meter_entry.HasField("config"))),
        (mod, (e for e in entities.read_registers(scope, p4runtime_pb2.RegisterEntry())
               if e.register_entry.data.bitstring != b"\x00")),
        (mod, (e for e in entities.read_value_sets(scope, p4runtime_pb2.ValueSetEntry()) if e.value_set_entry.members)),
        (ins, entities.read_digests(scope, p4runtime_pb2.DigestEntry())),
    ]
    return ((utype, e) for utype, built in sources for e in built)


def _table_entities(pipe: Pipeline, tm: Any, views: list) -> Iterator[p4runtime_pb2.Entity]:
    request = p4runtime_pb2.TableEntry()
    request.counter_data.SetInParent()
    request.meter_config.SetInParent()
    for e in views:
        yield p4runtime_pb2.Entity(table_entry=table_entries.entry_to_proto(pipe, tm, e, request))
