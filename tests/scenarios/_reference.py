"""Independent reference computations for the scenarios' expectations: written out from the
algorithms' definitions, deliberately not the softswitch code under test."""
from __future__ import annotations


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected, init 0): BMv2's crc16."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def internet_checksum(data: bytes) -> int:
    """RFC 1071 ones'-complement checksum (an odd byte padded with a zero at the end)."""
    data += b"\0" * (len(data) % 2)
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF
