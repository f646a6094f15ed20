"""fabric.p4's in-network aggregation, packet by packet, against the reference aggregator.

One switch holds two jobs as p4src/README.md ("In-network aggregation") describes them: job 5
as the root of a tree with three workers on ports 1-3, job 6 below a parent on port 4 with two
workers on ports 1-2 (the switch is child 2 of that parent). The expected frames come from
hostagent.collectives.aggregation.aggregator (the parameter server's core): what the switch sends must be
what that model sends, with the addresses the contract gives (results to a worker port are
addressed to the worker, from the fallback aggregator's address; partial sums go to the
parent's MAC). Covered: a round completed and multicast; a retransmission before and after the
round is done; the other set; a new round on a done set; saturation; a partial sent up and
sent up again; a result from the parent stored and passed down, then answering a worker's
retransmission; a stale result; refused packets (slot beyond the job's range, worker id beyond
the fan-in, a result at the root, unknown job); the agg_ops counters.
"""
import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from controller.p4names import Action, Counter, Table
from hostagent.collectives.aggregation.aggregator import Aggregator, Dest, RejectedPacket
from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, AggHeader, AggPacket, PktType, pack_packet, unpack_packet
from scenarios.runner import Scenario, Send, Setup, Step

ROUTER = "00:00:00:00:aa:aa"
PARENT_MAC = "00:00:00:00:bb:04"
HOST_MAC = {1: "00:00:00:00:00:01", 2: "00:00:00:00:00:02", 3: "00:00:00:00:00:03"}
HOST_IP = {1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.3"}
PS_IP = "10.9.9.9"
ROOT_JOB, CHILD_JOB = 5, 6
SLOTS = 4
PARENT_PORT, INDEX_AT_PARENT = 4, 2
OUTCOMES = ("consumed", "completed", "partial_up", "result_down", "dup_answered", "dup_resent_up",
            "dup_dropped", "refused")


def _setup(s: Setup) -> None:
    from p4.v1 import p4runtime_pb2
    p = s.p4info
    s.insert(
        p.table_entry(Table.AGGREGATION_AGG_JOBS, {"job_id": ROOT_JOB}, action=Action.AGGREGATION_AGGREGATE_ROOT,
                      params={"epoch": 1, "slot_base": 10, "slot_count": SLOTS, "fan_in": 3, "group": 0x1005}),
        p.table_entry(Table.AGGREGATION_AGG_JOBS, {"job_id": CHILD_JOB}, action=Action.AGGREGATION_AGGREGATE_CHILD,
                      params={"epoch": 2, "slot_base": 20, "slot_count": SLOTS, "fan_in": 2, "group": 0x1006,
                              "parent_port": PARENT_PORT, "index_at_parent": INDEX_AT_PARENT,
                              "own_mac": ROUTER, "parent_mac": PARENT_MAC}),
        *[p.table_entry(Table.AGGREGATION_AGG_RESULT_DST, {"egress_port": port}, action=Action.AGGREGATION_TO_WORKER,
                        params={"smac": ROUTER, "dmac": HOST_MAC[port], "ipv4": HOST_IP[port]})
          for port in (1, 2, 3)],
    )
    for group, ports in ((0x1005, (1, 2, 3)), (0x1006, (1, 2))):
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = group
        for port in ports:
            pre.multicast_group_entry.replicas.add(egress_port=port, instance=1)
        s.insert(pre)


def _read_ops(s: Setup) -> bytes:
    lines = []
    for e in s.read(s.p4info.counter_entry(Counter.AGGREGATION_AGG_OPS)):
        c = e.counter_entry
        if c.data.packet_count:
            lines.append(f"{OUTCOMES[c.index.index]} {c.data.packet_count}")
    return "\n".join(sorted(lines)).encode()


# --- packets ----------------------------------------------------------------------------------

def _values(seed: int, big: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if big:
        return np.full(64, 0x7FFFFFF0, dtype=np.int32) - rng.integers(0, 4, 64).astype(np.int32)
    return rng.integers(-1 << 20, 1 << 20, 64).astype(np.int32)


def agg(port: int, job: int, slot: int, set_id: int, worker: int, seq: int, values: np.ndarray,
        pkt_type: PktType = PktType.CONTRIB, exponent: int = 127, src_ip: str | None = None) -> bytes:
    header = AggHeader(pkt_type, 0, job, slot, set_id, worker, 3, exponent, seq)
    src = HOST_MAC.get(port, PARENT_MAC)
    ip_src = src_ip or HOST_IP.get(port, "10.0.4.4")
    return raw(Ether(dst=ROUTER, src=src) / IP(src=ip_src, dst=PS_IP, id=port, ttl=64)
               / UDP(sport=AGG_UDP_PORT, dport=AGG_UDP_PORT, chksum=0) / pack_packet(header, values))


def _to_worker(frame: bytes, port: int, packet: AggPacket) -> bytes:
    pkt = Ether(frame)
    pkt[Ether].src, pkt[Ether].dst = ROUTER, HOST_MAC[port]
    pkt[IP].src, pkt[IP].dst = pkt[IP].dst, HOST_IP[port]
    del pkt[IP].chksum
    pkt[UDP].remove_payload()
    pkt[UDP].chksum = 0
    return raw(pkt / pack_packet(packet.header, packet.values))


def _to_parent(frame: bytes, packet: AggPacket) -> bytes:
    pkt = Ether(frame)
    pkt[Ether].src, pkt[Ether].dst = ROUTER, PARENT_MAC
    pkt[UDP].remove_payload()
    pkt[UDP].chksum = 0
    return raw(pkt / pack_packet(packet.header, packet.values))


class Model:
    """The reference aggregators of the two jobs, turned into (port, frame) outputs."""

    def __init__(self) -> None:
        self.jobs = {ROOT_JOB: (Aggregator(ROOT_JOB, 3, SLOTS), (1, 2, 3)),
                     CHILD_JOB: (Aggregator(CHILD_JOB, 2, SLOTS, parent_index=INDEX_AT_PARENT), (1, 2))}
        self.refused = 0

    def outputs(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        packet = unpack_packet(raw(Ether(frame)[UDP].payload))
        job = self.jobs.get(packet.header.job_id)
        if job is None:
            return []                                  # not aggregated here (and no route: dropped)
        aggregator, children = job
        try:
            out = aggregator.handle(packet)
        except RejectedPacket:
            self.refused += 1
            return []
        result = []
        for o in out:
            if o.dest is Dest.PARENT:
                result.append((PARENT_PORT, _to_parent(frame, o.packet)))
            elif o.dest is Dest.SENDER:
                result.append((port, _to_worker(frame, port, o.packet)))
            else:
                result += [(c, _to_worker(frame, c, o.packet)) for c in children]
        return result


V = [_values(i) for i in range(12)]
BIG = [_values(100 + i, big=True) for i in range(3)]
R = ROOT_JOB
C = CHILD_JOB
SENDS = [
    # job 5 (root), slot 1 set 0, chunk 1: workers 0, 1, a retransmission of 1 (dropped), then 2 completes
    (1, agg(1, R, 1, 0, 0, 1, V[0])), (2, agg(2, R, 1, 0, 1, 1, V[1])), (2, agg(2, R, 1, 0, 1, 1, V[1])),
    (3, agg(3, R, 1, 0, 2, 1, V[2])),
    (1, agg(1, R, 1, 0, 0, 1, V[0])),                                    # retransmission after done: answered
    # the other set of slot 1 (chunk 5), worker 0 moved on; then chunk 9 reuses set 0
    (1, agg(1, R, 1, 1, 0, 5, V[3], exponent=130)), (2, agg(2, R, 1, 1, 1, 5, V[4], exponent=140)),
    (3, agg(3, R, 1, 1, 2, 5, V[5], exponent=120)),
    (2, agg(2, R, 1, 0, 1, 9, V[6])), (1, agg(1, R, 1, 0, 0, 9, V[7])), (3, agg(3, R, 1, 0, 2, 9, V[8])),
    # saturation: slot 2
    (1, agg(1, R, 2, 0, 0, 2, BIG[0])), (2, agg(2, R, 2, 0, 1, 2, BIG[1])), (3, agg(3, R, 2, 0, 2, 2, BIG[2])),
    # refused: slot beyond the range, worker beyond fan-in, a result at the root
    (1, agg(1, R, SLOTS, 0, 0, 3, V[0])), (1, agg(1, R, 0, 0, 3, 0, V[0])),
    (1, agg(1, R, 0, 0, 0, 0, V[0], pkt_type=PktType.RESULT)),
    # job 6 (child): slot 0 set 0 chunk 0: two workers -> partial up as child 2
    (1, agg(1, C, 0, 0, 0, 0, V[9])), (2, agg(2, C, 0, 0, 1, 0, V[10])),
    (2, agg(2, C, 0, 0, 1, 0, V[10])),                                   # complete, no result yet: sent up again
    (PARENT_PORT, agg(PARENT_PORT, C, 0, 0, 7, 3, V[11], pkt_type=PktType.RESULT)),   # stale (seq 3)
    (PARENT_PORT, agg(PARENT_PORT, C, 0, 0, 7, 0, V[11], pkt_type=PktType.RESULT)),   # the result: down to 1, 2
    (1, agg(1, C, 0, 0, 0, 0, V[9])),                                    # answered from the stored result
    (1, agg(1, 99, 0, 0, 0, 0, V[9])),                                   # no such job here: routed (no route)
]

def _expect(outputs) -> None:
    model = Model()
    for i, ((port, frame), got) in enumerate(zip(SENDS, outputs)):
        want = sorted(model.outputs(port, frame))
        assert got == want, f"packet {i}: got {got}\n want {want}"
    counts = dict(line.split() for line in outputs[-1][0][1].decode().splitlines())
    assert int(counts["refused"]) == model.refused == 4
    assert int(counts["consumed"]) == 9
    assert int(counts["completed"]) == 4 and int(counts["partial_up"]) == 1
    assert int(counts["dup_answered"]) == 2 and int(counts["dup_resent_up"]) == 1
    assert int(counts["dup_dropped"]) == 1 and int(counts["result_down"]) == 1


_model = Model()
PACKETS = [Send(port, frame, expect_nothing=not _model.outputs(port, frame)) for port, frame in SENDS]
PACKETS.append(Step(_read_ops))
SCENARIOS = [Scenario("fabric_agg", "fabric", PACKETS, setup=_setup, expect=_expect)]
