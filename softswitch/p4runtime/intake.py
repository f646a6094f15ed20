"""Requests as they arrive: bounded before they are parsed.

gRPC itself refuses any message over `MAX_REQUEST_BYTES` (``grpc.max_receive_message_length``)
with RESOURCE_EXHAUSTED. Within that, each RPC has bounds of its own, checked here on the raw
bytes before they are parsed, because parsing is what costs: softswitch runs the pure-Python
protobuf of the 3.20 line (the one p4runtime-shell pins), where a parsed message takes about 150
times its size on the wire, and up to 300 times for messages made of empty sub-messages (a 4 MiB
WriteRequest parsed at once would take 1 to 4 GB). The bounds, and why each is enough:

    MAX_REQUEST_BYTES         16 MiB  SetForwardingPipelineConfig: the fabric's BMv2 JSON is
                                      3 MB, programs five times larger fit
    MAX_P4INFO_BYTES           1 MiB  the P4Info inside it (the fabric's is 6 KB)
    MAX_WRITE_BYTES            4 MiB  gRPC's default limit: ~60,000 table entries per batch
    MAX_WRITE_UPDATES        100,000  updates per WriteRequest
    MAX_READ_BYTES           256 KiB  a ReadRequest (10,000 entries named one by one fit)
    MAX_READ_ENTITIES         10,000  distinct entities in one ReadRequest
    MAX_STREAM_MESSAGE_BYTES 128 KiB  a StreamChannel message: a 64 KiB frame and its metadata
    MAX_SMALL_REQUEST_BYTES   64 KiB  Capabilities, GetForwardingPipelineConfig

A Write's updates stay serialized until the device applies them, one at a time (`WriteIntake`),
so a batch costs its size on the wire plus one parsed update, not a hundred times its size.

A request over its bound, or one that is not a valid message, becomes a `Rejected` that the
handler answers with its status (RESOURCE_EXHAUSTED / INVALID_ARGUMENT); a StreamChannel message
over its bound is answered with a StreamError and the stream goes on.

A Read repeating an entity does the work once: entities are compared as they came on the wire
and each distinct one is parsed and read once (`ReadIntake.positions` maps every requested
entity to it, so per-entity errors still come back one per requested entity).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from google.protobuf.message import DecodeError, Message
from p4.v1 import p4runtime_pb2

from . import wire
from .errors import P4RTError, INVALID_ARGUMENT, RESOURCE_EXHAUSTED

MiB = 1 << 20
MAX_REQUEST_BYTES = 16 * MiB
MAX_P4INFO_BYTES = 1 * MiB
MAX_WRITE_BYTES = 4 * MiB
MAX_WRITE_UPDATES = 100_000
MAX_READ_BYTES = 256 * 1024
MAX_READ_ENTITIES = 10_000
MAX_STREAM_MESSAGE_BYTES = 128 * 1024
MAX_SMALL_REQUEST_BYTES = 64 * 1024

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Rejected:
    """A request refused before parsing; ``kind`` names the StreamMessageRequest field it
    started with (streams answer a rejected packet-out without ending)."""

    error: P4RTError
    kind: str | None = None


@dataclass
class WriteIntake:
    request: p4runtime_pb2.WriteRequest    # everything but the updates
    updates: list[bytes]                   # each update as it came, parsed when it is applied


@dataclass
class ReadIntake:
    request: p4runtime_pb2.ReadRequest     # each distinct entity once
    positions: list[int]                   # per requested entity: its index in request.entities


def _size_error(what: str, size: int, limit: int) -> P4RTError:
    return P4RTError(RESOURCE_EXHAUSTED, f"{what} of {size} bytes exceeds softswitch's limit of {limit} bytes")


def _parse(cls: type[M], data: bytes) -> M | Rejected:
    try:
        return cls.FromString(data)
    except (DecodeError, ValueError, RecursionError) as e:
        return Rejected(P4RTError(INVALID_ARGUMENT, f"the {cls.DESCRIPTOR.name} is not a valid message: {e}"))


def bounded(cls: type[M], limit: int) -> Callable[[bytes], M | Rejected]:
    """A request deserializer that refuses messages over ``limit`` bytes unparsed."""
    def deserialize(data: bytes) -> M | Rejected:
        if len(data) > limit:
            return Rejected(_size_error(f"a {cls.DESCRIPTOR.name}", len(data), limit))
        return _parse(cls, data)
    return deserialize


def _field_number(cls: type[Message], name: str) -> int:
    return cls.DESCRIPTOR.fields_by_name[name].number


_CONFIG = _field_number(p4runtime_pb2.SetForwardingPipelineConfigRequest, "config")
_P4INFO = _field_number(p4runtime_pb2.ForwardingPipelineConfig, "p4info")
_ENTITIES = _field_number(p4runtime_pb2.ReadRequest, "entities")
_UPDATES = _field_number(p4runtime_pb2.WriteRequest, "updates")
_STREAM_KINDS = {f.number: f.name for f in p4runtime_pb2.StreamMessageRequest.DESCRIPTOR.oneofs_by_name["update"].fields}


def pipeline_request(data: bytes) -> p4runtime_pb2.SetForwardingPipelineConfigRequest | Rejected:
    """A SetForwardingPipelineConfigRequest whose P4Info is within `MAX_P4INFO_BYTES`."""
    try:
        for f in wire.fields(data):
            if f.number == _CONFIG and f.wire_type == wire.LEN:
                config = data[f.value:f.end]
                for g in wire.fields(config):
                    if g.number == _P4INFO and g.wire_type == wire.LEN and g.end - g.value > MAX_P4INFO_BYTES:
                        return Rejected(_size_error("the P4Info", g.end - g.value, MAX_P4INFO_BYTES))
    except ValueError as e:
        return Rejected(P4RTError(INVALID_ARGUMENT, f"the SetForwardingPipelineConfigRequest is not a valid message: {e}"))
    return _parse(p4runtime_pb2.SetForwardingPipelineConfigRequest, data)


def _split(cls: type[M], data: bytes, number: int, limit: int | None = None, what: str = ""
           ) -> tuple[M, list[bytes]] | Rejected:
    """``data`` as a ``cls`` without its repeated field ``number``, and that field's elements
    unparsed (at most ``limit`` of them, when given)."""
    elements: list[bytes] = []
    rest = bytearray()
    try:
        for f in wire.fields(data):
            if f.number == number and f.wire_type == wire.LEN:
                if len(elements) == limit:
                    return Rejected(P4RTError(RESOURCE_EXHAUSTED, f"a {cls.DESCRIPTOR.name} with more than {limit} "
                                                                  f"{what} exceeds softswitch's limit: split it"))
                elements.append(data[f.value:f.end])
            else:
                rest += data[f.start:f.end]
    except ValueError as e:
        return Rejected(P4RTError(INVALID_ARGUMENT, f"the {cls.DESCRIPTOR.name} is not a valid message: {e}"))
    head = _parse(cls, bytes(rest))
    return head if isinstance(head, Rejected) else (head, elements)


def write_request(data: bytes) -> WriteIntake | Rejected:
    """A WriteRequest whose updates stay serialized until they are applied (device.write)."""
    if len(data) > MAX_WRITE_BYTES:
        return Rejected(_size_error("a WriteRequest", len(data), MAX_WRITE_BYTES))
    split = _split(p4runtime_pb2.WriteRequest, data, _UPDATES, MAX_WRITE_UPDATES, "updates")
    return split if isinstance(split, Rejected) else WriteIntake(*split)


def read_request(data: bytes) -> ReadIntake | Rejected:
    """A ReadRequest with its repeated entities merged (see the module docstring)."""
    if len(data) > MAX_READ_BYTES:
        return Rejected(_size_error("a ReadRequest", len(data), MAX_READ_BYTES))
    # every requested entity is scanned, only the distinct ones are parsed and counted
    split = _split(p4runtime_pb2.ReadRequest, data, _ENTITIES)
    if isinstance(split, Rejected):
        return split
    request, raw_entities = split
    distinct: dict[bytes, int] = {}
    positions = [distinct.setdefault(raw, len(distinct)) for raw in raw_entities]
    if len(distinct) > MAX_READ_ENTITIES:
        return Rejected(P4RTError(RESOURCE_EXHAUSTED, f"a ReadRequest with {len(distinct)} distinct entities exceeds "
                                                      f"softswitch's limit of {MAX_READ_ENTITIES}: split it"))
    for raw in distinct:
        entity = _parse(p4runtime_pb2.Entity, raw)
        if isinstance(entity, Rejected):
            return entity
        request.entities.append(entity)
    return ReadIntake(request, positions)


def stream_message(data: bytes) -> p4runtime_pb2.StreamMessageRequest | Rejected:
    if len(data) > MAX_STREAM_MESSAGE_BYTES:
        try:
            kind = _STREAM_KINDS.get(next(wire.fields(data)).number)
        except (ValueError, StopIteration):
            kind = None
        return Rejected(_size_error("a StreamMessageRequest", len(data), MAX_STREAM_MESSAGE_BYTES), kind)
    return _parse(p4runtime_pb2.StreamMessageRequest, data)
