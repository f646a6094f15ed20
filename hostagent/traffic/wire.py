"""Wire formats of the traffic tools.

UDP datagram payload (RoCEv2-like, to destination port 4791): 24 bytes of header, then zeros::

    0   BTH (12 bytes, InfiniBand Base Transport Header layout): opcode 0x04 (RC SEND Only),
        flags 0, P_Key 0xFFFF, reserved 0 + destination QP = flow id (24 bits),
        A/reserved + PSN = sequence number (24 bits); A (AckReq, the word's top bit) set
        when the sender's congestion control wants an acknowledgement of the datagram
    12  total datagrams of the flow (u32)
    16  send time, ns since the epoch (u64, CLOCK_REALTIME)

Acknowledgement (receiver to the datagram's source address and port, 40 bytes): BTH with opcode
0x11 (RC Acknowledge), the flow id as QP and the acknowledged sequence number as PSN, AETH
(4 bytes: syndrome 0, MSN 0), then the datagram's send time echoed, its arrival time at the
receiver (the kernel's receive timestamp) and the time the acknowledgement left (u64 ns each,
CLOCK_REALTIME). Send to acknowledgement is the sender's RTT sample; arrival to acknowledgement
is the receiver's share of it (Swift's host delay).

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
BTH_OPCODE_RC_ACK = 0x11
BTH_PKEY_DEFAULT = 0xFFFF
BTH_ACK_REQ = 1 << 31
_UDP = struct.Struct("!BBHIIIQ")
_ACK = struct.Struct("!BBHIIIQQQ")
ACK_BYTES = _ACK.size
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
    ack_req: bool = False


@dataclass(frozen=True)
class Ack:
    flow_id: int
    seq: int
    send_ns: int        # the datagram's, echoed
    recv_ns: int        # its arrival at the receiver
    ack_ns: int         # when this acknowledgement was sent


def pack_datagram_header(buf: bytearray, flow_id: int, seq: int, total: int, send_ns: int,
                         ack_req: bool = False) -> None:
    """Write the header into the first bytes of ``buf`` (the sender reuses one buffer per flow)."""
    _UDP.pack_into(buf, 0, BTH_OPCODE_RC_SEND_ONLY, 0, BTH_PKEY_DEFAULT, flow_id & _MASK24,
                   (seq & _MASK24) | (BTH_ACK_REQ if ack_req else 0), total, send_ns)


def unpack_datagram_header(data: bytes) -> DatagramHeader:
    if len(data) < _UDP.size:
        raise MalformedDatagram(f"{len(data)} bytes, the header alone is {_UDP.size}")
    opcode, flags, pkey, qp, word, total, send_ns = _UDP.unpack_from(data)
    psn = word & ~BTH_ACK_REQ
    if opcode != BTH_OPCODE_RC_SEND_ONLY or pkey != BTH_PKEY_DEFAULT or qp > _MASK24 or psn > _MASK24:
        raise MalformedDatagram(f"not a traffic datagram (opcode {opcode:#x}, P_Key {pkey:#x})")
    if psn >= total:
        raise MalformedDatagram(f"sequence number {psn} is not below the flow's total {total}")
    return DatagramHeader(qp, psn, total, send_ns, bool(word & BTH_ACK_REQ))


def pack_ack(flow_id: int, seq: int, send_ns: int, recv_ns: int, ack_ns: int) -> bytes:
    return _ACK.pack(BTH_OPCODE_RC_ACK, 0, BTH_PKEY_DEFAULT, flow_id & _MASK24, seq & _MASK24, 0,
                     send_ns, recv_ns, ack_ns)


def unpack_ack(data: bytes) -> Ack | None:
    """The acknowledgement, or None for anything else (the sender counts those)."""
    if len(data) != ACK_BYTES:
        return None
    opcode, _, pkey, qp, psn, _, send_ns, recv_ns, ack_ns = _ACK.unpack(data)
    if opcode != BTH_OPCODE_RC_ACK or pkey != BTH_PKEY_DEFAULT or qp > _MASK24 or psn > _MASK24:
        return None
    return Ack(qp, psn, send_ns, recv_ns, ack_ns)


def pack_tcp_preamble(flow_id: int, nbytes: int, connect_ns: int) -> bytes:
    return _TCP_PREAMBLE.pack(flow_id, nbytes, connect_ns)


def unpack_tcp_preamble(data: bytes) -> tuple[int, int, int]:
    """(flow id, stream bytes, connect time ns)."""
    return _TCP_PREAMBLE.unpack_from(data)


def pack_tcp_ack(nbytes: int) -> bytes:
    return _TCP_ACK.pack(nbytes)


def unpack_tcp_ack(data: bytes) -> int:
    return _TCP_ACK.unpack(data)[0]
