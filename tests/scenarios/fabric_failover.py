"""fabric.p4's failover: port liveness (include/control/failover.p4) and heartbeat punting (packetio.p4).

On top of fabric.py's control plane (ECMP group of ports 2, 3, 4 behind next id 2): a
heartbeat frame (ether type 0x88b5) arriving on a port goes to the CPU as it came, whatever its
destination MAC, and is never routed, while a container node's link-announce frame is neither
punted nor routed; a packet-out heartbeat leaves by its port. Then the
failover backups of group 2 are installed (2 -> 3, 3 -> 4, 4 -> 2) and port 3 marked dead: a flow
that ECMP puts on port 3 leaves by port 4 with port 4's MACs (TTL decremented once), the other
flows are untouched, a TE pin to port 3 is moved to port 4 too, and a single-member next id whose
port is dead has no backup (the packet goes out of the dead port, as nothing better exists).
Port 3 alive again: everything as before.

Then link heartbeats, with no controller in the loop: a generator frame arriving on port 254
leaves by the port it names, untouched; a link heartbeat heard on a port is consumed. With
every ECMP port in heartbeat_watch at a 1 us timeout, port 3 (heard, then silent for longer
than that since the latest heartbeat, heard on port 2) is dead and its flows take the backup,
while port 2 (just heard) stays in use. Heard in the order 4, 3, 2: port 3's flows stay on port
3 (its backup, port 4, is silent for longer), port 4's go to port 2; heard 4 then 2: port 3's
flows go to port 4 (silent for less long). Each port's timeout raised to a minute: alive again.
The failed_over counter has counted every packet moved off port 3 and off port 4.
"""
import ipaddress

from scapy.layers.l2 import Ether
from scapy.packet import raw

from aifabric.containers.container_node import Attachment, announce_frames

from controller.p4names import Action, Counter, Table
from scenarios import fabric as F
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step
from emulation.failover_heartbeat_generator import GEN_PORT
from emulation.failover_heartbeat_generator import frame as generator_frame

DEAD = 3
BACKUP = {2: 3, 3: 4, 4: 2}
MEMBER_MAC = {port: mac for _, port, mac in F.GROUP}
HEARTBEAT = raw(Ether(dst="00:00:00:00:bb:02", src="00:00:00:00:cc:02", type=0x88B5) / (b"AIFHB1" + bytes(40)))
PIN_FLOW = F.udp4("10.0.1.1", "10.0.2.5", 4242)
# what a container node sends on each link every 30 s to teach Docker's bridges its MAC
ANNOUNCE = announce_frames("00:00:00:00:cc:02", Attachment(2, "eth1", ipaddress.ip_interface("172.30.0.3/29"), "s1"))[0]


def _failover(s: Setup) -> bytes:
    p = s.p4info
    s.insert(*[p.table_entry(Table.PORT_FAILOVER_FAILOVER, {"next_id": 2, "port": port}, action=Action.PORT_FAILOVER_REROUTE,
                             params={"port": backup, "smac": F.ROUTER, "dmac": MEMBER_MAC[backup]})
               for port, backup in BACKUP.items()],
             p.table_entry(Table.PORT_FAILOVER_PORT_STATUS, {"port": DEAD}, action=Action.PORT_FAILOVER_PORT_DOWN),
             p.table_entry(Table.PORT_FAILOVER_PORT_STATUS, {"port": F.SINGLE[1]}, action=Action.PORT_FAILOVER_PORT_DOWN))
    return b"port 3 dead"


def _pin(s: Setup) -> bytes:
    s.insert(s.p4info.table_entry(Table.TE_OVERRIDE_TE_OVERRIDE,
                                  {"ip_src": "10.0.1.1", "ip_dst": "10.0.2.5", "ip_proto": 17, "l4_sport": 4242,
                                   "l4_dport": 4791},
                                  action=Action.TE_OVERRIDE_PIN,
                                  params={"port": DEAD, "smac": F.ROUTER, "dmac": MEMBER_MAC[DEAD]}))
    return b"pinned to 3"


def _alive(s: Setup) -> bytes:
    s.delete(*[s.p4info.table_entry(Table.PORT_FAILOVER_PORT_STATUS, {"port": port}, action=Action.PORT_FAILOVER_PORT_DOWN)
               for port in (DEAD, F.SINGLE[1])])
    return b"port 3 alive"


def around(frame: bytes, dead: list[int]) -> tuple[int, bytes]:
    """Where a routed frame leaves while ``dead`` ports (silent ones: the longest silent first)
    are dead: to the backup of its port, unless the backup is silent for longer (it stays)."""
    port, out = F.routed(frame)
    backup = BACKUP.get(port)
    if port not in dead or (backup in dead and dead.index(backup) < dead.index(port)):
        return port, out
    pkt = Ether(out)
    pkt[Ether].dst = MEMBER_MAC[BACKUP[port]]
    return BACKUP[port], raw(pkt)


def around_dead(frame: bytes) -> tuple[int, bytes]:
    """Where a routed frame leaves while port 3 is dead."""
    return around(frame, [DEAD])


def pinned(frame: bytes, port: int) -> tuple[int, bytes]:
    _, out = F.routed(frame)
    pkt = Ether(out)
    pkt[Ether].dst = MEMBER_MAC[port]
    return port, raw(pkt)


def _watch(timeout_us: int, update: str = "insert", port: int = DEAD):
    """Every ECMP port watched (insert), or ``port``'s timeout changed (modify)."""
    def step(s: Setup) -> bytes:
        getattr(s, update)(*[s.p4info.table_entry(Table.PORT_FAILOVER_HEARTBEAT_WATCH, {"port": p}, action=Action.PORT_FAILOVER_WATCH,
                                                  params={"timeout_us": timeout_us})
                             for p in ((port,) if update == "modify" else BACKUP)])
        return f"watch timeout {timeout_us} us".encode()
    return step


FLOWS = F.FLOWS4 + F.FLOWS6


def _heard(*ports: int) -> list:
    """A link heartbeat heard on each of ``ports`` in turn (consumed: nothing comes out)."""
    return [(Send(port, generator_frame(port), expect_nothing=True), []) for port in ports]


def _failed_over(s: Setup) -> bytes:
    cells = {e.counter_entry.index.index: e.counter_entry.data.packet_count
             for e in s.read(s.p4info.counter_entry(Counter.PORT_FAILOVER_FAILED_OVER))}
    return f"moved off 3: {cells.get(DEAD, 0)}, off 4: {cells.get(4, 0)}".encode()


def _moved_off() -> bytes:
    """failed_over's count by the end: every packet moved off port 3 or 4 by this scenario."""
    routed = [F.routed(f)[0] for f in FLOWS]
    off3 = routed.count(DEAD) + 1              # dead by port_status: the flows once, the TE pin once
    off3 += routed.count(DEAD)                 # silent, its backup silent for less long (for longer: stays)
    off4 = 3 * routed.count(4)                 # silent, its backup alive: three times
    return f"moved off 3: {off3}, off 4: {off4}".encode()


SINGLE_FLOW = F.udp4("10.0.2.7", "10.0.1.9", 5, port=2)
CASES = [
    (Send(2, HEARTBEAT), [F.packet_in(2, HEARTBEAT)]),
    (Send(4, HEARTBEAT), [F.packet_in(4, HEARTBEAT)]),
    (Send(2, ANNOUNCE, expect_nothing=True), []),              # a container's link announce: not a heartbeat
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
    (Send(GEN_PORT, generator_frame(DEAD)), [(DEAD, generator_frame(DEAD))]),
    (Send(GEN_PORT, generator_frame(2)), [(2, generator_frame(2))]),
    (Step(_watch(1)), [(CONTROL, b"watch timeout 1 us")]),
    *_heard(4, DEAD, 2),                    # silent: 4 the longest, then 3; 2 just heard
    *[(Send(1, f), [around(f, [4, DEAD])]) for f in FLOWS],
    *_heard(4, 2),                          # now 3 the longest, then 4
    *[(Send(1, f), [around(f, [DEAD, 4])]) for f in FLOWS],
    (Step(_watch(60_000_000, "modify")), [(CONTROL, b"watch timeout 60000000 us")]),
    *[(Send(1, f), [around(f, [4])]) for f in FLOWS],
    (Step(_watch(60_000_000, "modify", port=4)), [(CONTROL, b"watch timeout 60000000 us")]),
    *[(Send(1, f), [F.routed(f)]) for f in FLOWS],
    (Step(_failed_over), [(CONTROL, _moved_off())]),
]
PACKETS = [send for send, _ in CASES]


def _expect(outputs) -> None:
    for i, ((send, want), got) in enumerate(zip(CASES, outputs)):
        assert got == sorted(want), f"packet {i}: got {got}\n want {sorted(want)}"
    ports = {F.routed(f)[0] for f in FLOWS}
    assert {DEAD, 4} <= ports, f"flows hash to ports {sorted(ports)} only: failover from 3 and 4 is not exercised"


SCENARIOS = [Scenario("fabric_failover", "fabric", PACKETS, setup=F._setup, expect=_expect, extra_ports=(GEN_PORT,))]
