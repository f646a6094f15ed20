"""PacketOut -> frame and frame -> PacketIn, through the P4Info controller headers.

As PI does for simple_switch: the ``packet_out`` metadata fields are packed in P4Info order
(the order of the ``@controller_header("packet_out")`` header's fields), each at its bitwidth,
MSB first, zero-padded to a byte boundary, and put in front of the payload; a metadata field
the client leaves out is sent as 0. A frame leaving on the CPU port loses the same number of
bytes, split into the ``packet_in`` fields. Without controller headers in the P4Info frames
pass unchanged.
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from . import codec
from .errors import invalid
from .p4info_map import PacketMetadataMap


def packet_out_frame(pm: PacketMetadataMap | None, msg: p4runtime_pb2.PacketOut) -> bytes:
    if pm is None:
        if msg.metadata:
            raise invalid("the P4Info has no packet_out controller header: PacketOut metadata must be empty")
        return msg.payload
    by_id = {fid: (i, name, width) for i, (fid, name, width) in enumerate(pm.fields)}
    values = [0] * len(pm.fields)
    seen = set()
    for md in msg.metadata:
        f = by_id.get(md.metadata_id)
        if f is None:
            raise invalid(f"packet_out has no metadata field with id {md.metadata_id}")
        if md.metadata_id in seen:
            raise invalid(f"packet_out metadata '{f[1]}' is given twice")
        seen.add(md.metadata_id)
        values[f[0]] = codec.to_uint(md.value, f[2], f"packet_out metadata '{f[1]}'")
    header = codec.pack_fields([(v, w) for v, (_, _, w) in zip(values, pm.fields)])
    return header + msg.payload


def packet_in_message(pm: PacketMetadataMap | None, frame: bytes) -> p4runtime_pb2.PacketIn | None:
    """The PacketIn for a frame from the CPU port, or None if it is too short for the header."""
    if pm is None:
        return p4runtime_pb2.PacketIn(payload=frame)
    n = pm.nbytes
    if len(frame) < n:
        return None
    msg = p4runtime_pb2.PacketIn(payload=frame[n:])
    for (fid, _, _), value in zip(pm.fields, codec.unpack_fields(frame, [w for _, _, w in pm.fields])):
        msg.metadata.add(metadata_id=fid, value=codec.from_uint(value))
    return msg
