"""hashes.p4: v1model hash() with every deterministic algorithm, bit for bit.

The expected values are computed here from the algorithms' definitions, not from
softswitch.hashes: CRC-16/ARC written out bit by bit (BMv2's crc16, and crc16_custom with
BMv2's default parameters), zlib.crc32 (crc32 and crc32_custom's defaults), the Internet
checksum (csum16), big-endian identity and 16-bit XOR folding (xor16). BMv2 packs the field
list MSB first into whole bytes, zero-padding the last one (D2 is 41 bits: 6 bytes), and
writes ``base + hash % max`` truncated to the output field.
"""
import zlib

from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios._reference import crc16_arc, internet_checksum
from scenarios.runner import Scenario, Send, Setup

ETHERTYPE_HSH = 0x88B5
ALGOS = ("crc16", "crc32", "crc16_custom", "crc32_custom", "csum16", "identity", "xor16")
HSH = Layout(("f9", 9), ("f7", 7), ("f32", 32), ("f16", 16),
             *[(f"{a}_{s}", 32) for a in ALGOS for s in "abc"], ("crc32_16", 16))


def xor16(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    out = 0
    for i in range(0, len(data), 2):
        out ^= int.from_bytes(data[i:i + 2], "big")
    return out


HASH = {"crc16": crc16_arc, "crc32": zlib.crc32, "crc16_custom": crc16_arc, "crc32_custom": zlib.crc32,
        "csum16": internet_checksum, "identity": lambda d: int.from_bytes(d[:8], "big"), "xor16": xor16}


def expected(f9: int, f7: int, f32: int, f16: int) -> dict[str, int]:
    d1 = ((f9 << 55) | (f7 << 48) | (f32 << 16) | f16).to_bytes(8, "big")
    d2 = (((f9 << 32) | f32) << 7).to_bytes(6, "big")       # 41 bits, padded at the end
    out = {"f9": f9, "f7": f7, "f32": f32, "f16": f16}
    for a in ALGOS:
        h = HASH[a]
        out[f"{a}_a"] = h(d1) % 65536
        out[f"{a}_b"] = 5 + h(d1) % 1000
        out[f"{a}_c"] = h(d2) % (1 << 32)
    out["crc32_16"] = zlib.crc32(d1) & 0xFFFF
    return out


INPUTS = [
    (0, 0, 0, 0),                               # csum16 of zeros: 0xffff
    (0x1FF, 0x7F, 0xFFFFFFFF, 0xFFFF),          # all ones
    (0x100, 0x01, 0x80000000, 0x0001),
    (0x001, 0x40, 0x12345678, 0x9ABC),
    (0x155, 0x2A, 0xDEADBEEF, 0xCAFE),
    (0x000, 0x00, 0x0000FFFF, 0x0000),          # words sum to 0xffff: csum16 0
    (0x0AA, 0x55, 0x00000001, 0xFFFE),
    (0x1FE, 0x00, 0x7FFFFFFF, 0x8000),
]


def _setup(s: Setup) -> None:
    s.insert(s.p4info.table_entry("HashIngress.fwd", {"standard_metadata.ingress_port": 1},
                                  action="HashIngress.set_port", params={"port": 3}))


PACKETS = [Send(1, raw(Ether(dst="00:00:00:00:00:03", src="00:00:00:00:00:01", type=ETHERTYPE_HSH))
                + HSH.pack(f9=f9, f7=f7, f32=f32, f16=f16)) for f9, f7, f32, f16 in INPUTS]


def _expect(outputs) -> None:
    assert expected(0, 0, 0x0000FFFF, 0)["csum16_a"] == 0     # the input above does what it says
    for i, (inputs, got) in enumerate(zip(INPUTS, outputs)):
        assert [p for p, _ in got] == [3], f"packet {i}: {got}"
        have = HSH.unpack(got[0][1][14:])
        want = expected(*inputs)
        bad = {k: (hex(have[k]), hex(v)) for k, v in want.items() if have[k] != v}
        assert not bad, f"packet {i} {inputs}: (got, want) {bad}"
        assert len(got[0][1]) == 14 + HSH.size


SCENARIOS = [Scenario("hashes", "hashes", PACKETS, setup=_setup, expect=_expect)]
