"""The protobuf wire format without parsing: the top-level fields of a serialized message, and
length-delimited fields written directly.

Used where the server must look at a request before it pays for parsing it (intake.py), to
recognise a serialized P4DeviceConfig (pipeline.py) and to assemble ReadResponses from entities
serialized one by one (reads.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Field:
    number: int
    wire_type: int
    start: int          # where the field's tag begins
    value: int          # where its value begins (for LEN fields: the payload, after the length)
    end: int            # one past its last byte


def fields(buf: bytes) -> Iterator[Field]:
    """Each top-level field of ``buf`` in order; ValueError if ``buf`` is not a well-formed
    message (truncated, field number 0, groups or an unknown wire type, varints over 64 bits)."""
    pos, n = 0, len(buf)
    while pos < n:
        start = pos
        key, pos = varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {start}")
        value = pos
        if wire_type == VARINT:
            _, pos = varint(buf, pos)
        elif wire_type == LEN:
            length, value = varint(buf, pos)
            pos = value + length
        elif wire_type == I64:
            pos += 8
        elif wire_type == I32:
            pos += 4
        else:
            raise ValueError(f"wire type {wire_type} (field {number}) at byte {start} is not supported")
        if pos > n:
            raise ValueError(f"field {number} at byte {start} runs past the end ({n} bytes)")
        yield Field(number, wire_type, start, value, pos)


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    result, shift, n = 0, 0, len(buf)
    while True:
        if pos >= n:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def encode_varint(value: int) -> bytes:
    """The varint encoding of a non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (a message or bytes), as it goes on the wire."""
    return encode_varint(number << 3 | LEN) + encode_varint(len(payload)) + payload
