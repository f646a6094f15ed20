"""A P4Runtime client for one switch.

`SwitchConnection` owns one gRPC channel and one StreamChannel to one device; it holds no global
state, so a process can keep many of them (the fabric controller keeps one per switch, each used
from its own worker thread). Life cycle::

    conn = SwitchConnection("p0e0", "127.0.0.1:50001", device_id=1, election_id=(0, 1))
    conn.connect(timeout=10)            # channel up, arbitration sent, primary (or NotPrimaryError)
    conn.set_pipeline(p4info, json)     # SetForwardingPipelineConfig VERIFY_AND_COMMIT
    conn.write([...updates...])         # batched; WriteError names the rejected entities
    for entity in conn.read([...]): ... # streaming Read
    conn.packet_out(msg); conn.packet_in(timeout=1)
    conn.close()

Every unary RPC and every Read carries a deadline (``rpc_timeout``; a pipeline push
``pipeline_timeout``, at least as long). When the stream breaks (the
target stopped or restarted) ``broken`` says why and ``on_stream_broken`` is called; the
connection is then unusable and the owner makes a new one (see `controller.fabric_controller`).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, Iterable, Iterator, Sequence

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.errors import (
    NotPrimaryError,
    PipelineError,
    ReadError,
    SwitchConnectionError,
    WriteError,
    code_name,
    parse_write_failures,
    rpc_error_text,
    status_details,
    switch_label,
)
from controller.p4info import P4Info

log = logging.getLogger(__name__)

DEFAULT_RPC_TIMEOUT = 10.0
# A pipeline push may wait for the target to build the program: softswitch builds the native
# data path of p4src/fabric.p4 (5 copies of a 64-value block's aggregation) in 10-11 s of one
# core, once per program text, before it answers.
DEFAULT_PIPELINE_TIMEOUT = 60.0
DEFAULT_BATCH_SIZE = 500
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # a failed batch carries one error per update in its trailing metadata: room for 500+
    ("grpc.max_metadata_size", 4 * 1024 * 1024),
]
_ENTITY_TYPES = {
    "insert": p4runtime_pb2.Update.INSERT,
    "modify": p4runtime_pb2.Update.MODIFY,
    "delete": p4runtime_pb2.Update.DELETE,
}


def election_id_tuple(value: int | tuple[int, int]) -> tuple[int, int]:
    return (0, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


PacketHandler = Callable[[p4runtime_pb2.PacketIn], bool]


class SwitchConnection:
    """P4Runtime session with one device: primary arbitration, pipeline, writes, reads, packet I/O."""

    def __init__(
        self,
        name: str,
        address: str,
        device_id: int,
        *,
        election_id: int | tuple[int, int] = (0, 1),
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
        pipeline_timeout: float = DEFAULT_PIPELINE_TIMEOUT,
        p4info: P4Info | None = None,
        on_stream_broken: Callable[["SwitchConnection", str], None] | None = None,
        packet_handlers: list[PacketHandler] | None = None,
    ) -> None:
        self.name = name
        self.address = address
        self.device_id = device_id
        self.election_id = election_id_tuple(election_id)
        self.rpc_timeout = rpc_timeout
        self.pipeline_timeout = max(pipeline_timeout, rpc_timeout)
        self.p4info = p4info
        self.on_stream_broken = on_stream_broken
        # Called on the stream's reader thread for every packet-in, in order; the first that
        # returns True takes the packet (it never reaches ``packets_in``). The list may be
        # shared and changed while the stream runs (failure handling's heartbeats use this).
        self.packet_handlers: list[PacketHandler] = packet_handlers if packet_handlers is not None else []
        self.packets_in: "queue.Queue[p4runtime_pb2.PacketIn]" = queue.Queue(maxsize=10000)
        self.stream_errors: "queue.Queue[p4runtime_pb2.StreamError]" = queue.Queue(maxsize=1000)
        self.digests: "queue.Queue[p4runtime_pb2.DigestList]" = queue.Queue(maxsize=1000)
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: "queue.Queue[p4runtime_pb2.StreamMessageRequest | None]" = queue.Queue()
        self._stream: grpc.Future | None = None
        self._reader: threading.Thread | None = None
        self._arbitration = threading.Condition()
        self._arbitration_status: tuple[int, str] | None = None  # (code, message) of the last update
        self._closing = False
        self._broken: str | None = None
        self._ready: grpc.Future | None = None      # the channel's readiness while connecting

    # --- identity --------------------------------------------------------------------------

    @property
    def label(self) -> str:
        return switch_label(self.name, self.device_id, self.address)

    def __repr__(self) -> str:
        return f"<SwitchConnection {self.label} primary={self.is_primary}>"

    # --- session ---------------------------------------------------------------------------

    def connect(self, timeout: float = 10.0) -> None:
        """Open the channel and the stream, send the arbitration update and wait to be primary.

        Raises SwitchConnectionError when no server answers within ``timeout`` seconds or the
        stream fails, NotPrimaryError when another client is primary."""
        self._open_channel(timeout)
        self._requests = queue.Queue()
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read_stream, name=f"p4rt-stream-{self.name}", daemon=True)
        self._reader.start()
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.high, request.arbitration.election_id.low = self.election_id
        with self._arbitration:
            self._arbitration_status = None
            self._requests.put(request)
            done = self._arbitration.wait_for(
                lambda: self._arbitration_status is not None or self._broken is not None or self._closing,
                timeout=timeout,
            )
        if self._closing:
            self.close()
            raise SwitchConnectionError(self.name, self.device_id, "closed while connecting", self.address)
        if self._broken is not None:
            reason = self._broken
            self.close()
            raise SwitchConnectionError(self.name, self.device_id, f"stream failed during arbitration: {reason}", self.address)
        if not done:
            self.close()
            raise SwitchConnectionError(
                self.name, self.device_id, f"no arbitration answer within {timeout:g} s", self.address
            )
        if not self.is_primary:
            code, message = self._arbitration_status or (0, "")
            self.close()
            raise NotPrimaryError(
                self.name,
                self.device_id,
                f"not primary with election id {self.election_id}: {code_name(code)} {message}".rstrip(),
                self.address,
            )
        log.info("%s: connected, primary with election id %s", self.label, self.election_id)

    def _open_channel(self, timeout: float) -> None:
        if self._channel is not None:
            raise SwitchConnectionError(self.name, self.device_id, "already connected", self.address)
        self._closing = False
        self._broken = None
        self._channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._ready = grpc.channel_ready_future(self._channel)
        if self._closing:              # closed from another thread before the future existed
            self._ready.cancel()
        try:
            self._ready.result(timeout=timeout)
        except (grpc.FutureTimeoutError, grpc.FutureCancelledError) as err:
            self.close()
            why = ("closed while connecting" if isinstance(err, grpc.FutureCancelledError)
                   else f"no P4Runtime server answered within {timeout:g} s")
            raise SwitchConnectionError(self.name, self.device_id, why, self.address) from None
        finally:
            self._ready = None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)

    def connect_for_reads(self, timeout: float = 10.0) -> None:
        """Open the channel only: no stream, no arbitration. P4Runtime serves Reads (and
        GetForwardingPipelineConfig) to any client, so an observer (a test reading counters)
        need not disturb who is primary; writes from such a connection are refused."""
        self._open_channel(timeout)

    @property
    def connected(self) -> bool:
        return self._channel is not None and self._broken is None and not self._closing

    @property
    def is_primary(self) -> bool:
        status = self._arbitration_status
        return status is not None and status[0] == 0 and self._broken is None

    @property
    def broken(self) -> str | None:
        """Why the stream ended, or None while it is up."""
        return self._broken

    def close(self) -> None:
        """End the stream and the channel (idempotent); from another thread, a `connect` under
        way ends at once with SwitchConnectionError."""
        self._closing = True
        ready = self._ready
        if ready is not None:
            ready.cancel()
        with self._arbitration:
            self._arbitration.notify_all()
        if self._stream is not None:
            self._requests.put(None)
            self._stream.cancel()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=5)
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._stub = None
        self._stream = None
        self._reader = None

    def __enter__(self) -> "SwitchConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_stream(self) -> None:
        stream = self._stream
        assert stream is not None
        try:
            for msg in stream:  # type: ignore[attr-defined]
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    with self._arbitration:
                        self._arbitration_status = (msg.arbitration.status.code, msg.arbitration.status.message)
                        self._arbitration.notify_all()
                elif kind == "packet":
                    if not self._handled(msg.packet):
                        _put_latest(self.packets_in, msg.packet)
                elif kind == "digest":
                    _put_latest(self.digests, msg.digest)
                elif kind == "error":
                    log.warning("%s: stream error: %s", self.label, text_format.MessageToString(msg.error, as_one_line=True))
                    _put_latest(self.stream_errors, msg.error)
            reason = "the server closed the stream"
        except grpc.RpcError as err:
            reason = rpc_error_text(err)
        except Exception as err:  # noqa: BLE001 - reported, never swallowed silently
            reason = f"{type(err).__name__}: {err}"
        if self._closing:
            return
        with self._arbitration:
            self._broken = reason
            self._arbitration.notify_all()
        log.warning("%s: stream broken: %s", self.label, reason)
        if self.on_stream_broken is not None:
            try:
                self.on_stream_broken(self, reason)
            except Exception:  # noqa: BLE001
                log.exception("%s: on_stream_broken callback failed", self.label)

    def _handled(self, packet: p4runtime_pb2.PacketIn) -> bool:
        for handler in list(self.packet_handlers):
            try:
                if handler(packet):
                    return True
            except Exception:  # noqa: BLE001 - a faulty handler must not end the stream
                log.exception("%s: packet-in handler failed", self.label)
        return False

    def _require_stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None or self._broken is not None:
            why = f"stream broken: {self._broken}" if self._broken else "not connected"
            raise SwitchConnectionError(self.name, self.device_id, why, self.address)
        return self._stub

    def _closed(self, err: ValueError) -> Exception:
        """What an RPC's ValueError means: a channel another thread closed meanwhile (teardown)
        is a lost connection; anything else is not ours to rename."""
        if "Channel closed" not in str(err):
            return err
        return SwitchConnectionError(self.name, self.device_id, f"connection closed: {err}", self.address)

    def _election(self, msg: object) -> None:
        msg.election_id.high, msg.election_id.low = self.election_id  # type: ignore[attr-defined]

    # --- pipeline --------------------------------------------------------------------------

    def set_pipeline(self, p4info: P4Info | p4info_pb2.P4Info, device_config: bytes, cookie: int = 0) -> None:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) with ``device_config`` (BMv2 JSON)."""
        stub = self._require_stub()
        info = p4info.message if isinstance(p4info, P4Info) else p4info
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        self._election(request)
        request.config.p4info.CopyFrom(info)
        request.config.p4_device_config = device_config
        request.config.cookie.cookie = cookie
        try:
            stub.SetForwardingPipelineConfig(request, timeout=self.pipeline_timeout)
        except ValueError as err:
            raise self._closed(err) from None
        except grpc.RpcError as err:
            raise PipelineError(
                self.name, self.device_id, f"SetForwardingPipelineConfig failed: {rpc_error_text(err)}", self.address
            ) from None
        if isinstance(p4info, P4Info):
            self.p4info = p4info
        elif self.p4info is None:
            self.p4info = P4Info(info)

    def pipeline_cookie(self) -> int | None:
        """The cookie of the device's pipeline, or None when it has none (no pipeline set)."""
        stub = self._require_stub()
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY,
        )
        try:
            response = stub.GetForwardingPipelineConfig(request, timeout=self.rpc_timeout)
        except ValueError as err:
            raise self._closed(err) from None
        except grpc.RpcError as err:
            if err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return None  # no pipeline
            raise PipelineError(
                self.name, self.device_id, f"GetForwardingPipelineConfig failed: {rpc_error_text(err)}", self.address
            ) from None
        if not response.config.HasField("cookie"):
            return None
        return response.config.cookie.cookie

    # --- write -----------------------------------------------------------------------------

    def write(self, updates: Sequence[p4runtime_pb2.Update], batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        """Apply ``updates`` in batches of ``batch_size`` (CONTINUE_ON_ERROR within a batch).

        Stops at the first batch with rejected updates and raises WriteError listing them (with
        their index in ``updates``); earlier batches stay applied."""
        stub = self._require_stub()
        for start in range(0, len(updates), batch_size):
            batch = list(updates[start : start + batch_size])
            request = p4runtime_pb2.WriteRequest(
                device_id=self.device_id, atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR
            )
            self._election(request)
            request.updates.extend(batch)
            try:
                stub.Write(request, timeout=self.rpc_timeout)
            except ValueError as err:
                raise self._closed(err) from None
            except grpc.RpcError as err:
                if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                    raise SwitchConnectionError(
                        self.name,
                        self.device_id,
                        f"Write of updates {start}..{start + len(batch) - 1} failed: {rpc_error_text(err)}",
                        self.address,
                    ) from None
                failures = parse_write_failures(err, batch, self.describe, offset=start)
                raise WriteError(
                    self.name, self.device_id, len(updates), failures, rpc_error_text(err), self.address
                ) from None

    def _updates(self, kind: str, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Update]:
        return [p4runtime_pb2.Update(type=_ENTITY_TYPES[kind], entity=e) for e in entities]

    def insert(self, entities: Iterable[p4runtime_pb2.Entity]) -> None:
        self.write(self._updates("insert", entities))

    def modify(self, entities: Iterable[p4runtime_pb2.Entity]) -> None:
        self.write(self._updates("modify", entities))

    def delete(self, entities: Iterable[p4runtime_pb2.Entity]) -> None:
        self.write(self._updates("delete", entities))

    def describe(self, entity: p4runtime_pb2.Entity) -> str:
        if self.p4info is not None:
            return self.p4info.describe_entity(entity)
        return text_format.MessageToString(entity, as_one_line=True)

    # --- read ------------------------------------------------------------------------------

    def read(self, entities: Sequence[p4runtime_pb2.Entity]) -> Iterator[p4runtime_pb2.Entity]:
        """Stream the entities matching the given (wildcard) entities."""
        stub = self._require_stub()
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        request.entities.extend(entities)
        try:
            for response in stub.Read(request, timeout=self.rpc_timeout):
                yield from response.entities
        except ValueError as err:
            raise self._closed(err) from None
        except grpc.RpcError as err:
            what = ", ".join(self.describe(e) for e in entities[:3])
            message = f"Read of {what} failed: {rpc_error_text(err)}"
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise SwitchConnectionError(self.name, self.device_id, message, self.address) from None
            raise ReadError(self.name, self.device_id, message, self.address, code=read_error_code(err)) from None

    def read_table(self, table_id: int = 0) -> list[p4runtime_pb2.TableEntry]:
        """All entries of one table (``0``: of every table)."""
        wildcard = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=table_id))
        return [e.table_entry for e in self.read([wildcard])]

    def read_counter(self, counter_id: int, index: int | None = None) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of an indirect counter (all cells when ``index`` is None)."""
        if index is not None:
            return self.read_counter_cells(counter_id, [index])
        return self._counter_cells([p4runtime_pb2.CounterEntry(counter_id=counter_id)])

    def read_counter_cells(self, counter_id: int, indices: Iterable[int]) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of the given cells of an indirect counter, in one Read."""
        entries = []
        for index in indices:
            entry = p4runtime_pb2.CounterEntry(counter_id=counter_id)
            entry.index.index = index
            entries.append(entry)
        return self._counter_cells(entries) if entries else {}

    def _counter_cells(self, entries: list[p4runtime_pb2.CounterEntry]) -> dict[int, tuple[int, int]]:
        result = {}
        for e in self.read([p4runtime_pb2.Entity(counter_entry=entry) for entry in entries]):
            c = e.counter_entry
            result[c.index.index] = (c.data.packet_count, c.data.byte_count)
        return result

    # --- packet I/O ------------------------------------------------------------------------

    def packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        self._require_stub()
        self._requests.put(p4runtime_pb2.StreamMessageRequest(packet=packet))

    @property
    def pending_out(self) -> int:
        """Stream messages (packet-outs) queued here that the stream has not taken yet: they
        pile up while this process is too busy to send them."""
        return self._requests.qsize()

    def packet_in(self, timeout: float | None = None) -> p4runtime_pb2.PacketIn | None:
        """The next packet-in, or None after ``timeout`` seconds."""
        try:
            return self.packets_in.get(timeout=timeout)
        except queue.Empty:
            return None


def read_error_code(err: grpc.RpcError) -> str:
    """The status name of a failed Read; when the target reports per-entity p4.v1.Errors that
    all agree (softswitch wraps them in UNKNOWN, as for Write), their common code."""
    status = status_details(err)
    codes = set()
    for detail in status.details if status is not None else ():
        error = p4runtime_pb2.Error()
        if detail.Unpack(error) and error.canonical_code != 0:
            codes.add(code_name(error.canonical_code))
    if len(codes) == 1:
        return codes.pop()
    return err.code().name if err.code() is not None else "UNKNOWN"


def _put_latest(q: "queue.Queue", item: object) -> None:
    """Enqueue, dropping the oldest item when the queue is full (never blocks the stream)."""
    while True:
        try:
            q.put_nowait(item)
            return
        except queue.Full:
            try:
                q.get_nowait()
            except queue.Empty:
                pass
