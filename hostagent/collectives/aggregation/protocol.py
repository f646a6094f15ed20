"""Wire format of in-network aggregation (the contract between fabric.p4, the controller and hosts).

One packet (a frame) is UDP to AGG_UDP_PORT carrying a 16-byte big-endian header and
`frame_values` signed 32-bit big-endian integers (see p4src/README.md, "In-network aggregation"):

    pkt_type u8 | flags u8 | job_id u16 | slot u16 | set u8 | worker_id u8 | num_workers u8 |
    exponent u8 | seq u32 | frame_values u16

A job chooses its frame_values (`FRAME_VALUES`: whole blocks of BLOCK_VALUES = 64, SwitchML's
packet, up to MAX_BLOCKS = 5, the most a 1500-byte MTU holds); every packet of the job carries
that many values and says so in its header. `frame_bytes(frame_values)` is the Ethernet frame.

`seq` is a chunk index; the priming round uses negative indices, so it travels as 32-bit two's
complement and `AggHeader.seq` holds the signed value.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np

AGG_UDP_PORT = 48864  # 0xBEE0, as SwitchML
RING_UDP_PORT = AGG_UDP_PORT + 1  # ring baseline: switches never intercept it
BLOCK_VALUES = 64  # values of one block (SwitchML's packet); p4src: AGG_BLOCK_VALUES
MAX_BLOCKS = 5  # blocks of the largest frame (1324 bytes of IPv4 in a 1500-byte MTU); p4src: AGG_MAX_BLOCKS
FRAME_VALUES = tuple(BLOCK_VALUES * b for b in range(1, MAX_BLOCKS + 1))  # a job's choices: 64 .. 320
DEFAULT_FRAME_VALUES = BLOCK_VALUES  # SwitchML's 64, until a job chooses
MAX_FRAME_VALUES = FRAME_VALUES[-1]  # 320: the largest frame
VALUE_BYTES = 4
HEADER_FORMAT = "!BBHHBBBBIH"
HEADER = struct.Struct(HEADER_FORMAT)
HEADER_BYTES = HEADER.size  # 16
WIRE_HEADER_BYTES = 14 + 20 + 8  # Ethernet, IPv4 without options, UDP
# The default frame's sizes (64 values), for those that do not choose: AGG_VALUES values,
# a PACKET_BYTES UDP payload, a FRAME_BYTES Ethernet frame. A job's own: packet_bytes(), frame_bytes().
AGG_VALUES = DEFAULT_FRAME_VALUES
PAYLOAD_BYTES = AGG_VALUES * VALUE_BYTES  # 256

FLAG_OVERFLOW = 0x01  # some sum saturated (results only; workers never set it)
KNOWN_FLAGS = FLAG_OVERFLOW
MAX_CHILDREN = 32  # worker_id < 32: one bit each in the aggregator's bitmap
EXPONENT_BIAS = 127
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
DEFAULT_SLOTS = 32



def check_frame_values(frame_values: int) -> int:
    """``frame_values`` if a job may choose it; ValueError naming it otherwise."""
    whole = isinstance(frame_values, (int, np.integer)) and not isinstance(frame_values, bool)
    if not whole or frame_values not in FRAME_VALUES:
        raise ValueError(f"frame_values {frame_values!r} is not a whole number of {BLOCK_VALUES}-value blocks "
                         f"in {FRAME_VALUES[0]}..{FRAME_VALUES[-1]} (one of {', '.join(map(str, FRAME_VALUES))})")
    return frame_values


def packet_bytes(frame_values: int = DEFAULT_FRAME_VALUES) -> int:
    """The UDP payload of a frame of ``frame_values`` values: 16 + 4 * frame_values."""
    return HEADER_BYTES + frame_values * VALUE_BYTES


def frame_bytes(frame_values: int = DEFAULT_FRAME_VALUES) -> int:
    """The Ethernet frame (without FCS) of ``frame_values`` values: 58 + 4 * frame_values."""
    return WIRE_HEADER_BYTES + packet_bytes(frame_values)


PACKET_BYTES = packet_bytes()  # UDP payload of the default frame: 272
FRAME_BYTES = frame_bytes()  # Ethernet frame of the default frame: 314

_WIRE_VALUES = np.dtype(">i4")
_SEQ_MOD = 1 << 32


class PktType(enum.IntEnum):
    CONTRIB = 0  # worker -> aggregator, or a switch's partial sum -> its parent
    RESULT = 1  # aggregator -> workers


class MalformedPacket(ValueError):
    """A datagram that is not an aggregation packet; the message names what is wrong."""


_FIELD_BITS = {
    "flags": 8,
    "job_id": 16,
    "slot": 16,
    "set_id": 8,
    "worker_id": 8,
    "num_workers": 8,
    "exponent": 8,
    "frame_values": 16,
}


@dataclass(frozen=True)
class AggHeader:
    pkt_type: PktType
    flags: int
    job_id: int
    slot: int
    set_id: int  # the spec's `set` (0 or 1, SwitchML's shadow copy)
    worker_id: int
    num_workers: int
    exponent: int  # biased (e + EXPONENT_BIAS)
    seq: int  # signed chunk index, -2**31 .. 2**31-1
    frame_values: int = DEFAULT_FRAME_VALUES  # values the packet carries (its job's choice)

    def validate(self) -> None:
        """Raise MalformedPacket naming the first field outside what the spec allows."""
        if self.pkt_type not in (PktType.CONTRIB, PktType.RESULT):
            raise MalformedPacket(f"pkt_type {self.pkt_type} is neither CONTRIB (0) nor RESULT (1)")
        for name, bits in _FIELD_BITS.items():
            value = getattr(self, name)
            if not 0 <= value < (1 << bits):
                raise MalformedPacket(f"{name} {value} does not fit in {bits} bits")
        if not INT32_MIN <= self.seq <= INT32_MAX:
            raise MalformedPacket(f"seq {self.seq} is not a signed 32-bit chunk index")
        self.check_meaning()

    def check_meaning(self) -> None:
        """The checks beyond field widths (all a decoded header needs)."""
        if self.flags & ~KNOWN_FLAGS:
            raise MalformedPacket(f"flags 0x{self.flags:02x} has bits other than OVERFLOW (0x01)")
        if self.set_id > 1:
            raise MalformedPacket(f"set {self.set_id} is neither 0 nor 1")
        if self.worker_id >= MAX_CHILDREN:
            raise MalformedPacket(f"worker_id {self.worker_id} is not below {MAX_CHILDREN}")
        if self.frame_values not in FRAME_VALUES:
            raise MalformedPacket(f"frame_values {self.frame_values} is not one of {', '.join(map(str, FRAME_VALUES))}")


@dataclass(frozen=True)
class AggPacket:
    header: AggHeader
    values: np.ndarray  # header.frame_values int32, native byte order


def seq_from_wire(raw: int) -> int:
    """The signed chunk index of a 32-bit wire seq (two's complement)."""
    return raw - _SEQ_MOD if raw >= 1 << 31 else raw


def wrap_seq(index: int) -> int:
    """A chunk index of an endless stream folded into the signed 32-bit range."""
    return (index + (1 << 31)) % _SEQ_MOD - (1 << 31)


def pack_packet(header: AggHeader, values: np.ndarray) -> bytes:
    """Header + header.frame_values big-endian int32; raises MalformedPacket on a bad field or payload."""
    header.validate()
    values = np.asarray(values)
    if values.shape != (header.frame_values,):
        raise MalformedPacket(f"payload has shape {values.shape}, expected ({header.frame_values},): "
                              f"the header's frame_values")
    if values.dtype != np.int32:
        raise MalformedPacket(f"payload dtype is {values.dtype}, expected int32")
    head = HEADER.pack(
        int(header.pkt_type), header.flags, header.job_id, header.slot, header.set_id,
        header.worker_id, header.num_workers, header.exponent, header.seq % _SEQ_MOD,
        header.frame_values,
    )
    return head + values.astype(_WIRE_VALUES, copy=False).tobytes()


def unpack_header(data: bytes) -> AggHeader:
    """The header of a whole packet; raises MalformedPacket if the length or a field is wrong
    (the length must be the one the header's frame_values makes)."""
    if len(data) < HEADER_BYTES:
        raise MalformedPacket(f"packet is {len(data)} bytes, shorter than the {HEADER_BYTES}-byte header")
    ptype, flags, job, slot, set_id, worker, nworkers, exponent, seq, frame_values = HEADER.unpack_from(data)
    if ptype not in (PktType.CONTRIB, PktType.RESULT):
        raise MalformedPacket(f"pkt_type {ptype} is neither CONTRIB (0) nor RESULT (1)")
    header = AggHeader(
        PktType(ptype), flags, job, slot, set_id, worker, nworkers, exponent, seq_from_wire(seq), frame_values
    )
    header.check_meaning()  # the widths are the struct's
    if len(data) != packet_bytes(frame_values):
        raise MalformedPacket(f"packet is {len(data)} bytes, expected {packet_bytes(frame_values)} "
                              f"for its frame_values {frame_values}")
    return header


def unpack_packet(data: bytes) -> AggPacket:
    header = unpack_header(data)
    values = np.frombuffer(data, dtype=_WIRE_VALUES, count=header.frame_values, offset=HEADER_BYTES)
    return AggPacket(header, values.astype(np.int32))


def split_chunks(flat: np.ndarray, frame_values: int = DEFAULT_FRAME_VALUES) -> np.ndarray:
    """A 1-D array as rows of ``frame_values`` (a view when it fills them; the last row zero-padded)."""
    flat = np.asarray(flat).reshape(-1)
    rows = -(-flat.size // frame_values)
    if flat.size == rows * frame_values:
        return flat.reshape(rows, frame_values)
    padded = np.zeros(rows * frame_values, dtype=flat.dtype)
    padded[: flat.size] = flat
    return padded.reshape(rows, frame_values)
