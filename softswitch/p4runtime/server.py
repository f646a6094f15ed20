"""The gRPC P4Runtime service of a softswitch (p4.v1.P4Runtime, API version 1.4.1).

`P4RuntimeServer(switch, "127.0.0.1:9559")` binds the address at construction (OSError naming
the address if it cannot) and serves `P4RuntimeDevice` (device.py) from a bounded thread pool
once started. RPC-wide errors end the call with their status; failed updates of a Write (and failed
entities of a Read of several entities) come back as status UNKNOWN whose
``grpc-status-details-bin`` trailer is a google.rpc.Status with one p4.v1.Error per update,
in order (specification section 12), bounded as status.py explains. A Read of a single entity
that fails ends with that entity's own status, as on simple_switch_grpc. Nothing a client sends
is allowed to raise out of a handler.

Limits (each module says why): requests are bounded before they are parsed (intake.py); a Read
holds the config lock only while copying and stops at its client's deadline (reads.py); at most
`MAX_CONCURRENT_READS` Reads run at once, so a client that starts Reads and never consumes them
cannot take the workers Writes need (one over the limit is refused with RESOURCE_EXHAUSTED);
StreamChannels are admitted as streams.py says. Each StreamChannel uses one pool thread (the
response side) and one reader thread of its own; the pool has a thread for every stream the
policy admits plus `UNARY_WORKERS` for the unary RPCs.
"""
from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Any, Iterator, NoReturn

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from ..addr import check_bindable, parse_host_port
from . import intake
from .arbitration import Connection, EndOfStream
from .device import P4RuntimeDevice
from .errors import P4RTError, CANCELLED, DEADLINE_EXCEEDED, ERROR_SPACE, INTERNAL, OK, RESOURCE_EXHAUSTED, \
    UNAVAILABLE, UNIMPLEMENTED
from .intake import Rejected
from .reads import Stopped, responses
from .status import batch_status, status_message
from .streams import ARBITRATION_TIMEOUT, MAX_JOINED_STREAMS, MAX_PENDING_STREAMS, StreamSlots

log = logging.getLogger("softswitch.p4runtime")

API_VERSION = "1.4.1"
UNARY_WORKERS = 8
MAX_WORKERS = MAX_JOINED_STREAMS + MAX_PENDING_STREAMS + UNARY_WORKERS
MAX_CONCURRENT_READS = UNARY_WORKERS // 2
# A client that vanishes without closing its connection (host down, cable pulled) is noticed
# by pings: unanswered for KEEPALIVE_TIMEOUT_S after KEEPALIVE_S of silence, the connection
# closes and its streams end, freeing their places (gRPC's default waits 2 hours to ping). A
# client that merely runs late must not be taken for gone: on a saturated 2-core machine every
# controller stream broke at once with a 10 s timeout ("ping_timeout" GOAWAYs), so a minute. A
# client that exits closes its connection itself, at once.
KEEPALIVE_S = 20.0
KEEPALIVE_TIMEOUT_S = 60.0
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}
# StreamMessageRequest kind -> the StreamError detail that names it
_STREAM_ERROR_DETAIL = {"packet": "packet_out", "digest_ack": "digest_list_ack", "other": "other"}


def _grpc_code(code: int) -> grpc.StatusCode:
    return _GRPC_CODES.get(code, grpc.StatusCode.UNKNOWN)


def _abort(context: grpc.ServicerContext, err: P4RTError) -> NoReturn:
    context.abort(_grpc_code(err.code), status_message(err.message))
    raise AssertionError("unreachable")      # context.abort raises


def _timeout(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    if remaining is None or remaining > 1e6:      # no deadline (grpc reports "infinite" as huge)
        return None
    return max(0.0, remaining)


class _ClientWatch:
    """A gRPC call as reads.py watches it: its deadline, and whether its client is still there."""

    def __init__(self, context: grpc.ServicerContext):
        self._context = context

    def remaining(self) -> float | None:
        return _timeout(self._context)

    def check(self) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise Stopped(DEADLINE_EXCEEDED, "the deadline passed while the Read was being answered")
        if not self._context.is_active():
            raise Stopped(CANCELLED, "the client cancelled the Read or went away")


def _set_status(context: grpc.ServicerContext, status: status_pb2.Status) -> None:
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.set_code(_grpc_code(status.code))
    context.set_details(status.message)


def _stream_error(code: int, message: str, detail: str) -> p4runtime_pb2.StreamMessageResponse:
    error = p4runtime_pb2.StreamError(canonical_code=code, message=message, space=ERROR_SPACE)
    getattr(error, detail).SetInParent()
    return p4runtime_pb2.StreamMessageResponse(error=error)


class P4RuntimeServicer:
    """The handlers; `handler()` registers them with the request bounds of intake.py."""

    def __init__(self, device: P4RuntimeDevice, slots: StreamSlots | None = None,
                 max_reads: int = MAX_CONCURRENT_READS):
        self.device = device
        self.slots = slots or StreamSlots()
        self._reads = threading.BoundedSemaphore(max_reads)
        self.max_reads = max_reads
        self._live: set[Connection] = set()
        self._live_lock = threading.Lock()
        self._stopping = False

    def handler(self) -> grpc.GenericRpcHandler:
        pb = p4runtime_pb2
        small = intake.MAX_SMALL_REQUEST_BYTES

        def unary(fn, deserialize, response):
            return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=deserialize,
                                                       response_serializer=response.SerializeToString)
        return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", {
            "Write": unary(self.Write, intake.write_request, pb.WriteResponse),
            # Read answers with ReadResponses it serializes itself (reads.responses)
            "Read": grpc.unary_stream_rpc_method_handler(self.Read, request_deserializer=intake.read_request),
            "SetForwardingPipelineConfig": unary(self.SetForwardingPipelineConfig, intake.pipeline_request,
                                                 pb.SetForwardingPipelineConfigResponse),
            "GetForwardingPipelineConfig": unary(self.GetForwardingPipelineConfig,
                                                 intake.bounded(pb.GetForwardingPipelineConfigRequest, small),
                                                 pb.GetForwardingPipelineConfigResponse),
            "StreamChannel": grpc.stream_stream_rpc_method_handler(
                self.StreamChannel, request_deserializer=intake.stream_message,
                response_serializer=pb.StreamMessageResponse.SerializeToString),
            "Capabilities": unary(self.Capabilities, intake.bounded(pb.CapabilitiesRequest, small),
                                  pb.CapabilitiesResponse),
        })

    # -- unary RPCs ------------------------------------------------------------------------------
    def Capabilities(self, request, context):
        _refuse_rejected(context, request)
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        _refuse_rejected(context, request)
        err = self._guard(lambda: self.device.set_pipeline(request, _timeout(context)), "SetForwardingPipelineConfig")
        if err is not None:
            _abort(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        _refuse_rejected(context, request)
        out: list = []
        err = self._guard(lambda: out.append(self.device.get_pipeline(request)), "GetForwardingPipelineConfig")
        if err is not None:
            _abort(context, err)
        return out[0]

    def Write(self, request: intake.WriteIntake | Rejected, context):
        _refuse_rejected(context, request)
        out: list = []
        err = self._guard(lambda: out.append(self.device.write(request.request, request.updates, _timeout(context))),
                          "Write")
        if err is not None:
            _abort(context, err)
        results = out[0]
        if any(e is not None for e in results):
            status = batch_status(results, "update", "updates")
            log.debug("Write: %s", status.message)
            _set_status(context, status)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request: intake.ReadIntake | Rejected, context) -> Iterator[bytes]:
        _refuse_rejected(context, request)
        if not self._reads.acquire(blocking=False):
            _abort(context, P4RTError(RESOURCE_EXHAUSTED, f"{self.max_reads} Reads are in progress (at most "
                                                          f"{self.max_reads} at once): try again"))
        try:
            yield from self._read(request, context)
        finally:
            self._reads.release()

    def _read(self, request: intake.ReadIntake, context) -> Iterator[bytes]:
        out: list = []
        err = self._guard(lambda: out.append(self.device.read(request.request, _ClientWatch(context))), "Read")
        if err is not None:
            _abort(context, err)
        plan = out[0]
        single = len(request.positions) == 1
        if single and plan.errors[0] is not None:
            # One requested entity: its own status, as simple_switch_grpc answers (the batch
            # form below, UNKNOWN with per-entity details, is for several entities).
            _abort(context, plan.errors[0])
        try:
            yield from responses(plan.entities())
        except Stopped as e:
            log.info("Read stopped: %s", e)
            _abort(context, e)
        errors = [plan.errors[i] for i in request.positions]
        if single and errors[0] is not None:
            _abort(context, errors[0])
        if any(e is not None for e in errors):
            _set_status(context, batch_status(errors, "entity", "entities"))

    @staticmethod
    def _guard(fn, what: str) -> P4RTError | None:
        try:
            fn()
            return None
        except P4RTError as e:
            log.debug("%s: %s", what, e)
            return e
        except Exception as e:  # never let a request crash the server
            log.exception("%s: internal error", what)
            return P4RTError(INTERNAL, f"internal error: {type(e).__name__}: {e}")

    # -- StreamChannel ---------------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        if self._stopping:
            _abort(context, P4RTError(UNAVAILABLE, "the switch is shutting down"))
        conn = Connection()
        with self._live_lock:
            self._live.add(conn)
        self.slots.admit(conn)
        try:
            # The client gone (cancel, disconnect, deadline): its places are freed by gRPC's
            # callback at once, not when this generator next runs (gRPC may never resume it).
            if not context.add_callback(lambda: self._release(conn)):
                return                            # it ended before it started
            threading.Thread(target=self._read_stream, args=(request_iterator, conn), daemon=True,
                             name=f"p4rt-stream-{conn.id}").start()
            while True:
                item = conn.outbox.get()
                if isinstance(item, EndOfStream):
                    if item.code != OK:
                        context.abort(_grpc_code(item.code), status_message(item.message))
                    return
                yield item
        finally:
            self._release(conn)

    def _release(self, conn: Connection) -> None:
        """The stream of ``conn`` has ended: free its places (idempotent, never blocks)."""
        self.slots.leave(conn)
        self.device.arbiter.leave(conn)
        with self._live_lock:
            self._live.discard(conn)
        conn.outbox.put(EndOfStream())            # wakes the response side if it still waits

    def _read_stream(self, request_iterator: Any, conn: Connection) -> None:
        end = EndOfStream()
        try:
            for request in request_iterator:
                if isinstance(request, Rejected):
                    detail = _STREAM_ERROR_DETAIL.get(request.kind or "")
                    if detail is None:            # an arbitration update or garbage: the stream ends
                        end = EndOfStream(request.error.code, request.error.message)
                        return
                    conn.outbox.put(_stream_error(request.error.code, request.error.message, detail), droppable=True)
                    continue
                kind = request.WhichOneof("update")
                if kind == "arbitration":
                    if not self.slots.arbitrating(conn):
                        return                    # closed for waiting too long: its end is queued
                    try:
                        self.device.arbiter.update(conn, request.arbitration)
                    except P4RTError as e:
                        end = EndOfStream(e.code, e.message)
                        return
                elif kind == "packet":
                    try:
                        self.device.packet_out(conn, request.packet)
                    except P4RTError as e:
                        conn.outbox.put(_stream_error(e.code, e.message, "packet_out"), droppable=True)
                elif kind == "other":
                    conn.outbox.put(_stream_error(UNIMPLEMENTED, "StreamMessageRequest.other is not supported",
                                                  "other"), droppable=True)
                # digest acks and empty messages: nothing to do (no digests)
        except grpc.RpcError:
            pass                                  # the client went away
        except Exception:
            log.exception("StreamChannel %d: internal error", conn.id)
            end = EndOfStream(INTERNAL, "internal error in the StreamChannel")
        finally:
            conn.outbox.put(end)

    def shutdown(self, message: str) -> None:
        self._stopping = True
        with self._live_lock:
            for conn in self._live:
                conn.outbox.put(EndOfStream(UNAVAILABLE, message))


def _refuse_rejected(context: grpc.ServicerContext, request: Any) -> None:
    """End the RPC with the status of a request intake.py refused before parsing it."""
    if isinstance(request, Rejected):
        log.debug("request refused: %s", request.error)
        _abort(context, request.error)


class P4RuntimeServer:
    """The P4Runtime gRPC server of one `Switch`; the address is bound at construction."""

    def __init__(self, switch: Any, addr: str):
        self.switch = switch
        self.addr = addr
        self.device = P4RuntimeDevice(switch)
        timeout = switch.config.arbitration_timeout or ARBITRATION_TIMEOUT
        self._servicer = P4RuntimeServicer(self.device, StreamSlots(timeout=timeout))
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix=f"p4rt-{switch.device_id}"),
            options=[("grpc.so_reuseport", 0),
                     ("grpc.max_receive_message_length", intake.MAX_REQUEST_BYTES),
                     ("grpc.keepalive_time_ms", int(KEEPALIVE_S * 1000)),
                     ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
                     # any ping in flight (gRPC's own bandwidth probes too) stands for the
                     # keepalive: its answer is awaited as long (gRPC's default: 60 s)
                     ("grpc.http2.ping_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
                     ("grpc.http2.max_pings_without_data", 0)])     # an idle backup is pinged too
        self._server.add_generic_rpc_handlers((self._servicer.handler(),))
        try:
            check_bindable(*parse_host_port(addr, allow_port_zero=True))
        except (OSError, ValueError) as e:
            self._server.stop(None)
            raise OSError(f"cannot serve P4Runtime on {addr}: {e}") from None
        try:
            port = self._server.add_insecure_port(addr)
        except RuntimeError as e:
            self._server.stop(None)
            raise OSError(f"cannot serve P4Runtime on {addr}: {e}") from None
        if not port:
            self._server.stop(None)
            raise OSError(f"cannot serve P4Runtime on {addr}: address in use or not available")
        self.port = port
        self._started = False

    def start(self) -> None:
        dp = self.switch.dataplane
        if dp is not None:
            dp.on_packet_in = self.device.on_packet_in
        self._server.start()
        self._started = True
        log.info("P4Runtime server for device %d listening on %s", self.device.device_id, self.addr)

    def stop(self, grace: float = 1.0) -> None:
        dp = self.switch.dataplane
        if dp is not None and dp.on_packet_in == self.device.on_packet_in:
            dp.on_packet_in = None
        self._servicer.shutdown("the switch is shutting down")
        self._server.stop(grace).wait(grace + 4)
        self._started = False


__all__ = ["P4RuntimeServer", "P4RuntimeServicer", "API_VERSION"]
