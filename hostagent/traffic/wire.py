"""Wire formats of the traffic tools.

UDP datagram payload (RoCEv2-like, to destination port 4791): 24 bytes of header, then zeros::

    0   BTH (12 bytes, InfiniBand Base Transport Header layout): opcode 0x04 (RC SEND Only),
        flags 0, P_Key 0xFFFF, reserved 0 + destination QP = flow id (24 bits),
        A/reserved 0 + PSN = sequence number (24 bits)
    12  total datagrams of the flow (u32)
    16  send time, ns since the epoch (u64, CLOCK_REALTIME)

It is shaped like RoCEv2 so that a P4 program (or a capture) can read the flow id and sequence
number where RoCE has them; it is not a valid RoCE packet (no ICRC, no queue pair behind it).

TCP stream: a 20-byte preamble (flow id u32, stream bytes that follow u64, connect time ns u64,
CLOCK_REALTIME), then the bytes; when the receiver has them all it answers with the count it
got (u64) and closes. All integers are big-endian.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from hostagent.traffic.flows import UDP_HEADER_BYTES

BTH_OPCODE_RC_SEND_ONLY = 0x04
BTH_PKEY_DEFAULT = 0xFFFF
_UDP = struct.Struct("!BBHIIIQ")
_TCP_PREAMBLE = struct.Struct("!IQQ")
_TCP_ACK = struct.Struct("!Q")
TCP_PREAMBLE_BYTES = _TCP_PREAMBLE.size
TCP_ACK_BYTES = _TCP_ACK.size
_MASK24 = (1 << 24) - 1
assert _UDP.size == UDP_HEADER_BYTES


class MalformedDatagram(ValueError):
    pass


@dataclass(frozen=True)
class DatagramHeader:
    flow_id: int
    seq: int
    total: int
    send_ns: int


def pack_datagram_header(buf: bytearray, flow_id: int, seq: int, total: int, send_ns: int) -> None:
    """Write the header into the first bytes of ``buf`` (the sender reuses one buffer per flow)."""
    _UDP.pack_into(buf, 0, BTH_OPCODE_RC_SEND_ONLY, 0, BTH_PKEY_DEFAULT, flow_id & _MASK24, seq & _MASK24,
                   total, send_ns)


def unpack_datagram_header(data: bytes) -> DatagramHeader:
    if len(data) < _UDP.size:
        raise MalformedDatagram(f"{len(data)} bytes, the header alone is {_UDP.size}")
    opcode, flags, pkey, qp, psn, total, send_ns = _UDP.unpack_from(data)
    if opcode != BTH_OPCODE_RC_SEND_ONLY or pkey != BTH_PKEY_DEFAULT or qp > _MASK24 or psn > _MASK24:
        raise MalformedDatagram(f"not a traffic datagram (opcode {opcode:#x}, P_Key {pkey:#x})")
    if psn >= total:
        raise MalformedDatagram(f"sequence number {psn} is not below the flow's total {total}")
    return DatagramHeader(qp, psn, total, send_ns)


def pack_tcp_preamble(flow_id: int, nbytes: int, connect_ns: int) -> bytes:
    return _TCP_PREAMBLE.pack(flow_id, nbytes, connect_ns)


def unpack_tcp_preamble(data: bytes) -> tuple[int, int, int]:
    """(flow id, stream bytes, connect time ns)."""
    return _TCP_PREAMBLE.unpack_from(data)


def pack_tcp_ack(nbytes: int) -> bytes:
    return _TCP_ACK.pack(nbytes)


def unpack_tcp_ack(data: bytes) -> int:
    return _TCP_ACK.unpack(data)[0]
