"""The few fields of Linux's ``struct tcp_info`` (getsockopt TCP_INFO) the traffic tools report.

Offsets are those of include/uapi/linux/tcp.h, fixed by the kernel ABI (fields are only ever
appended); ``rcv_ooopack`` needs Linux 5.4 or later, older kernels return a shorter struct and
the fields they lack read as None.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

_TOTAL_RETRANS = 100        # __u32 tcpi_total_retrans: segments retransmitted over the connection
_REORD_SEEN = 220           # __u32 tcpi_reord_seen: reordering events the sender detected
_RCV_OOOPACK = 224          # __u32 tcpi_rcv_ooopack: segments received out of order
_SIZE = 232


@dataclass(frozen=True)
class TcpInfo:
    total_retrans: int | None
    reord_seen: int | None
    rcv_ooopack: int | None


def tcp_info(sock: socket.socket) -> TcpInfo:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _SIZE)

    def u32(offset: int) -> int | None:
        return struct.unpack_from("I", raw, offset)[0] if len(raw) >= offset + 4 else None

    return TcpInfo(u32(_TOTAL_RETRANS), u32(_REORD_SEEN), u32(_RCV_OOOPACK))
