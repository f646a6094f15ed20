"""queueing.p4 with a class's own settings, the way BMv2's CLI sets them (``set_queue_rate <pps>
<port> <priority>``): class 7 of port 2 alone at 50 packets/s, class 0 unlimited. Both targets
must send the same frames (compared as sets: BMv2's threads order a burst as they race); on
softswitch, class 0 leaves at once while class 7's n-th frame leaves n x 20 ms after its first or
later (their egress timestamps), and a port's setting is its classes' again (``set_queue_rate 0
2``). What BMv2 cannot express (a link its classes share, weights, a class's bit rate) is
test_softswitch_classes.py's."""
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios.queueing import PRIO_PORT, Q, Q_AT, _normalise, _setup
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

CLASS_RATE_PPS = 50


def _frame(n: int) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2", id=n)
               / UDP(sport=3000 + n, dport=2000) / b"class me")


def _cli(*commands: str) -> Step:
    def run(s: Setup) -> bytes:
        s.switch_cli(*commands)
        return " / ".join(commands).encode()
    return Step(run)


MIXED = Send(PRIO_PORT, _frame(700), after=(*((PRIO_PORT, _frame(701 + i)) for i in range(3)),
                                             *((1, _frame(i)) for i in range(4))), count=8)
PACKETS = [
    _cli(f"set_queue_rate {CLASS_RATE_PPS} 2 7"),
    MIXED,
    _cli("set_queue_rate 0 2"),
    Send(PRIO_PORT, _frame(800), after=((PRIO_PORT, _frame(801)), (PRIO_PORT, _frame(802)))),
]


def _expect(outputs) -> None:
    got = outputs[PACKETS.index(MIXED)]
    assert len(got) == 8 and {p for p, _ in got} == {2}, got
    qs = [Q.unpack(f[Q_AT:]) for _, f in got]
    high = sorted(q["egress_global_timestamp"] for q in qs if q["qid"] == 7)
    low = [q for q in qs if q["qid"] == 0]
    assert len(high) == 4 and len(low) == 4
    # the n-th frame leaves n intervals after the first at the earliest; one let out late does not
    # delay the next past its own time (a gap after a late one is shorter: the rate is kept)
    interval = 1e6 / CLASS_RATE_PPS
    since_first = [t - high[0] for t in high]
    assert all(t >= n * interval * 0.95 for n, t in enumerate(since_first)), \
        f"class 7 left {since_first} us after its first frame, not {interval:g} us apart or more"
    assert all(q["deq_timedelta"] < 10_000 for q in low), [q["deq_timedelta"] for q in low]
    # the port's rate is its classes' again: none of the three frames waited an interval in its
    # queue (their time in the queue, not their egress stamps: a busy machine spreads their arrival)
    waited = [Q.unpack(f[Q_AT:])["deq_timedelta"] for _, f in outputs[-1]]
    assert len(waited) == 3 and max(waited) < interval, f"the port's rate is its classes' again: {waited} us queued"
    assert all(o[0][0] == CONTROL for o, p in zip(outputs, PACKETS) if isinstance(p, Step))


SCENARIOS = [Scenario("classes", "queueing", PACKETS, setup=_setup, normalise=_normalise, expect=_expect,
                      ports=PRIO_PORT)]
