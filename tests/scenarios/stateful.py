"""stateful.p4: registers, an indexed counter, an indexed meter and random().

Packets add st.add into reg[st.idx & 15] (the header reports the old and new value, which
wrap at 32 bits), count into ctr[index] and run mtr[index]. The control plane writes a
register cell and a counter cell, configures meters with zero rates (so the colours depend
on the burst sizes alone, not on timing) and reads everything back; the model here says
what each read and each packet must show.

random(): rnd_a and rnd_b are blanked for the comparison with BMv2; `expect` checks that
rnd_a stays within [100, 200] and that rnd_b is not a constant.
"""
from p4.v1 import p4runtime_pb2
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

ETHERTYPE_ST = 0x88B5
ST = Layout(("idx", 8), ("add", 32), ("reg_old", 32), ("reg_new", 32), ("color", 8), ("rnd_a", 32), ("rnd_b", 8))
RND_A, RND_B = 14 + 14, 14 + 18            # byte offsets of rnd_a (4 bytes) and rnd_b (1 byte)
GREEN, YELLOW, RED = 0, 1, 2
# meter configs (cir, cburst, pir, pburst) by index; rates 0: buckets never refill
METERS = {1: (0, 1, 0, 2), 2: (0, 0, 0, 0), 3: (1_000_000, 1000, 2_000_000, 2000)}
TRAILER = b"\xee" * 4


def _frame(idx: int, add: int, color: int = 0) -> bytes:
    return (raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=ETHERTYPE_ST))
            + ST.pack(idx=idx, add=add, color=color) + TRAILER)


FRAME_LEN = len(_frame(0, 0))


def _ids(s: Setup, kind: str, name: str) -> int:
    return next(o.preamble.id for o in getattr(s.p4info.message, kind) if o.preamble.name == name)


def _setup(s: Setup) -> None:
    s.insert(s.p4info.table_entry("StIngress.fwd", {"standard_metadata.ingress_port": 1},
                                  action="StIngress.set_port", params={"port": 2}))
    mid = _ids(s, "meters", "StIngress.mtr")
    entries = []
    for index, (cir, cburst, pir, pburst) in METERS.items():
        e = p4runtime_pb2.MeterEntry(meter_id=mid)
        e.index.index = index
        e.config.cir, e.config.cburst, e.config.pir, e.config.pburst = cir, cburst, pir, pburst
        entries.append(e)
    s.modify(*entries)


def _write_cells(s: Setup) -> bytes:
    """reg[3] = 1000 and ctr[2] = (100 packets, 5000 bytes), over P4Runtime (BMv2: Thrift
    for the register, PI does not implement register writes)."""
    ctr = p4runtime_pb2.CounterEntry(counter_id=s.p4info.counter_id("StIngress.ctr"))
    ctr.index.index = 2
    ctr.data.packet_count, ctr.data.byte_count = 100, 5000
    reg = p4runtime_pb2.RegisterEntry(register_id=_ids(s, "registers", "StIngress.reg"))
    reg.index.index = 3
    reg.data.bitstring = (1000).to_bytes(2, "big")
    if s.target == "bmv2":
        s.modify(ctr)
        s.bmv2_thrift("c.bm_register_write(0, 'StIngress.reg', 3, 1000)")
    else:
        s.modify(reg, ctr)
    return b"written"


def _read_state(s: Setup) -> bytes:
    if s.target == "bmv2":      # PI: "Register reads are not supported yet"
        out = s.bmv2_thrift("print(*c.bm_register_read_all(0, 'StIngress.reg'))")
        lines = [f"reg[{i}] {v}" for i, v in enumerate(out.split())]
    else:
        lines = []
        for i in range(16):
            reg = p4runtime_pb2.RegisterEntry(register_id=_ids(s, "registers", "StIngress.reg"))
            reg.index.index = i
            (e,) = s.read(reg)
            lines.append(f"reg[{i}] {int.from_bytes(e.register_entry.data.bitstring, 'big')}")
    cells = {e.counter_entry.index.index: e.counter_entry.data
             for e in s.read(s.p4info.counter_entry("StIngress.ctr"))}
    lines += [f"ctr[{i}] {d.packet_count} {d.byte_count}" for i, d in sorted(cells.items())]
    for i in (0, 1, 2, 3):
        m = p4runtime_pb2.MeterEntry(meter_id=_ids(s, "meters", "StIngress.mtr"))
        m.index.index = i
        (e,) = s.read(m)
        c = e.meter_entry.config
        lines.append(f"mtr[{i}] {c.cir} {c.cburst} {c.pir} {c.pburst}")
    return "\n".join(lines).encode()


# (idx, add, color in): idx is masked to 4 bits, sums wrap at 2^32
PHASE1 = [(0, 5, 0), (0, 7, 0), (16, 1, 0), (1, 0xFFFFFFFF, 0), (1, 2, 0), (1, 0, 0), (1, 0, 0),
          (2, 0x80000000, 0), (0xF2, 0x80000000, 0), (3, 1, 2), (0x13, 2, 1), (15, 0xFFFFFFFF, 0)]
PHASE2 = [(3, 24, 0), (2, 1, 0), (0xFF, 1, 0)]
PACKETS = ([Send(1, _frame(*p)) for p in PHASE1] + [Step(_write_cells)]
           + [Send(1, _frame(*p)) for p in PHASE2] + [Step(_read_state)])


def _normalise(port: int, frame: bytes) -> bytes:
    return frame[:RND_A] + b"\0" * 5 + frame[RND_B + 1:] if len(frame) > RND_B else frame


class Model:
    def __init__(self):
        self.reg = [0] * 16
        self.ctr = [[0, 0] for _ in range(16)]
        self.tokens = {i: [c[1], c[3]] for i, c in METERS.items()}     # committed, peak
        self.big = {3}                                                   # refills faster than we send

    def color(self, i: int) -> int:
        if i not in self.tokens or i in self.big:
            return GREEN
        t = self.tokens[i]
        if t[1] < 1:
            return RED
        t[1] -= 1
        if t[0] < 1:
            return YELLOW
        t[0] -= 1
        return GREEN

    def packet(self, idx: int, add: int) -> dict:
        i = idx & 15
        old = self.reg[i]
        self.reg[i] = (old + add) & 0xFFFFFFFF
        self.ctr[i][0] += 1
        self.ctr[i][1] += FRAME_LEN
        return {"idx": idx, "add": add, "reg_old": old, "reg_new": self.reg[i], "color": self.color(i)}


def _expect(outputs) -> None:
    model = Model()
    rnd_b = set()
    i = 0
    for pkt, got in zip(PACKETS, outputs):
        if isinstance(pkt, Step):
            if pkt.run is _write_cells:
                assert got == [(CONTROL, b"written")]
                model.reg[3] = 1000
                model.ctr[2] = [100, 5000]
            else:
                want = [f"reg[{k}] {v}" for k, v in enumerate(model.reg)]
                want += [f"ctr[{k}] {p} {b}" for k, (p, b) in enumerate(model.ctr)]
                want += [f"mtr[{k}] {' '.join(map(str, METERS.get(k, (0, 0, 0, 0))))}" for k in (0, 1, 2, 3)]
                assert got == [(CONTROL, "\n".join(want).encode())], \
                    f"read back:\n{got[0][1].decode()}\nwant:\n" + "\n".join(want)
            continue
        idx, add, _ = (PHASE1 + PHASE2)[i]
        i += 1
        assert [p for p, _ in got] == [2], f"packet {i}: {got}"
        frame = got[0][1]
        have = ST.unpack(frame[14:])
        want = model.packet(idx, add)
        bad = {k: (have[k], v) for k, v in want.items() if have[k] != v}
        assert not bad, f"packet {i} idx {idx} add {add:#x}: (got, want) {bad}"
        assert 100 <= have["rnd_a"] <= 200, f"random(100, 200) gave {have['rnd_a']}"
        rnd_b.add(have["rnd_b"])
        assert frame[14 + ST.size:] == TRAILER
    assert len(rnd_b) > 1, f"random(0, 255) gave {rnd_b} for every packet"


SCENARIOS = [Scenario("stateful", "stateful", PACKETS, setup=_setup, normalise=_normalise, expect=_expect)]
