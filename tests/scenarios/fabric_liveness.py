"""fabric.p4's port liveness (include/control/liveness.p4) and heartbeat punting (packetio.p4).

On top of fabric.py's control plane (ECMP group of ports 2, 3, 4 behind next id 2): a
heartbeat frame (ether type 0x88b5) arriving on a port goes to the CPU as it came, whatever its
destination MAC, and is never routed; a packet-out heartbeat leaves by its port. Then the
failover backups of group 2 are installed (2 -> 3, 3 -> 4, 4 -> 2) and port 3 marked dead: a flow
that ECMP puts on port 3 leaves by port 4 with port 4's MACs (TTL decremented once), the other
flows are untouched, a TE pin to port 3 is moved to port 4 too, and a single-member next id whose
port is dead has no backup (the packet goes out of the dead port, as nothing better exists).
Port 3 alive again: everything as before.
"""
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios import fabric as F
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

P = "FabricIngress.port_liveness."
DEAD = 3
BACKUP = {2: 3, 3: 4, 4: 2}
MEMBER_MAC = {port: mac for _, port, mac in F.GROUP}
HEARTBEAT = raw(Ether(dst="00:00:00:00:bb:02", src="00:00:00:00:cc:02", type=0x88B5) / (b"AIFHB1" + bytes(40)))
PIN_FLOW = F.udp4("10.0.1.1", "10.0.2.5", 4242)


def _failover(s: Setup) -> bytes:
    p = s.p4info
    s.insert(*[p.table_entry(P + "failover", {"next_id": 2, "port": port}, action=P + "reroute",
                             params={"port": backup, "smac": F.ROUTER, "dmac": MEMBER_MAC[backup]})
               for port, backup in BACKUP.items()],
             p.table_entry(P + "port_status", {"port": DEAD}, action=P + "port_down"),
             p.table_entry(P + "port_status", {"port": F.SINGLE[1]}, action=P + "port_down"))
    return b"port 3 dead"


def _pin(s: Setup) -> bytes:
    s.insert(s.p4info.table_entry("FabricIngress.te_override.te_override",
                                  {"ip_src": "10.0.1.1", "ip_dst": "10.0.2.5", "ip_proto": 17, "l4_sport": 4242,
                                   "l4_dport": 4791},
                                  action="FabricIngress.te_override.pin",
                                  params={"port": DEAD, "smac": F.ROUTER, "dmac": MEMBER_MAC[DEAD]}))
    return b"pinned to 3"


def _alive(s: Setup) -> bytes:
    s.delete(*[s.p4info.table_entry(P + "port_status", {"port": port}, action=P + "port_down")
               for port in (DEAD, F.SINGLE[1])])
    return b"port 3 alive"


def around_dead(frame: bytes) -> tuple[int, bytes]:
    """Where a routed frame leaves while port 3 is dead."""
    port, out = F.routed(frame)
    if port != DEAD:
        return port, out
    pkt = Ether(out)
    pkt[Ether].dst = MEMBER_MAC[BACKUP[DEAD]]
    return BACKUP[DEAD], raw(pkt)


def pinned(frame: bytes, port: int) -> tuple[int, bytes]:
    _, out = F.routed(frame)
    pkt = Ether(out)
    pkt[Ether].dst = MEMBER_MAC[port]
    return port, raw(pkt)


SINGLE_FLOW = F.udp4("10.0.2.7", "10.0.1.9", 5, port=2)
CASES = [
    (Send(2, HEARTBEAT), [F.packet_in(2, HEARTBEAT)]),
    (Send(4, HEARTBEAT), [F.packet_in(4, HEARTBEAT)]),
    (Send(None, HEARTBEAT, {"egress_port": 3}), [(3, HEARTBEAT)]),
    (Step(_failover), [(CONTROL, b"port 3 dead")]),
    (Send(3, HEARTBEAT), [F.packet_in(3, HEARTBEAT)]),          # a dead port still hears heartbeats
    *[(Send(1, f), [around_dead(f)]) for f in F.FLOWS4],
    *[(Send(1, f), [around_dead(f)]) for f in F.FLOWS6],
    (Send(2, SINGLE_FLOW), [F.routed(SINGLE_FLOW, single=True)]),
    (Step(_pin), [(CONTROL, b"pinned to 3")]),
    (Send(1, PIN_FLOW), [pinned(PIN_FLOW, BACKUP[DEAD])]),
    (Step(_alive), [(CONTROL, b"port 3 alive")]),
    (Send(1, PIN_FLOW), [pinned(PIN_FLOW, DEAD)]),
    *[(Send(1, f), [F.routed(f)]) for f in F.FLOWS4],
]
PACKETS = [send for send, _ in CASES]


def _expect(outputs) -> None:
    for i, ((send, want), got) in enumerate(zip(CASES, outputs)):
        assert got == sorted(want), f"packet {i}: got {got}\n want {sorted(want)}"
    dead_hits = [F.routed(f)[0] for f in F.FLOWS4 + F.FLOWS6].count(DEAD)
    assert dead_hits, "no flow of the scenario hashes to the dead port: the failover is not exercised"


SCENARIOS = [Scenario("fabric_liveness", "fabric", PACKETS, setup=F._setup, expect=_expect)]
