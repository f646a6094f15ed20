"""The pure helpers of softswitch's P4Runtime server: bytestrings, controller-header packing,
device-config decoding."""
from __future__ import annotations

import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from softswitch.p4runtime import codec
from softswitch.p4runtime.errors import P4RTError
from softswitch.p4runtime.p4info_map import PacketMetadataMap
from softswitch.p4runtime.packetio import packet_in_message, packet_out_frame
from softswitch.p4runtime.pipeline import extract_bmv2_json


@pytest.mark.parametrize("data,width,value", [
    (b"\x63", 8, 99), (b"\x00\x63", 16, 99), (b"\x63", 16, 99), (b"\x30\x64", 16, 0x3064),
    (b"\x00\x30\x64", 16, 0x3064), (b"\x00\x00\x63", 12, 99), (b"\x00", 1, 0), (b"\x01", 1, 1),
])
def test_unsigned_bytestrings_accepted(data, width, value):
    assert codec.to_uint(data, width, "f") == value


@pytest.mark.parametrize("data,width", [
    (b"\x01\x63", 8), (b"", 8), (b"\x01\x00\x63", 16), (b"\x10\x63", 12), (b"\x00\x40\x63", 12), (b"\x02", 1),
])
def test_unsigned_bytestrings_rejected_out_of_range(data, width):
    with pytest.raises(P4RTError) as e:
        codec.to_uint(data, width, "field x")
    assert e.value.code == code_pb2.OUT_OF_RANGE and "field x" in e.value.message


@pytest.mark.parametrize("data,width,value", [
    (b"\x63", 8, 99), (b"\x9d", 8, -99), (b"\xff\x9d", 8, -99), (b"\xfd\x1d", 12, -739), (b"\x00\x00", 16, 0),
])
def test_signed_bytestrings(data, width, value):
    assert codec.to_sint(data, width, "f") == value


@pytest.mark.parametrize("data,width", [(b"\x00\x9d", 8), (b"\x8d\x1d", 12), (b"", 16)])
def test_signed_bytestrings_rejected(data, width):
    with pytest.raises(P4RTError) as e:
        codec.to_sint(data, width, "f")
    assert e.value.code == code_pb2.OUT_OF_RANGE


def test_canonical_encoding():
    assert codec.from_uint(0) == b"\x00"
    assert codec.from_uint(0x63) == b"\x63"
    assert codec.from_uint(0x3064) == b"\x30\x64"
    assert codec.from_uint(1 << 48) == b"\x01" + b"\x00" * 6
    assert codec.from_sint(-99) == b"\x9d"
    assert codec.from_sint(-739) == b"\xfd\x1d"
    assert codec.from_sint(128) == b"\x00\x80"
    assert codec.to_signed(0xFFF, 12) == -1


def test_pack_and_unpack_fields_msb_first_padded():
    packed = codec.pack_fields([(0x1FF, 9), (0, 7)])
    assert packed == b"\xff\x80"
    assert codec.pack_fields([(5, 3), (1, 1)]) == bytes([0b1011_0000])
    assert codec.unpack_fields(b"\xff\x80rest", [9, 7]) == [0x1FF, 0]
    assert codec.unpack_fields(bytes([0b1011_0000]), [3, 1]) == [5, 1]


PACKET_OUT = PacketMetadataMap("packet_out", ((1, "egress_port", 9), (2, "_pad", 7)))
PACKET_IN = PacketMetadataMap("packet_in", ((1, "ingress_port", 9), (2, "_pad", 7)))


def test_packet_out_header_in_front_of_the_payload():
    msg = pb.PacketOut(payload=b"payload", metadata=[pb.PacketMetadata(metadata_id=1, value=b"\x01\x02")])
    assert packet_out_frame(PACKET_OUT, msg) == bytes([0x81, 0x00]) + b"payload"   # 0x102 << 7
    assert packet_out_frame(None, pb.PacketOut(payload=b"raw")) == b"raw"
    for bad, code in ((pb.PacketMetadata(metadata_id=7, value=b"\x01"), code_pb2.INVALID_ARGUMENT),
                      (pb.PacketMetadata(metadata_id=1, value=b"\x02\x00"), code_pb2.OUT_OF_RANGE)):
        with pytest.raises(P4RTError) as e:
            packet_out_frame(PACKET_OUT, pb.PacketOut(payload=b"x", metadata=[bad]))
        assert e.value.code == code
    with pytest.raises(P4RTError):
        packet_out_frame(None, pb.PacketOut(payload=b"x", metadata=[pb.PacketMetadata(metadata_id=1, value=b"\x01")]))


def test_packet_in_split_off_the_frame():
    msg = packet_in_message(PACKET_IN, bytes([0x81, 0x00]) + b"frame")
    assert msg.payload == b"frame"
    assert [(m.metadata_id, m.value) for m in msg.metadata] == [(1, b"\x01\x02"), (2, b"\x00")]
    assert packet_in_message(PACKET_IN, b"\x81") is None                 # shorter than the header
    assert packet_in_message(None, b"whole").payload == b"whole"


def test_device_config_plain_json_or_legacy_p4deviceconfig():
    js = b'{"header_types": []}'
    assert extract_bmv2_json(js) == js
    assert extract_bmv2_json(b"  \n" + js) == b"  \n" + js
    # p4.tmp.P4DeviceConfig{reassign: true, device_data: js}, as the p4lang tutorials send it
    legacy = b"\x08\x01" + b"\x1a" + bytes([len(js)]) + js
    assert extract_bmv2_json(legacy) == js
    with pytest.raises(P4RTError):
        extract_bmv2_json(b"")
    assert extract_bmv2_json(b"\xff\xff") == b"\xff\xff"                # not a message: left to the JSON parser
