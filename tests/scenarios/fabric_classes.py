"""fabric.p4's traffic classes, on one switch (fabric_int's: port 1 host A, 2 the fabric, 3 host B,
4 the telemetry port): dscp_class maps a packet's DSCP, INT_DSCP_BIT cleared, to its class (its
egress priority queue); INT's hop carries the class as its queue id, at a source and at a transit
hop alike (a packet keeps its class along an INT path); a DSCP with no entry is class 0, as before
classes. ecn_class_config gives class 3 of the fabric port ECN thresholds of its own (Kmin = Kmax =
8) over the port's (ecn_config: 1000, never reached), against the depth of the class's own queue:
a burst of class 3 into the port drained at 100 packets/s is marked past its eighth packet, the
same burst in class 0 never is. Both targets must agree (BMv2's enq_qdepth is the priority
queue's too); bursts are compared as sets of frames."""
from controller.p4names import Action, Table
from scenarios.fabric_int import (FABRIC, NEIGHBOR, SWITCH_ID, Frame, _ce, _setup as _int_setup, int_in, normalise,
                                  routed, udp)
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

CLASSES = {26: 3, 10: 1}            # DSCP -> class
ECN_RATE_PPS, BURST = 100, 30


def _setup(s: Setup) -> None:
    _int_setup(s)
    i = s.p4info
    s.insert(*[i.table_entry(Table.TRAFFIC_CLASS_DSCP_CLASS, {"dscp": dscp}, action=Action.TRAFFIC_CLASS_SET_CLASS,
                             params={"tc": tc}) for dscp, tc in CLASSES.items()])
    s.modify(i.table_entry(Table.ECN_ECN_CONFIG, {"egress_port": FABRIC}, action=Action.ECN_SET_THRESHOLDS,
                           params={"kmin": 1000, "kmax": 1000, "pmax": 0xFFFF}))
    s.insert(i.table_entry(Table.ECN_ECN_CLASS_CONFIG, {"egress_port": FABRIC, "priority": 3},
                           action=Action.ECN_SET_THRESHOLDS, params={"kmin": 8, "kmax": 8, "pmax": 0xFFFF}))


def _cli(*commands: str) -> Step:
    def run(s: Setup) -> bytes:
        s.switch_cli(*commands)
        return " / ".join(commands).encode()
    return Step(run)


def _tos(dscp: int, ecn: int = 0) -> int:
    return dscp << 2 | ecn


# RoCEv2 to 10.0.2.0/24 is on the watchlist: this switch is the INT source, its hop the first
SOURCES = [Send(1, udp("10.0.2.9", sport=5000 + dscp, tos=_tos(dscp))) for dscp in (26, 10, 0, 14)]
TRANSIT = Send(1, int_in(udp("10.0.2.9", sport=6000, tos=_tos(26)), nhops=1, rhc=3))   # DSCP 26 | INT bit
CLASS3_BURST = Send(1, udp("10.0.2.9", dport=80, tos=_tos(26, 2)), repeat=BURST, count=BURST)
CLASS0_BURST = Send(1, udp("10.0.2.9", dport=81, tos=_tos(0, 2)), repeat=BURST, count=BURST)
PACKETS = [*SOURCES, TRANSIT, _cli(f"set_queue_rate {ECN_RATE_PPS} {FABRIC}"), CLASS3_BURST, CLASS0_BURST,
           _cli(f"set_queue_rate 0 {FABRIC}")]


def _expect(outputs) -> None:
    for pkt, want in zip([*SOURCES, TRANSIT], [3, 1, 0, 0, 3]):
        got = outputs[PACKETS.index(pkt)]
        assert [p for p, _ in got] == [FABRIC], got
        out = Frame(got[0][1])
        assert out.has_our_int(), got[0][1].hex()
        (hop, *_) = out.hops()
        assert hop["switch_id"] == SWITCH_ID and hop["qid"] == want, f"DSCP {Frame(pkt.frame).dscp}: hop {hop}"
    plain, marked = routed(CLASS3_BURST.frame, NEIGHBOR), _ce(routed(CLASS3_BURST.frame, NEIGHBOR))
    frames = [f for p, f in outputs[PACKETS.index(CLASS3_BURST)] if p == FABRIC]
    n_ce = frames.count(marked)
    assert len(frames) == BURST and set(frames) <= {plain, marked}
    assert BURST - n_ce >= 9 and n_ce >= BURST - 9 - 5, f"class 3: {n_ce} of {BURST} marked"
    assert outputs[PACKETS.index(CLASS0_BURST)] == [(FABRIC, routed(CLASS0_BURST.frame, NEIGHBOR))] * BURST
    assert all(o[0][0] == CONTROL for o, p in zip(outputs, PACKETS) if isinstance(p, Step))


SCENARIOS = [Scenario("fabric_classes", "fabric", PACKETS, setup=_setup, ports=4, normalise=normalise,
                      expect=_expect)]
