"""expressions.p4: every P4-16 operator on header `calc`, results checked against Python.

Each packet carries inputs a, b (bit<32>), c (bit<8>), s (int<16>); the program writes
each operator's result into a field of its own. The expected values are computed here
with explicit masks (wrap) and clamps (saturation), independently of softswitch.
"""
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout, clamp, wrap
from scenarios.runner import Scenario, Send, Setup

ETHERTYPE_CALC = 0x88B5
M32 = 0xFFFFFFFF

CALC = Layout(
    ("a", 32), ("b", 32), ("c", 8), ("s", 16, "signed"),
    ("add", 32), ("sub", 32), ("mul", 32), ("shl", 32), ("shr", 32), ("and_", 32), ("or_", 32),
    ("xor_", 32), ("not_", 32), ("slice", 8), ("concat", 16), ("cast8", 8), ("cast64", 64),
    ("max", 32), ("slice_set", 32), ("sat_add", 32), ("sat_sub", 32), ("shl_const", 32),
    ("shr_const", 32), ("neg", 32), ("mix", 32),
    ("s_sat_add", 16, "signed"), ("s_sat_sub", 16, "signed"), ("s_shr", 16, "signed"),
    ("s_cast8", 8, "signed"), ("s_neg", 16, "signed"), ("s_add", 16, "signed"),
    ("s_widen", 32, "signed"), ("s_bits", 16),
    ("lt", 1), ("ge", 1), ("eq", 1), ("ne", 1), ("s_neg_flag", 1), ("s_le", 1), ("land", 1),
    ("lor", 1), ("lnot", 1), ("_pad", 7),
)


def expected(a: int, b: int, c: int, s: int) -> dict[str, int]:
    """What P4-16 says each output field holds."""
    lt = a < b
    return {
        "a": a, "b": b, "c": c, "s": s,
        "add": wrap(a + b, 32), "sub": wrap(a - b, 32), "mul": wrap(a * b, 32),
        "shl": wrap(a << c, 32), "shr": a >> c,
        "and_": a & b, "or_": a | b, "xor_": a ^ b, "not_": a ^ M32,
        "slice": (a >> 8) & 0xFF, "concat": ((b & 0xFF) << 8) | c,
        "cast8": a & 0xFF, "cast64": a,
        "max": max(a, b),
        "slice_set": (a & ~(0xFF << 12) & M32) | (c << 12),
        "sat_add": clamp(a + b, 32), "sat_sub": clamp(a - b, 32),
        "shl_const": wrap(a << 4, 32), "shr_const": a >> 28,
        "neg": wrap(-a, 32),
        "mix": wrap(wrap(a + c, 32) * 3, 32) ^ (b >> 1),
        "s_sat_add": clamp(s + 1, 16, True), "s_sat_sub": clamp(s - 20000, 16, True),
        "s_shr": s >> 1,                        # Python's >> is arithmetic on negatives
        "s_cast8": wrap(s, 8, True), "s_neg": wrap(-s, 16, True), "s_add": wrap(s + 1000, 16, True),
        "s_widen": s, "s_bits": s & 0xFFFF,
        "lt": int(lt), "ge": int(a >= b), "eq": int(a == b), "ne": int(a != b),
        "s_neg_flag": int(s < 0), "s_le": int(s <= -5),
        "land": int(lt and c != 0), "lor": int(lt or c == 0), "lnot": int(not lt),
        "_pad": 0,
    }


INPUTS = [
    (7, 5, 3, 100),
    (M32, 1, 1, -1),                       # a + b wraps to 0, sat_add clamps, ~a = 0
    (0, M32, 0, -32768),                   # a - b wraps to 1, sat_sub clamps to 0, -s wraps
    (0x80000000, 0x80000000, 31, 32767),   # a * b wraps to 0; s + 1 saturates; s + 1000 wraps
    (0x12345678, 0x9ABCDEF0, 32, -5),      # shift by the full width: 0 both ways
    (0xDEADBEEF, 0x0000FFFF, 255, -4),     # shift count far beyond the width
    (0xFFFFFFFF, 0xFFFFFFFF, 0xFF, -20000),  # equal inputs; s |-| 20000 saturates at -32768
    (1, 2, 0, 0x7F80),                     # (int<8>)s keeps the low byte only: -128
    (0x0F0F0F0F, 0xF0F0F0F0, 0x80, -12768),  # s - 20000 reaches exactly -32768
    (0x55555555, 0x55555555, 8, 31768),    # s + 1000 wraps to exactly -32768
]


def _frame(**values: int) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=ETHERTYPE_CALC)) + CALC.pack(**values)


def _setup(s: Setup) -> None:
    s.insert(s.p4info.table_entry("CalcIngress.fwd", {"standard_metadata.ingress_port": 1},
                                  action="CalcIngress.set_port", params={"port": 2}),
             s.p4info.table_entry("CalcIngress.fwd", {"standard_metadata.ingress_port": 3},
                                  action="CalcIngress.set_port", params={"port": 4}))


TRAILER = b"\xa5" * 6                   # bytes after calc: payload, must come back unchanged
PACKETS = [Send(1, _frame(a=a, b=b, c=c, s=s) + TRAILER) for a, b, c, s in INPUTS]
# Garbage in the output fields is overwritten.
GARBAGE = Send(1, bytes(b ^ 0xFF if i >= 14 + 11 else b for i, b in enumerate(_frame(a=9, b=4, c=2, s=-7))))
PACKETS.append(GARBAGE)
N_CALC = len(PACKETS)
PACKETS += [
    # calc one byte short: PacketTooShort, calc stays invalid, the frame goes out untouched
    Send(3, _frame(a=1, b=2, c=3, s=4)[:14 + CALC.size - 1]),
    # another ether type: not parsed, forwarded as is
    Send(3, raw(Ether(dst="00:00:00:00:00:02", type=0x88B6)) + bytes(range(40))),
    # only an Ethernet header (the kernel sends nothing shorter)
    Send(3, raw(Ether(dst="00:00:00:00:00:02", type=ETHERTYPE_CALC))),
    # no fwd entry for port 2: default drop
    Send(2, _frame(a=1, b=1), expect_nothing=True),
]


def _expect(outputs) -> None:
    for i in range(N_CALC):
        assert [p for p, _ in outputs[i]] == [2], f"packet {i}: {outputs[i]}"
        frame = outputs[i][0][1]
        sent = PACKETS[i].frame
        assert frame[:14] == sent[:14]
        got = CALC.unpack(frame[14:])
        inputs = CALC.unpack(sent[14:])
        want = expected(inputs["a"], inputs["b"], inputs["c"], inputs["s"])
        bad = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        assert not bad, f"packet {i} inputs {inputs['a']:#x} {inputs['b']:#x} {inputs['c']} {inputs['s']}: " \
                        f"(got, want) {bad}"
        assert frame[14 + CALC.size:] == sent[14 + CALC.size:]
    for i in range(N_CALC, N_CALC + 3):
        assert outputs[i] == [(4, PACKETS[i].frame)], f"packet {i}: {outputs[i]}"
    assert outputs[N_CALC + 3] == []


SCENARIOS = [Scenario("expressions", "expressions", PACKETS, setup=_setup, expect=_expect)]
