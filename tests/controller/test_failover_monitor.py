"""Failure handling without a fabric: the port state machine, heartbeat frames, localisation
and the failover entries (controller/failover/)."""
from __future__ import annotations

import pytest

from controller.fabric_controller import Pipeline
from controller.failover import HeartbeatConfig
from controller.failover.entries import (
    FAILOVER,
    PORT_STATUS,
    backups,
    failover_entities,
    port_down,
)
from controller.failover.heartbeat import Heartbeat, decode, encode
from controller.failover.localise import Failure, down_links, fabric_links, localise
from controller.failover.monitor import LATENESS_MARGIN, LATENESS_ROUNDS, MAX_STRETCH, PortMonitor
from controller.routing import compute_forwarding
from controller.topology import TopologyModel
from topologies.fabric import fat_tree

CFG = HeartbeatConfig(interval_ms=10, multiplier=3, recover_after=3, grace_ms=100)
A, B = ("s1", 1), ("s2", 1)


def test_port_dies_after_multiplier_silent_intervals_not_before():
    mon = PortMonitor({A: B, B: A}, CFG, now=0.0)
    t, seq = 0.0, 0
    while t < 0.5:                       # both heard every interval: never dead
        t += 0.01
        seq += 1
        mon.heard(A, t, seq)
        mon.heard(B, t, seq)
        assert mon.check(t) == []
    last = t
    for i in (1, 2, 3):                  # A silent for 3 intervals: not yet
        mon.heard(B, last + 0.01 * i - 0.001, seq + i)
        assert mon.check(last + 0.01 * i - 0.001) == []
    changes = mon.check(last + 0.039)
    assert [(c.port, c.alive) for c in changes] == [(A, False)]
    assert changes[0].last_heard == last
    assert mon.dead() == {A}
    for i in range(5):
        mon.check(last + 0.05 + 0.01 * i)
    assert mon.dead() == {A, B}


def test_a_starved_ticker_does_not_blame_the_links():
    mon = PortMonitor({A: B}, CFG, now=0.0)
    mon.heard(A, 0.0, 1)
    assert mon.check(5.0) == []           # one round after a long stall: nothing was sent meanwhile
    assert mon.check(5.01) == [] and mon.check(5.02) == []
    assert [c.alive for c in mon.check(5.03)] == [False]


def test_late_heartbeats_stretch_detection_instead_of_killing_a_healthy_port():
    """Heartbeats that arrive 50 ms after they were sent, A's in clumps 60 ms apart (twice the
    30 ms detection time): A stays alive. Cut, it dies once silent for 30 ms + twice the lateness,
    and the verdict says by how much it was stretched; once heartbeats are on time again for
    LATENESS_ROUNDS rounds, detection is back to 30 ms."""
    mon = PortMonitor({A: B, B: A}, CFG, now=0.0)
    t, seq = 0.0, 0
    for _ in range(60):                          # 0.6 s: rounds every 10 ms, A's delivered 6 at a time
        t += 0.01
        seq += 1
        mon.heard(B, t, seq, late=0.05)
        if seq % 6 == 0:
            for s_ in range(seq - 5, seq + 1):
                mon.heard(A, t, s_, late=0.05 + 0.01 * (seq - s_))
        assert mon.check(t) == [], f"round {seq}: a port found dead although its heartbeats only came late"
    assert mon.lateness == pytest.approx(0.10)
    cut = t                                      # A's link cut: B still hears, as late as A's were
    while not mon.dead():
        t += 0.01
        seq += 1
        mon.heard(B, t, seq, late=0.10)
        changes = mon.check(t)
    assert [(c.port, c.alive) for c in changes] == [(A, False)]
    assert changes[0].stretched == pytest.approx(LATENESS_MARGIN * 0.10)
    assert 0.03 + 0.20 < t - cut <= 0.03 + 0.20 + 0.011
    mon = PortMonitor({A: B, B: A}, CFG, now=0.0)   # on time: no stretch, the stated 30 ms
    t, seq = 0.0, 0
    for late in [0.05] * 5 + [0.0] * LATENESS_ROUNDS:
        t += 0.01
        seq += 1
        mon.heard(A, t, seq, late)
        mon.heard(B, t, seq, late)
        mon.check(t)
    assert mon.lateness == 0.0
    cut = t
    while not mon.dead():
        t += 0.01
        seq += 1
        mon.heard(B, t, seq)
        changes = mon.check(t)
    assert changes[0].stretched == 0.0 and t - cut <= 0.03 + 0.011


def test_the_stretch_is_capped():
    mon = PortMonitor({A: B, B: A}, CFG, now=0.0)
    mon.heard(A, 0.0, 1, late=60.0)
    mon.heard(B, 0.0, 1, late=60.0)
    assert mon.lateness == 60.0
    t = 0.0
    while not mon.dead():
        t += 0.01
        mon.heard(B, t, round(t / 0.01) + 1, late=60.0)
        changes = mon.check(t)
    assert changes[0].stretched == MAX_STRETCH * CFG.detect_s


def test_moves_off_a_port_still_heard_are_spurious_and_raise_the_link_timeout():
    from controller.failover.link_timeout import MAX_TIMEOUT_US, VERDICT_WAIT_S, Skips, lowered, raised

    C = ("s3", 1)
    heard_round = {A: 0, B: 0, C: 0}                  # the newest round heard on each port
    changed: set = set()                              # ports whose state changed
    skips = Skips()

    def reading(t: float, moved: dict, round_sent: int) -> dict:
        skips.read(moved, round_sent, t)
        return skips.spurious(lambda p, r: heard_round[p] > r, lambda p, since: p in changed, t)

    assert reading(0.0, {A: 10, B: 0, C: 5}, 1) == {}                      # the first reading: nothing moved yet
    assert reading(2.0, {A: 25, B: 7, C: 5}, 3) == {}                      # A and B moved; no later round heard yet
    heard_round[A] = 2                                                     # a round sent before the reading: no proof
    assert reading(4.0, {A: 25, B: 7, C: 5}, 5) == {}
    heard_round[A] = 4                                                     # heard late, two readings on: still judged
    assert reading(6.0, {A: 25, B: 7, C: 5}, 7) == {A: 0.0}
    changed.add(B)                                                         # B was found dead: its moves were real
    heard_round[B] = 9
    assert reading(8.0, {A: 25, B: 7, C: 5}, 9) == {} and skips.waiting == {}
    assert reading(10.0, {A: 25, B: 7, C: 6}, 11) == {}                    # C moved, never heard again
    assert reading(10.0 + VERDICT_WAIT_S + 2.1, {A: 25, B: 7, C: 6}, 13) == {} and skips.waiting == {}
    assert raised(30_000) == 60_000 and raised(400_000) == MAX_TIMEOUT_US == raised(MAX_TIMEOUT_US)
    assert lowered(480_000, 30_000) == 240_000 and lowered(50_000, 30_000) == 30_000 == lowered(30_000, 30_000)


TRIANGLE = {("s1", 1): ("s2", 1), ("s2", 1): ("s1", 1), ("s1", 2): ("s3", 1), ("s3", 1): ("s1", 2),
            ("s2", 2): ("s3", 2), ("s3", 2): ("s2", 2)}


def _round(t: float) -> int:
    """The heartbeat round sent at time t (one every 10 ms)."""
    return round(t / 0.01)


def _rounds(mon: PortMonitor, t: float, n: int, heard, unreachable=frozenset()) -> float:
    """n heartbeat rounds from t: the ports for which heard(port, peer) is true hear theirs."""
    for _ in range(n):
        t += 0.01
        for key, peer in TRIANGLE.items():
            if heard(key, peer):
                mon.heard(key, t, _round(t))
        mon.check(t, unreachable)
    return t


def test_only_a_port_s_own_silence_kills_it():
    # a triangle s1-s2-s3: s1 port 1 <-> s2 port 1, s1 port 2 <-> s3 port 1, s2 port 2 <-> s3 port 2
    everyone = lambda key, peer: True  # noqa: E731
    mon = PortMonitor(TRIANGLE, CFG, now=0.0)
    t = _rounds(mon, 0.0, 20, everyone)
    t = _rounds(mon, t, 10, lambda key, peer: key[0] != "s1")       # s1's stream stalls
    t = _rounds(mon, t, 20, everyone)
    t = _rounds(mon, t, 10, lambda key, peer: peer[0] != "s2")      # s2's sends stall
    assert mon.dead() == set()
    t = _rounds(mon, t, 20, everyone)
    # s2 killed: its session is down and nobody hears it; only its neighbours' ports die
    t = _rounds(mon, t, 10, lambda key, peer: "s2" not in (key[0], peer[0]), unreachable=frozenset({"s2"}))
    assert mon.dead() == {("s1", 1), ("s3", 2)}
    mon = PortMonitor(TRIANGLE, CFG, now=0.0)
    t = _rounds(mon, 0.0, 20, everyone)
    t = _rounds(mon, t, 10, lambda key, peer: {key[0], peer[0]} != {"s1", "s3"})   # link s1-s3 cut
    assert mon.dead() == {("s1", 2), ("s3", 1)}


def test_a_stalled_switch_flushing_its_backlog_port_by_port_kills_nothing():
    # s1 hears nothing for 10 rounds (its stream stalls), then its backlog arrives in a burst,
    # each round's heartbeat on port 2 two rounds ahead of port 1's, checks in between: by
    # arrival time port 2 was heard well after port 1 fell silent; by round it was not
    mon = PortMonitor(TRIANGLE, CFG, now=0.0)
    t = _rounds(mon, 0.0, 20, lambda key, peer: True)
    stalled_from = _round(t)
    t = _rounds(mon, t, 10, lambda key, peer: key[0] != "s1")
    backlog = list(range(stalled_from + 1, _round(t) + 1))
    for seq in backlog + [backlog[-1] + 1, backlog[-1] + 2]:
        if seq in backlog:
            mon.heard(("s1", 2), t, seq)
        if seq - 2 in backlog:
            mon.heard(("s1", 1), t, seq - 2)
        t += 0.0001
        assert mon.check(t) == []
    assert mon.dead() == set()
    # a port whose link is cut while its switch's other port keeps hearing still dies
    t = _rounds(mon, t, 10, lambda key, peer: key != ("s1", 1))
    assert ("s1", 1) in mon.dead()


def test_grace_at_start_and_recovery_needs_heartbeats_in_a_row():
    mon = PortMonitor({A: B}, CFG, now=0.0)
    for t in (0.02, 0.04, 0.06, 0.08, 0.09):
        assert mon.check(t) == []                     # grace period
    assert [c.alive for c in mon.check(0.11)] == [False]
    mon.heard(A, 1.0, 100)
    mon.heard(A, 1.2, 120)                            # too far apart: not in a row
    assert mon.check(1.2) == []
    mon.heard(A, 1.21, 121)
    assert mon.check(1.21) == []                      # two in a row
    mon.heard(A, 1.22, 122)
    changes = mon.check(1.22)
    assert [(c.port, c.alive) for c in changes] == [(A, True)]
    assert mon.is_alive(A)
    assert mon.check(1.22 + 0.029) == []              # alive: a fresh detection window


def test_unknown_ports_are_ignored_and_bad_settings_named():
    mon = PortMonitor({A: B}, CFG, now=0.0)
    mon.heard(("nowhere", 9), 0.0, 1)
    assert mon.ports == [A]
    with pytest.raises(ValueError, match="multiplier"):
        HeartbeatConfig(multiplier=0)
    with pytest.raises(ValueError, match="interval_ms"):
        HeartbeatConfig(interval_ms=0)


def test_heartbeat_frame_round_trip_and_foreign_frames():
    beat = Heartbeat(device_id=7, port=3, seq=2**32 + 5, sent_ns=123456789)
    frame = encode(beat, "00:00:00:00:00:01", "00:00:00:00:00:02")
    assert len(frame) == 60 and frame[12:14] == b"\x88\xb5"
    assert decode(frame) == Heartbeat(7, 3, 5, 123456789)
    assert decode(frame[:20]) is None
    assert decode(frame[:12] + b"\x08\x00" + frame[14:]) is None      # another ether type
    assert decode(frame[:14] + b"XXXXXX" + frame[20:]) is None        # not our magic


def test_localisation_names_a_switch_when_all_its_links_are_down():
    model = TopologyModel(fat_tree(4))
    links = fabric_links(model)
    assert len(links) == 32
    agg = [l for l in links if "p1a0" in (l.a, l.b)]
    assert len(agg) == 4
    dead = {(l.a, l.a_port) if l.a == "p1a0" else (l.b, l.b_port) for l in agg}
    assert localise(links, down_links(links, dead)) == [Failure("switch", "p1a0", tuple(sorted(l.name for l in agg)))]
    one = agg[0]
    failures = localise(links, down_links(links, {one.ends()[1]}))   # one end is enough
    assert failures == [Failure("link", one.name, (one.name,))]
    assert localise(links, []) == []


def test_failover_entries_back_every_member_with_another_of_its_group():
    model = TopologyModel(fat_tree(4))
    state = compute_forwarding(model)["p0e0"]
    b = backups(state)
    multi = {nid: hops for nid, hops in state.next_groups.items() if len(hops) > 1}
    assert multi, "an edge switch has uplink groups"
    for nid, hops in multi.items():
        ports = {h.port for h in hops}
        for port in ports:
            assert b[(nid, port)].port in ports - {port}
    assert all(len(state.next_groups[nid]) > 1 for nid, _ in b)
    p4info = Pipeline.from_build_dir().p4info
    ents = [*failover_entities(p4info, state), port_down(p4info, 3)]
    tables = [p4info.name_of(e.table_entry.table_id) for e in ents]
    assert tables.count(PORT_STATUS) == 1 and tables.count(FAILOVER) == len(b)
