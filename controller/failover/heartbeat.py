"""Heartbeat frames: what a switch sends its neighbour on one port (as a packet-out).

Ethernet (destination: the neighbour's MAC, source: the sender's, ether type 0x88b5, which
``p4src/include/control/packetio.p4`` punts to the controller), then ``MAGIC``, the sender's
device id (32 bits), its port (16), a sequence number (32) and the send time (64, ns of the
controller's monotonic clock), padded to Ethernet's minimum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from controller import p4names as P4

ETHERTYPE_HEARTBEAT = P4.ETHERTYPE_HEARTBEAT
MAGIC = b"AIFHB1"
_ETH = struct.Struct("!6s6sH")
_BODY = struct.Struct("!6sIHIQ")
MIN_FRAME = 60


@dataclass(frozen=True)
class Heartbeat:
    device_id: int
    port: int
    seq: int
    sent_ns: int


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def encode(beat: Heartbeat, src_mac: str, dst_mac: str) -> bytes:
    frame = _ETH.pack(_mac(dst_mac), _mac(src_mac), ETHERTYPE_HEARTBEAT)
    frame += _BODY.pack(MAGIC, beat.device_id, beat.port, beat.seq & 0xFFFFFFFF, beat.sent_ns)
    return frame.ljust(MIN_FRAME, b"\0")


def decode(frame: bytes) -> Heartbeat | None:
    """The heartbeat in ``frame``, or None when it is not one of ours."""
    if len(frame) < _ETH.size + _BODY.size:
        return None
    _dst, _src, eth_type = _ETH.unpack_from(frame)
    if eth_type != ETHERTYPE_HEARTBEAT:
        return None
    magic, device_id, port, seq, sent_ns = _BODY.unpack_from(frame, _ETH.size)
    if magic != MAGIC:
        return None
    return Heartbeat(device_id, port, seq, sent_ns)
