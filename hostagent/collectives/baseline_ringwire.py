"""Wire format of the ring AllReduce baseline (UDP to RING_UDP_PORT = AGG_UDP_PORT + 1).

A 20-byte big-endian header, then for DATA the same payload as an aggregation frame of the ring's
size (`frame_values` 32-bit values, 64 to 320 in blocks of 64, int32 or float32 by `dtype`; the
receiver knows its ring's size and refuses another), for ACK an 8-byte selective-ack bitmap:

    kind u8 | flags u8 | dtype u8 | rank u8 | job_id u16 | op u16 | seq u32 | step u16 |
    chunk u16 | offset u32

DATA: seq = message index on the link (step * packets_per_segment + chunk), offset = element
offset of the payload in the (padded) tensor. ACK: seq = every message below it arrived; bit i of
the bitmap = message seq + 1 + i arrived too. `op` counts the allreduce calls of the ring.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np

from hostagent.collectives.aggregation.protocol import (
    AGG_VALUES,
    FLAG_OVERFLOW,
    FRAME_VALUES,
    VALUE_BYTES,
    MalformedPacket,
    check_frame_values,
)

RING_HEADER = struct.Struct("!BBBBHHIHHI")
RING_HEADER_BYTES = RING_HEADER.size  # 20
SACK = struct.Struct("!Q")
SACK_BITS = 64
RING_ACK_BYTES = RING_HEADER_BYTES + SACK.size


class RingKind(enum.IntEnum):
    DATA = 0
    ACK = 1


DTYPES: dict[int, np.dtype] = {0: np.dtype(np.int32), 1: np.dtype(np.float32)}
DTYPE_CODES = {dtype: code for code, dtype in DTYPES.items()}
_WIRE = {0: np.dtype(">i4"), 1: np.dtype(">f4")}


@dataclass(frozen=True)
class RingHeader:
    kind: RingKind
    flags: int  # FLAG_OVERFLOW: an int32 partial sum in this payload saturated
    dtype_code: int
    rank: int  # the sender's rank
    job_id: int
    op: int
    seq: int
    step: int = 0
    chunk: int = 0
    offset: int = 0


def data_bytes(frame_values: int = AGG_VALUES) -> int:
    """A DATA packet's UDP payload carrying ``frame_values`` values."""
    return RING_HEADER_BYTES + check_frame_values(frame_values) * VALUE_BYTES


def pack_data(header: RingHeader, values: np.ndarray) -> bytes:
    if values.ndim != 1 or values.size not in FRAME_VALUES or values.dtype != DTYPES[header.dtype_code]:
        raise MalformedPacket(f"ring payload {values.dtype}{values.shape} does not match dtype code {header.dtype_code}")
    return _pack_header(header) + values.astype(_WIRE[header.dtype_code], copy=False).tobytes()


def pack_ack(header: RingHeader, sack: int) -> bytes:
    return _pack_header(header) + SACK.pack(sack)


def _pack_header(h: RingHeader) -> bytes:
    return RING_HEADER.pack(int(h.kind), h.flags, h.dtype_code, h.rank, h.job_id, h.op, h.seq, h.step, h.chunk, h.offset)


def unpack_ring(data: bytes, frame_values: int = AGG_VALUES) -> tuple[RingHeader, np.ndarray | int]:
    """(header, values) for DATA of ``frame_values`` values, (header, sack bitmap) for ACK;
    MalformedPacket names the fault."""
    if len(data) < RING_HEADER_BYTES:
        raise MalformedPacket(f"ring packet is {len(data)} bytes, shorter than its {RING_HEADER_BYTES}-byte header")
    kind, flags, code, rank, job, op, seq, step, chunk, offset = RING_HEADER.unpack_from(data)
    if kind not in (RingKind.DATA, RingKind.ACK):
        raise MalformedPacket(f"ring packet kind {kind} is neither DATA (0) nor ACK (1)")
    if code not in DTYPES:
        raise MalformedPacket(f"ring dtype code {code} is neither 0 (int32) nor 1 (float32)")
    if flags & ~FLAG_OVERFLOW:
        raise MalformedPacket(f"ring flags 0x{flags:02x} has bits other than OVERFLOW (0x01)")
    header = RingHeader(RingKind(kind), flags, code, rank, job, op, seq, step, chunk, offset)
    expected = data_bytes(frame_values) if kind == RingKind.DATA else RING_ACK_BYTES
    if len(data) != expected:
        raise MalformedPacket(f"ring {header.kind.name} packet is {len(data)} bytes, expected {expected}")
    if kind == RingKind.ACK:
        return header, SACK.unpack_from(data, RING_HEADER_BYTES)[0]
    values = np.frombuffer(data, dtype=_WIRE[code], count=frame_values, offset=RING_HEADER_BYTES)
    return header, values.astype(DTYPES[code])
