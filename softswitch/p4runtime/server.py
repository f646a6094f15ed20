"""The gRPC P4Runtime service of a softswitch (p4.v1.P4Runtime, API version 1.4.1).

`P4RuntimeServer(switch, "127.0.0.1:9559")` binds the address at construction (OSError naming
the address if it cannot) and serves `P4RuntimeDevice` (device.py) from a bounded thread pool
once started. RPC-wide errors end the call with their status; failed updates of a Write (and failed
entities of a Read of several entities) come back as status UNKNOWN whose
``grpc-status-details-bin`` trailer is a google.rpc.Status with one p4.v1.Error per update,
in order (specification section 12). A Read of a single entity that fails ends with that
entity's own status, as on simple_switch_grpc. Nothing a client sends is allowed to raise out
of a handler.

Each StreamChannel uses one pool thread (the response side) and one reader thread of its own;
at most `MAX_STREAMS` are open at once so unary RPCs always find a free worker.
"""
from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Any, Iterator, NoReturn

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from .arbitration import Connection, EndOfStream
from .device import P4RuntimeDevice
from .errors import P4RTError, ERROR_SPACE, INTERNAL, OK, RESOURCE_EXHAUSTED, UNAVAILABLE, UNIMPLEMENTED, \
    UNKNOWN

log = logging.getLogger("softswitch.p4runtime")

API_VERSION = "1.4.1"
MAX_WORKERS = 16
MAX_STREAMS = 8
MAX_MESSAGE_BYTES = 256 * 1024 * 1024       # as PI: large JSON configs and batches fit
READ_CHUNK = 1000                           # entities per ReadResponse
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _grpc_code(code: int) -> grpc.StatusCode:
    return _GRPC_CODES.get(code, grpc.StatusCode.UNKNOWN)


def _abort(context: grpc.ServicerContext, err: P4RTError) -> NoReturn:
    context.abort(_grpc_code(err.code), err.message)
    raise AssertionError("unreachable")      # context.abort raises


def _timeout(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    if remaining is None or remaining > 1e6:      # no deadline (grpc reports "infinite" as huge)
        return None
    return max(0.0, remaining)


def _batch_status(errors: list[P4RTError | None], what: str, plural: str) -> status_pb2.Status:
    """UNKNOWN with one p4.v1.Error per element of the batch (OK for the ones that worked)."""
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    first = "; ".join(f"{what} {i}: {e.code_name}: {e.message}" for i, e in failed[:3])
    more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
    status = status_pb2.Status(code=UNKNOWN, message=f"{len(failed)} of {len(errors)} {plural} failed: {first}{more}")
    for e in errors:
        err = (p4runtime_pb2.Error(canonical_code=OK) if e is None else
               p4runtime_pb2.Error(canonical_code=e.code, message=e.message, space=ERROR_SPACE))
        status.details.add().Pack(err)
    return status


def _set_status(context: grpc.ServicerContext, status: status_pb2.Status) -> None:
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.set_code(_grpc_code(status.code))
    context.set_details(status.message)


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device: P4RuntimeDevice, max_streams: int = MAX_STREAMS):
        self.device = device
        self.max_streams = max_streams
        self._streams = threading.BoundedSemaphore(max_streams)
        self._live: set[Connection] = set()
        self._live_lock = threading.Lock()
        self._stopping = False

    # -- unary RPCs ------------------------------------------------------------------------------
    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        err = self._guard(lambda: self.device.set_pipeline(request, _timeout(context)), "SetForwardingPipelineConfig")
        if err is not None:
            _abort(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        out: list = []
        err = self._guard(lambda: out.append(self.device.get_pipeline(request)), "GetForwardingPipelineConfig")
        if err is not None:
            _abort(context, err)
        return out[0]

    def Write(self, request, context):
        out: list = []
        err = self._guard(lambda: out.append(self.device.write(request, _timeout(context))), "Write")
        if err is not None:
            _abort(context, err)
        results = out[0]
        if any(e is not None for e in results):
            status = _batch_status(results, "update", "updates")
            log.debug("Write: %s", status.message)
            _set_status(context, status)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context) -> Iterator[p4runtime_pb2.ReadResponse]:
        out: list = []
        err = self._guard(lambda: out.append(self.device.read(request, _timeout(context))), "Read")
        if err is not None:
            _abort(context, err)
        found, errors = out[0]
        if len(errors) == 1 and errors[0] is not None:
            # One requested entity: its own status, as simple_switch_grpc answers (the batch
            # form below, UNKNOWN with per-entity details, is for several entities).
            _abort(context, errors[0])
        for start in range(0, max(len(found), 1), READ_CHUNK):
            if not context.is_active():
                return
            yield p4runtime_pb2.ReadResponse(entities=found[start:start + READ_CHUNK])
        if any(e is not None for e in errors):
            _set_status(context, _batch_status(errors, "entity", "entities"))

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
        if self._stopping or not self._streams.acquire(blocking=False):
            _abort(context, P4RTError(RESOURCE_EXHAUSTED, f"too many open StreamChannels (at most {self.max_streams})"))
        conn = Connection()
        try:
            with self._live_lock:
                self._live.add(conn)
            context.add_callback(lambda: conn.outbox.put(EndOfStream()))
            threading.Thread(target=self._read_stream, args=(request_iterator, conn), daemon=True,
                             name=f"p4rt-stream-{conn.id}").start()
            while True:
                item = conn.outbox.get()
                if isinstance(item, EndOfStream):
                    if item.code != OK:
                        context.abort(_grpc_code(item.code), item.message)
                    return
                yield item
        finally:
            self.device.arbiter.leave(conn)
            with self._live_lock:
                self._live.discard(conn)
            self._streams.release()

    def _read_stream(self, request_iterator: Any, conn: Connection) -> None:
        end = EndOfStream()
        try:
            for request in request_iterator:
                kind = request.WhichOneof("update")
                if kind == "arbitration":
                    try:
                        self.device.arbiter.update(conn, request.arbitration)
                    except P4RTError as e:
                        end = EndOfStream(e.code, e.message)
                        return
                elif kind == "packet":
                    try:
                        self.device.packet_out(conn, request.packet)
                    except P4RTError as e:
                        error = p4runtime_pb2.StreamError(canonical_code=e.code, message=e.message, space=ERROR_SPACE)
                        error.packet_out.SetInParent()
                        conn.outbox.put(p4runtime_pb2.StreamMessageResponse(error=error), droppable=True)
                elif kind == "other":
                    error = p4runtime_pb2.StreamError(canonical_code=UNIMPLEMENTED, space=ERROR_SPACE,
                                                      message="StreamMessageRequest.other is not supported")
                    error.other.SetInParent()
                    conn.outbox.put(p4runtime_pb2.StreamMessageResponse(error=error), droppable=True)
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


class P4RuntimeServer:
    """The P4Runtime gRPC server of one `Switch`; the address is bound at construction."""

    def __init__(self, switch: Any, addr: str, max_workers: int = MAX_WORKERS, max_streams: int = MAX_STREAMS):
        if max_streams >= max_workers:
            raise ValueError("max_streams must leave workers for unary RPCs")
        self.switch = switch
        self.addr = addr
        self.device = P4RuntimeDevice(switch)
        self._servicer = P4RuntimeServicer(self.device, max_streams)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"p4rt-{switch.device_id}"),
            options=[("grpc.so_reuseport", 0),
                     ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self._servicer, self._server)
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
