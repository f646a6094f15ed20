"""queueing.p4: the queueing metadata egress sees, under no load, bursts, a rate and a depth.

Egress inserts header `q` after Ethernet with enq_qdepth, deq_qdepth, enq_timestamp,
deq_timedelta, the global timestamps and qid. Timestamps and queue depths under a burst
depend on timing, so the comparison with BMv2 blanks them (`_normalise`), and for bursts
compares which frames left, not how many (BMv2's ingress and egress threads race: a burst
into a short queue loses one packet more or less, and even a full-rate burst of 40 into 64
places sometimes loses some). `_expect` checks them on softswitch instead: an idle queue
reports depth 0; timestamps are microseconds that move forward (ingress <= enqueue <=
egress, egress - enqueue = deq_timedelta); a burst at full rate leaves without a drop; at
200 packets/s departures are at least 5 ms apart and the queue builds up; with a depth of 4
the first packet of a burst leaves at once, four wait and the rest is dropped. Queue rate and depth are set as with
simple_switch_CLI (softswitch: softswitch-ctl). Priority queues (both targets run with
`--priority-queues 8`): a frame of priority 7 sent right behind a burst queued at 50 packets/s
leaves from its own empty queue (qid 7, depth 0) ahead of most of the burst; BMv2 must report the
same queue ids.
"""
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

Q = Layout(("enq_qdepth", 32), ("deq_qdepth", 32), ("enq_timestamp", 32), ("deq_timedelta", 32),
           ("ingress_global_timestamp", 48), ("egress_global_timestamp", 48), ("qid", 8), ("ether_type", 16))
Q_AT = 14
RATE_PPS = 200
PRIO_RATE_PPS = 50
PRIO_PORT = 5            # frames in here leave port 2 at priority 7


def _setup(s: Setup) -> None:
    s.insert(*[s.p4info.table_entry("QIngress.fwd", {"standard_metadata.ingress_port": i},
                                    action="QIngress.set_port", params={"port": o}) for i, o in ((1, 2), (3, 4))])
    s.insert(s.p4info.table_entry("QIngress.fwd", {"standard_metadata.ingress_port": PRIO_PORT},
                                  action="QIngress.set_port_priority", params={"port": 2, "priority": 7}))


def _cli(*commands: str) -> Step:
    def run(s: Setup) -> bytes:
        s.switch_cli(*commands)
        return " / ".join(commands).encode()
    return Step(run)


def _frame(n: int = 0) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2", id=n)
               / UDP(sport=1000 + n, dport=2000) / b"queue me")


SINGLES = [Send(1, _frame(i)) for i in range(4)] + [
    Send(1, raw(Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:01") / ARP(pdst="10.0.0.9"))),
    Send(3, raw(Ether(dst="00:00:00:00:00:04", type=0x88B5)) + b"x" * 30),
    Send(2, _frame(9), expect_nothing=True),                    # no fwd entry for port 2
]
BURST_FULL = Send(1, _frame(100), repeat=40)
BURST_RATED = Send(1, _frame(200), repeat=10, count=10)
BURST_SHALLOW = Send(1, _frame(300), repeat=12)
BURST_PRIO = Send(1, _frame(500), repeat=8, after=((PRIO_PORT, _frame(600)),), count=9)
PACKETS = SINGLES + [
    BURST_FULL,
    _cli(f"set_queue_rate {RATE_PPS} 2"),
    BURST_RATED,
    _cli("set_queue_depth 4 2"),
    BURST_SHALLOW,
    _cli("set_queue_rate 0 2", "set_queue_depth 64 2"),
    Send(1, _frame(400)),
    Send(3, raw(Ether(dst="00:00:00:00:00:04", type=0x88B5)) + b"y" * 30),
    _cli(f"set_queue_rate {PRIO_RATE_PPS} 2"),
    BURST_PRIO,
    _cli("set_queue_rate 0 2"),
]


def _normalise(port: int, frame: bytes) -> bytes:
    """Blank the timing-dependent part of `q` (all but qid and ether_type)."""
    return frame[:Q_AT] + b"\0" * (Q.size - 3) + frame[Q_AT + Q.size - 3:] if len(frame) >= Q_AT + Q.size else frame


def _check_times(q: dict, where: str) -> None:
    assert q["ingress_global_timestamp"] <= q["enq_timestamp"] <= q["egress_global_timestamp"], f"{where}: {q}"
    delta = q["egress_global_timestamp"] - q["enq_timestamp"]
    assert 0 <= q["deq_timedelta"] and abs(delta - q["deq_timedelta"]) <= 1000, f"{where}: {q}"


def _expect(outputs) -> None:
    last_ingress = -1
    for i, pkt in enumerate(PACKETS):
        got = outputs[i]
        if isinstance(pkt, Step):
            assert len(got) == 1 and got[0][0] == CONTROL
            continue
        if pkt.expect_nothing:
            assert got == [], f"packet {i}: {got}"
            continue
        port = {1: 2, 3: 4}[pkt.port]
        # depth 4: the first packet of the burst leaves at once, four wait, the rest is dropped
        # (one more may leave while a loaded machine is still taking the burst in)
        want = (5, 6) if pkt is BURST_SHALLOW else (pkt.repeat + len(pkt.after),)
        assert len(got) in want and {p for p, _ in got} == {port}, f"packet {i}: {len(got)} frames, want {want}"
        qs = []
        for _, frame in got:
            q = Q.unpack(frame[Q_AT:])
            _check_times(q, f"packet {i}")
            sent = next((f for _, f in pkt.after if f[14:] == frame[Q_AT + Q.size:]), pkt.frame)
            assert q["qid"] == (7 if sent is not pkt.frame else 0), f"packet {i}: qid {q['qid']}"
            assert q["ether_type"] == int.from_bytes(sent[12:14], "big")
            assert frame[:12] == sent[:12] and frame[12:14] == b"\x88\xb5"
            assert frame[Q_AT + Q.size:] == sent[14:]
            qs.append(q)
        first = min(q["ingress_global_timestamp"] for q in qs)
        assert first > last_ingress, f"packet {i}: ingress timestamps go back ({first} after {last_ingress})"
        last_ingress = max(q["ingress_global_timestamp"] for q in qs)
        if pkt.repeat == 1:
            assert qs[0]["enq_qdepth"] == qs[0]["deq_qdepth"] == 0, f"packet {i}: idle queue {qs[0]}"
            assert qs[0]["deq_timedelta"] < 100_000, f"packet {i}: an idle queue held it {qs[0]['deq_timedelta']} us"
    # rate 200 pps: departures at least ~5 ms apart, and the queue built up
    rated = sorted((Q.unpack(f[Q_AT:]) for _, f in outputs[PACKETS.index(BURST_RATED)]),
                   key=lambda q: q["egress_global_timestamp"])
    span = rated[-1]["egress_global_timestamp"] - rated[0]["egress_global_timestamp"]
    assert span >= (len(rated) - 1) * 1e6 / RATE_PPS * 0.8, f"{len(rated)} departures within {span} us"
    assert max(q["enq_qdepth"] for q in rated) >= 5, [q["enq_qdepth"] for q in rated]
    assert rated[-1]["deq_timedelta"] >= 5 * 1e6 / RATE_PPS, rated[-1]
    # priority 7 behind a burst at 50 packets/s: out of its own empty queue at once, ahead of most
    # of the burst (which takes 140 ms to leave)
    burst = sorted((Q.unpack(f[Q_AT:]) for _, f in outputs[PACKETS.index(BURST_PRIO)]),
                   key=lambda q: q["egress_global_timestamp"])
    (prio,) = [q for q in burst if q["qid"] == 7]
    assert prio["enq_qdepth"] == 0 and prio["deq_timedelta"] < 1e6 / PRIO_RATE_PPS, prio
    behind = [q for q in burst if q["qid"] == 0 and q["egress_global_timestamp"] > prio["egress_global_timestamp"]]
    assert len(behind) >= 4, f"only {len(behind)} of the burst left after the priority frame"


SCENARIOS = [Scenario("queueing", "queueing", PACKETS, setup=_setup, normalise=_normalise, expect=_expect,
                      ports=PRIO_PORT)]
