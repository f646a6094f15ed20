"""tables.p4: every match kind, defaults, action profiles and selectors, direct counters and meters.

Each packet's `tbl` header carries the keys; every table writes its own output field. The
expected outputs come from a small Python model of the entries written in the setup (and
changed by the control-plane steps in between), the selector choices from CRC-16/ARC and
CRC-32 computed here bit by bit / with zlib, and BMv2's member order (lowest free handle
first, a group's members sorted by handle, ``hash % size``).
"""
import zlib

from p4.v1 import p4runtime_pb2
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios._reference import crc16_arc
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

ETHERTYPE_TBL = 0x88B5
TBL = Layout(
    ("k16", 16), ("k32", 32), ("t1", 8), ("t2", 16), ("r16", 16), ("o8", 8),
    ("out_exact", 16), ("out_lpm", 16), ("out_ternary", 16), ("out_range", 16), ("out_optional", 16),
    ("out_const", 16), ("out_constdef", 16), ("out_defparam", 16), ("out_prof", 16), ("out_sel16", 16),
    ("out_sel32", 16), ("sw_tag", 8), ("sw_value", 16), ("hit_tag", 8), ("out_hit", 16), ("color", 8),
)
KEYS = ("k16", "k32", "t1", "t2", "r16", "o8")
GREEN, YELLOW, RED = 0, 1, 2


def _frame(**keys: int) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=ETHERTYPE_TBL)) + TBL.pack(**keys)


# --- the entries, and the model of what they do ---------------------------------------------

EXACT = {0x0001: 0x1111, 0xFFFF: 0xFFFF, 0x0000: 0x0A0A}
LPM = [(0x0A000000, 8, 0x0008), (0x0A010000, 16, 0x0016), (0x0A010203, 32, 0x0032), (0, 0, 0x00FF)]
# (priority, (t1 value, mask) or None, (t2 value, mask) or None, out, meter config or None)
TERNARY = [(20, (0x12, 0xFF), None, 0x0202, None),
           (10, (0x10, 0xF0), None, 0x0101, (0, 0, 0, 1)),       # cir, cburst, pir, pburst
           (5, None, (0x8000, 0x8000), 0x0303, (0, 1, 0, 2))]
RANGE = [(30, 50, 0xFFFF, 0x0C), (20, 1, 100, 0x0B), (10, 0, 0, 0x0A)]
OPTIONAL = [(2, 5, 0x05), (1, None, 0x99)]
CONST = {1: 0x11, 2: 0x22, 3: 0x33}
CONSTDEF = {0x0001: 0x0C0D}
DEFPARAM = {7: 0x0007}
PROF_MEMBERS = {1: 0x0A01, 2: 0x0A02}
PROF = {1: 1, 2: 2}                   # k16 -> member
SWITCH = {0x0A: ("act_a", 0xAAAA), 0x0B: ("act_b", 0xBBBB), 0x0D: ("nop", 0)}
HIT = {1: ("set_hit", 0x4141), 2: ("nop", 0)}
# selectors: k16 1 -> group 10 of the members below; k16 2 -> one member directly
SEL16_MEMBERS = {1: 0x1601, 2: 0x1602, 3: 0x1603}
SEL32_MEMBERS = {5: 0x3205, 6: 0x3206, 7: 0x3207, 8: 0x3208, 9: 0x3209}


class Model:
    """The tables' state as the control plane left it, and the colours meters hand out."""

    def __init__(self):
        self.defparam_default = 0x1234
        self.prof_members = dict(PROF_MEMBERS)
        self.switch_default = ("nop", 0)
        # meter state per ternary entry: [committed tokens, peak tokens] (rates are 0)
        self.meters = {out: [cfg[1], cfg[3]] for _, _, _, out, cfg in TERNARY if cfg}
        self.hits = {k: 0 for k in EXACT}

    def color(self, entry_out: int) -> int:
        m = self.meters.get(entry_out)
        if m is None:
            return GREEN               # no meter configured: BMv2 says green
        if m[1] < 1:                   # peak bucket first (PIR -> red)
            return RED
        m[1] -= 1
        if m[0] < 1:
            return YELLOW
        m[0] -= 1
        return GREEN

    def outputs(self, k: dict) -> dict:
        out = dict(k)
        if k["k16"] in EXACT:
            out["out_exact"] = EXACT[k["k16"]]
            self.hits[k["k16"]] += 1
        out["out_lpm"] = max((p, o) for v, p, o in LPM if k["k32"] >> (32 - p) == v >> (32 - p))[1]
        for _, t1, t2, o, _ in sorted(TERNARY, reverse=True):
            if (t1 is None or k["t1"] & t1[1] == t1[0]) and (t2 is None or k["t2"] & t2[1] == t2[0]):
                out["out_ternary"] = o
                out["color"] = self.color(o)
                break
        out["out_range"] = next((o for _, lo, hi, o in sorted(RANGE, reverse=True) if lo <= k["r16"] <= hi), 0)
        out["out_optional"] = next(o for _, v, o in sorted(OPTIONAL, reverse=True) if v in (None, k["o8"]))
        out["out_const"] = CONST.get(k["o8"], 0)
        out["out_constdef"] = CONSTDEF.get(k["k16"], 0xBEEF)
        out["out_defparam"] = DEFPARAM.get(k["k32"], self.defparam_default)
        if k["k16"] in PROF:
            out["out_prof"] = self.prof_members[PROF[k["k16"]]]
        sel_in = ((k["k32"] << 16) | k["t2"]).to_bytes(6, "big")
        if k["k16"] == 1:              # groups: members in handle (= creation) order
            m16 = sorted(SEL16_MEMBERS)
            out["out_sel16"] = SEL16_MEMBERS[m16[crc16_arc(sel_in) % len(m16)]]
            m32 = sorted(SEL32_MEMBERS)
            out["out_sel32"] = SEL32_MEMBERS[m32[zlib.crc32(sel_in) % len(m32)]]
        elif k["k16"] == 2:
            out["out_sel16"], out["out_sel32"] = SEL16_MEMBERS[2], SEL32_MEMBERS[6]
        action, value = SWITCH.get(k["o8"], self.switch_default)
        out["sw_tag"] = {"act_a": 0xA, "act_b": 0xB}.get(action, 0xD)
        out["sw_value"] = value
        if k["k16"] in HIT:
            out["hit_tag"] = 1
            out["out_hit"] = HIT[k["k16"]][1]
        else:
            out["hit_tag"] = 2
        return out


# --- control plane --------------------------------------------------------------------------

def _ternary_match(t1, t2) -> dict:
    m = {}
    if t1:
        m["hdr.tbl.t1"] = t1
    if t2:
        m["hdr.tbl.t2"] = t2
    return m


def _meter_entry(s: Setup, t1, t2, prio: int, cfg) -> p4runtime_pb2.DirectMeterEntry:
    e = p4runtime_pb2.DirectMeterEntry(table_entry=s.p4info.table_entry(
        "TblIngress.t_ternary", _ternary_match(t1, t2), action="TblIngress.set_ternary",
        params={"v": 0}, priority=prio))
    e.table_entry.ClearField("action")
    if cfg is not None:
        e.config.cir, e.config.cburst, e.config.pir, e.config.pburst = cfg
    return e


def _setup(s: Setup) -> None:
    p = s.p4info
    T = "TblIngress."
    ents = [p.table_entry(T + "fwd", {"standard_metadata.ingress_port": 1}, action=T + "set_port",
                          params={"port": 2})]
    ents += [p.table_entry(T + "t_exact", {"hdr.tbl.k16": k}, action=T + "set_exact", params={"v": v})
             for k, v in EXACT.items()]
    ents += [p.table_entry(T + "t_lpm", {"hdr.tbl.k32": (v, plen)} if plen else {}, action=T + "set_lpm",
                           params={"v": o}) for v, plen, o in LPM]
    ents += [p.table_entry(T + "t_ternary", _ternary_match(t1, t2), action=T + "set_ternary", params={"v": o},
                           priority=prio) for prio, t1, t2, o, _ in TERNARY]
    ents += [p.table_entry(T + "t_range", {"hdr.tbl.r16": (lo, hi)}, action=T + "set_range", params={"v": o},
                           priority=prio) for prio, lo, hi, o in RANGE]
    ents += [p.table_entry(T + "t_optional", {"hdr.tbl.o8": v} if v is not None else {},
                           action=T + "set_optional", params={"v": o}, priority=prio) for prio, v, o in OPTIONAL]
    ents += [p.table_entry(T + "t_constdef", {"hdr.tbl.k16": k}, action=T + "set_constdef", params={"v": v})
             for k, v in CONSTDEF.items()]
    ents += [p.table_entry(T + "t_defparam", {"hdr.tbl.k32": k}, action=T + "set_defparam", params={"v": v})
             for k, v in DEFPARAM.items()]
    ents += [p.profile_member(T + "prof", m, T + "set_prof", v=v) for m, v in PROF_MEMBERS.items()]
    ents += [p.profile_member(T + "sel16", m, T + "set_sel16", v=v) for m, v in SEL16_MEMBERS.items()]
    ents += [p.profile_member(T + "sel32", m, T + "set_sel32", v=v) for m, v in SEL32_MEMBERS.items()]
    ents += [p.profile_group(T + "sel16", 10, sorted(SEL16_MEMBERS), max_size=8),
             p.profile_group(T + "sel32", 10, sorted(SEL32_MEMBERS), max_size=8)]
    ents += [p.table_entry(T + "t_prof", {"hdr.tbl.k16": k}, member_id=m) for k, m in PROF.items()]
    ents += [p.table_entry(T + "t_sel16", {"hdr.tbl.k16": 1}, group_id=10),
             p.table_entry(T + "t_sel16", {"hdr.tbl.k16": 2}, member_id=2),
             p.table_entry(T + "t_sel32", {"hdr.tbl.k16": 1}, group_id=10),
             p.table_entry(T + "t_sel32", {"hdr.tbl.k16": 2}, member_id=6)]
    ents += [p.table_entry(T + "t_switch", {"hdr.tbl.o8": k}, action=T + a, params={"v": v} if a != "nop" else {})
             for k, (a, v) in SWITCH.items()]
    ents += [p.table_entry(T + "t_hit", {"hdr.tbl.k16": k}, action=T + a, params={"v": v} if a != "nop" else {})
             for k, (a, v) in HIT.items()]
    s.insert(*ents)
    s.modify(*[_meter_entry(s, t1, t2, prio, cfg) for prio, t1, t2, _, cfg in TERNARY if cfg])


def _change_defaults(s: Setup) -> bytes:
    """New default parameters, a changed profile member, a new default action for t_switch."""
    p = s.p4info
    T = "TblIngress."
    s.modify(p.table_entry(T + "t_defparam", action=T + "set_defparam", params={"v": 0x5678}, default=True),
             p.profile_member(T + "prof", 1, T + "set_prof", v=0x0A11),
             p.table_entry(T + "t_switch", action=T + "act_b", params={"v": 0x0BAD}, default=True))
    return b"changed"


def _read_state(s: Setup) -> bytes:
    """Direct counters of t_exact (packets, bytes per entry) and meter configs of t_ternary."""
    p = s.p4info
    lines = []
    for k in sorted(EXACT):
        e = p4runtime_pb2.DirectCounterEntry(table_entry=p.table_entry(
            "TblIngress.t_exact", {"hdr.tbl.k16": k}, action="TblIngress.nop"))
        e.table_entry.ClearField("action")
        (got,) = s.read(e)
        d = got.direct_counter_entry.data
        lines.append(f"c_exact[{k:#x}] {d.packet_count} {d.byte_count}")
    for prio, t1, t2, _, _ in TERNARY:
        (got,) = s.read(_meter_entry(s, t1, t2, prio, None))
        c = got.direct_meter_entry.config
        lines.append(f"m_ternary[{prio}] {c.cir} {c.cburst} {c.pir} {c.pburst}")
    return "\n".join(lines).encode()


# --- packets --------------------------------------------------------------------------------

KEYSETS_1 = [
    dict(k16=1, k32=0x0A010203, t1=0x12, t2=0x8000, r16=0, o8=1),
    dict(k16=0xFFFF, k32=0x0A0102FF, t1=0x1F, t2=0x0000, r16=1, o8=2),
    dict(k16=0, k32=0x0AFFFFFF, t1=0x10, t2=0xFFFF, r16=50, o8=3),
    dict(k16=2, k32=0x0B000000, t1=0x20, t2=0x8001, r16=100, o8=4),
    dict(k16=3, k32=0xFFFFFFFF, t1=0x00, t2=0x7FFF, r16=101, o8=5),
    dict(k16=0x8000, k32=0, t1=0xFF, t2=0xFFFF, r16=0xFFFF, o8=0x0A),
    dict(k16=1, k32=7, t1=0x11, t2=0x8000, r16=49, o8=0x0B),
    dict(k16=2, k32=0x0A010000, t1=0x12, t2=0, r16=2, o8=0x0D),
    dict(k16=1, k32=0x0A000001, t1=0x00, t2=0x8123, r16=0xFFFE, o8=0xFF),
    dict(k16=1, k32=0x0A01FFFF, t1=0x1A, t2=0xC000, r16=75, o8=0),
    dict(k16=0xFFFF, k32=0x09FFFFFF, t1=0x80, t2=0x8000, r16=3, o8=0x0A),
] + [dict(k16=1, k32=0x01000000 * i + 0x00345678 * i, t1=0x40, t2=(0x1D3 * i) & 0xFFFF, r16=200, o8=9)
     for i in range(1, 13)]          # flows through the selector groups
KEYSETS_2 = [
    dict(k16=1, k32=7, t1=0x12, t2=0x8000, r16=0, o8=0x0C),
    dict(k16=2, k32=8, t1=0x13, t2=0x8000, r16=1, o8=0x0B),
    dict(k16=0, k32=0x0A010203, t1=0x10, t2=0x8000, r16=0, o8=0x0E),
]
TRAILER = b"\x01\x02\x03"
PACKETS = ([Send(1, _frame(**k) + TRAILER) for k in KEYSETS_1] + [Step(_change_defaults)]
           + [Send(1, _frame(**k) + TRAILER) for k in KEYSETS_2] + [Step(_read_state)]
           + [Send(2, _frame(k16=1), expect_nothing=True)])          # no fwd entry: dropped


def _expect(outputs) -> None:
    model = Model()
    steps = 0
    for i, pkt in enumerate(PACKETS[:-1]):
        got = outputs[i]
        if isinstance(pkt, Step):
            steps += 1
            if pkt.run is _change_defaults:
                assert got == [(CONTROL, b"changed")]
                model.defparam_default = 0x5678
                model.prof_members[1] = 0x0A11
                model.switch_default = ("act_b", 0x0BAD)
            else:
                length = 14 + TBL.size + len(TRAILER)
                want = [f"c_exact[{k:#x}] {model.hits[k]} {model.hits[k] * length}" for k in sorted(EXACT)]
                want += [f"m_ternary[{prio}] {' '.join(map(str, cfg))}" if cfg else f"m_ternary[{prio}] 0 0 0 0"
                         for prio, _, _, _, cfg in TERNARY]
                assert got == [(CONTROL, "\n".join(want).encode())], f"step {i}: {got}"
            continue
        assert [p for p, _ in got] == [2], f"packet {i}: {got}"
        frame = got[0][1]
        keys = {k: v for k, v in TBL.unpack(pkt.frame[14:]).items() if k in KEYS}
        want = model.outputs(keys)
        have = TBL.unpack(frame[14:])
        bad = {k: (hex(have[k]), hex(v)) for k, v in want.items() if have[k] != v}
        assert not bad, f"packet {i} {keys}: (got, want) {bad}"
        assert frame[14 + TBL.size:] == TRAILER
    assert steps == 2
    assert outputs[-1] == []


SCENARIOS = [Scenario("tables", "tables", PACKETS, setup=_setup, expect=_expect)]


# --- selector groups as PI programs them into BMv2 -------------------------------------------
#
# PI gives a member of weight w in some group w BMv2 member handles: it creates the missing
# ones while it walks the new membership in member-id order (whatever the order of the
# request), and once the update is done deletes the copies no group needs any more. BMv2
# hands out the lowest free handle and picks ``members_sorted_by_handle[hash % size]``.
# The member order after each step below is worked out by hand from those rules.

UPD_MEMBERS = {30: 0x0030, 10: 0x0010, 20: 0x0020, 40: 0x0040, 50: 0x0050}


def _group(s: Setup, members: list[tuple[int, int]]) -> p4runtime_pb2.ActionProfileGroup:
    g = p4runtime_pb2.ActionProfileGroup(action_profile_id=s.p4info.action_profile_id("TblIngress.sel16"),
                                         group_id=1, max_size=8)
    for m, w in members:
        g.members.add(member_id=m, weight=w)
    return g


def _member(s: Setup, m: int) -> p4runtime_pb2.ActionProfileMember:
    return s.p4info.profile_member("TblIngress.sel16", m, "TblIngress.set_sel16", v=UPD_MEMBERS[m])


def _upd_setup(s: Setup) -> None:
    p = s.p4info
    s.insert(p.table_entry("TblIngress.fwd", {"standard_metadata.ingress_port": 1},
                           action="TblIngress.set_port", params={"port": 2}),
             *[_member(s, m) for m in (30, 10, 20)],                  # handles 0, 1, 2
             _group(s, [(30, 1), (20, 1), (10, 1)]))
    s.insert(p.table_entry("TblIngress.t_sel16", {"hdr.tbl.k16": 1}, group_id=1))


def _upd_weights(s: Setup) -> bytes:
    # 10 -> weight 2 (new handle 3), 20 -> weight 3 (new handles 4, 5), 30 leaves the group;
    # the request lists 20 first, PI still serves 10 first
    s.modify(_group(s, [(20, 3), (10, 2)]))
    return b"weights"


def _upd_shrink(s: Setup) -> bytes:
    # 40 gets handle 6; back to weight 1 for 10 and 20 out: handles 3, 4, 5 are freed
    s.insert(_member(s, 40))
    s.modify(_group(s, [(40, 1), (10, 1)]))
    return b"shrink"


def _upd_reuse(s: Setup) -> bytes:
    # 50 takes the lowest free handle, 3: it sorts before 40 (6)
    s.insert(_member(s, 50))
    s.modify(_group(s, [(50, 1), (40, 1), (10, 1)]))
    return b"reuse"


# member order (by BMv2 handle) after each step
UPD_ORDERS = [[30, 10, 20], [10, 20, 10, 20, 20], [10, 40], [10, 50, 40]]
UPD_FLOWS = [dict(k16=1, k32=0x0A000000 + 0x10101 * i, t2=(0x3A7 * i) & 0xFFFF) for i in range(8)]
UPD_PACKETS = []
for _step in (None, _upd_weights, _upd_shrink, _upd_reuse):
    if _step:
        UPD_PACKETS.append(Step(_step))
    UPD_PACKETS += [Send(1, _frame(**k)) for k in UPD_FLOWS]


def _upd_expect(outputs) -> None:
    phase = -1
    for i, pkt in enumerate(UPD_PACKETS):
        if isinstance(pkt, Step):
            assert len(outputs[i]) == 1 and outputs[i][0][0] == CONTROL
            continue
        if i == 0 or isinstance(UPD_PACKETS[i - 1], Step):
            phase += 1
        order = UPD_ORDERS[phase]
        k = TBL.unpack(pkt.frame[14:])
        h = crc16_arc(((k["k32"] << 16) | k["t2"]).to_bytes(6, "big"))
        assert [p for p, _ in outputs[i]] == [2], f"packet {i}: {outputs[i]}"
        got = TBL.unpack(outputs[i][0][1][14:])["out_sel16"]
        assert got == UPD_MEMBERS[order[h % len(order)]], \
            f"packet {i} (phase {phase}, hash {h:#x}): member value {got:#x}, " \
            f"want {UPD_MEMBERS[order[h % len(order)]]:#x}"


SCENARIOS.append(Scenario("tables_selector_updates", "tables", UPD_PACKETS, setup=_upd_setup, expect=_upd_expect))
