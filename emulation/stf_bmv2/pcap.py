"""The pcap files simple_switch reads and writes with ``--use-files`` (classic pcap, Ethernet)."""
from __future__ import annotations

import struct
import time

MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
HEADER = struct.pack("<IHHiIII", MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)


def record(frame: bytes) -> bytes:
    now = time.time()
    return struct.pack("<IIII", int(now), int(now % 1 * 1e6), len(frame), len(frame)) + frame


def read_frames(data: bytes) -> list[bytes]:
    """The frames of a pcap file's bytes (a file cut short ends at its last whole record)."""
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic in (MAGIC, 0xA1B23C4D) else ">"
    out, i = [], 24
    while i + 16 <= len(data):
        _, _, incl, _ = struct.unpack(order + "IIII", data[i:i + 16])
        if i + 16 + incl > len(data):
            break
        out.append(data[i + 16:i + 16 + incl])
        i += 16 + incl
    return out
