"""fabric.p4's in-network aggregation, packet by packet, against the reference aggregator.

One switch holds four jobs as p4src/README.md ("In-network aggregation") describes them: job 5
as the root of a tree with three workers on ports 1-3, job 6 below a parent on port 4 with two
workers on ports 1-2 (the switch is child 2 of that parent), both in SwitchML's 64-value frames;
job 7, a root of three workers in 256-value frames (4 blocks, 4 pool slots a frame), and job 8,
below the parent with two workers in 320-value frames (5 blocks, the most). The expected frames come from
hostagent.collectives.aggregation.aggregator (the parameter server's core): what the switch sends must be
what that model sends, with the addresses the contract gives (results to a worker port are
addressed to the worker, from the fallback aggregator's address; partial sums go to the
parent's MAC). Covered: a round completed and multicast; a retransmission before and after the
round is done; the other set; a new round on a done set; saturation; a partial sent up and
sent up again; a result from the parent stored and passed down, then answering a worker's
retransmission; a stale result; refused packets (slot beyond the job's range, worker id beyond
the fan-in, a result at the root, unknown job); the agg_ops counters. In multi-block frames:
three contributions completing a 256-value frame while another slot of the job fills (a frame's
blocks must not meet the next slot's), a retransmission answered from the stored result, the
other set; two children's 320-value partial sent up, the parent's result passed down and a
retransmission answered with it; and frames refused and counted: of another size than the job's
(64 and 320 to the 256-value job, 256 to a 64-value job), a count that is no whole number of
blocks, a count that disagrees with the UDP length, a frame shorter than its UDP length says;
a 320-value frame of a job the switch does not hold is routed (no route here: dropped).
"""
import struct
from dataclasses import dataclass

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from controller.p4names import Action, Counter, Table
from hostagent.collectives.aggregation.aggregator import Aggregator, Dest, RejectedPacket
from hostagent.collectives.aggregation.protocol import (
    AGG_UDP_PORT,
    HEADER,
    HEADER_BYTES,
    AggHeader,
    AggPacket,
    MalformedPacket,
    PktType,
    pack_packet,
    unpack_packet,
)
from scenarios.runner import Scenario, Send, Setup, Step

ROUTER = "00:00:00:00:aa:aa"
PARENT_MAC = "00:00:00:00:bb:04"
HOST_MAC = {1: "00:00:00:00:00:01", 2: "00:00:00:00:00:02", 3: "00:00:00:00:00:03"}
HOST_IP = {1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.3"}
PS_IP = "10.9.9.9"
ROOT_JOB, CHILD_JOB = 5, 6
BIG_ROOT_JOB, BIG_CHILD_JOB = 7, 8         # 256- and 320-value frames
SLOTS = 4
PARENT_PORT = 4
OUTCOMES = ("consumed", "completed", "partial_up", "result_down", "dup_answered", "dup_resent_up",
            "dup_dropped", "refused")


@dataclass(frozen=True)
class Job:
    """One job's place on the switch: its agg_jobs entry and multicast group (0x1000 + job id)."""
    job_id: int
    epoch: int
    slot_base: int
    frame_values: int
    children: tuple[int, ...]             # the workers' ports
    index_at_parent: int | None = None    # None: the root; else the switch's child index at the parent


JOBS = (Job(ROOT_JOB, 1, 10, 64, (1, 2, 3)),
        Job(CHILD_JOB, 2, 20, 64, (1, 2), index_at_parent=2),
        Job(BIG_ROOT_JOB, 3, 30, 256, (1, 2, 3)),                       # pool slots 30..45: 4 frames of 4 blocks
        Job(BIG_CHILD_JOB, 4, 50, 320, (1, 2), index_at_parent=1))     # 50..69: 4 frames of 5 blocks


def _job_entry(p, job: Job):
    params = {"epoch": job.epoch, "slot_base": job.slot_base, "slot_count": SLOTS, "frame_values": job.frame_values,
              "fan_in": len(job.children), "group": 0x1000 + job.job_id}
    action = Action.AGGREGATION_AGGREGATE_ROOT
    if job.index_at_parent is not None:
        action = Action.AGGREGATION_AGGREGATE_CHILD
        params.update(parent_port=PARENT_PORT, index_at_parent=job.index_at_parent, own_mac=ROUTER,
                      parent_mac=PARENT_MAC)
    return p.table_entry(Table.AGGREGATION_AGG_JOBS, {"job_id": job.job_id}, action=action, params=params)


def _setup(s: Setup) -> None:
    from p4.v1 import p4runtime_pb2
    p = s.p4info
    s.insert(
        *[_job_entry(p, job) for job in JOBS],
        *[p.table_entry(Table.AGGREGATION_AGG_RESULT_DST, {"egress_port": port}, action=Action.AGGREGATION_TO_WORKER,
                        params={"smac": ROUTER, "dmac": HOST_MAC[port], "ipv4": HOST_IP[port]})
          for port in (1, 2, 3)],
    )
    for job in JOBS:
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = 0x1000 + job.job_id
        for port in job.children:
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

def _values(seed: int, big: bool = False, n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if big:
        return np.full(n, 0x7FFFFFF0, dtype=np.int32) - rng.integers(0, 4, n).astype(np.int32)
    return rng.integers(-1 << 20, 1 << 20, n).astype(np.int32)


def agg(port: int, job: int, slot: int, set_id: int, worker: int, seq: int, values: np.ndarray,
        pkt_type: PktType = PktType.CONTRIB, exponent: int = 127, src_ip: str | None = None) -> bytes:
    """A frame of len(values) values (its frame_values)."""
    header = AggHeader(pkt_type, 0, job, slot, set_id, worker, 3, exponent, seq, len(values))
    return _frame(port, pack_packet(header, values), src_ip)


def agg_raw(port: int, job: int, frame_values: int, values: int, udp_len: int | None = None) -> bytes:
    """A contribution to slot 0 whose header says frame_values and that carries ``values``
    values, its UDP length that of the datagram unless ``udp_len`` says otherwise."""
    head = HEADER.pack(int(PktType.CONTRIB), 0, job, 0, 0, 0, 3, 127, 0, frame_values)
    return _frame(port, head + np.arange(values, dtype=">i4").tobytes(), udp_len=udp_len)


def _frame(port: int, payload: bytes, src_ip: str | None = None, udp_len: int | None = None) -> bytes:
    src = HOST_MAC.get(port, PARENT_MAC)
    ip_src = src_ip or HOST_IP.get(port, "10.0.4.4")
    return raw(Ether(dst=ROUTER, src=src) / IP(src=ip_src, dst=PS_IP, id=port, ttl=64)
               / UDP(sport=AGG_UDP_PORT, dport=AGG_UDP_PORT, chksum=0, len=udp_len) / payload)


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
        self.jobs = {j.job_id: (Aggregator(j.job_id, len(j.children), SLOTS, parent_index=j.index_at_parent,
                                           frame_values=j.frame_values), j.children) for j in JOBS}
        self.refused = 0

    def outputs(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        udp = Ether(frame)[UDP]
        payload = raw(udp.payload)
        job = self.jobs.get(struct.unpack_from("!H", payload, 2)[0])
        if job is None:
            return []                                  # not aggregated here (and no route: dropped)
        aggregator, children = job
        try:
            if udp.len != 8 + len(payload) or len(payload) < HEADER_BYTES:
                raise MalformedPacket(f"UDP length {udp.len} for {len(payload)} bytes")
            out = aggregator.handle(unpack_packet(payload))
        except (MalformedPacket, RejectedPacket):      # the switch refuses what the model cannot take
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
W = [_values(200 + i, n=256) for i in range(6)]
W += [np.concatenate([_values(200 + i, n=192), _values(210 + i, big=True)]) for i in range(3)]   # last block saturates
X = [_values(300 + i, n=320) for i in range(3)]
R = ROOT_JOB
C = CHILD_JOB
BR, BC = BIG_ROOT_JOB, BIG_CHILD_JOB
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
    # job 7 (root, 256-value frames): slots 1 and 2 (set 0, chunks 1 and 2) filling side by side, each
    # completed by its third contribution and multicast; a retransmission after done: answered
    (1, agg(1, BR, 1, 0, 0, 1, W[0])), (1, agg(1, BR, 2, 0, 0, 2, W[1])), (2, agg(2, BR, 1, 0, 1, 1, W[2])),
    (2, agg(2, BR, 2, 0, 1, 2, W[3])), (3, agg(3, BR, 1, 0, 2, 1, W[4])), (3, agg(3, BR, 2, 0, 2, 2, W[5])),
    (2, agg(2, BR, 1, 0, 1, 1, W[2])),
    # the other set of slot 1 (chunk 5), its last block saturating; a retransmission while it fills: dropped
    (1, agg(1, BR, 1, 1, 0, 5, W[6], exponent=131)), (1, agg(1, BR, 1, 1, 0, 5, W[6], exponent=131)),
    (2, agg(2, BR, 1, 1, 1, 5, W[7])), (3, agg(3, BR, 1, 1, 2, 5, W[8])),
    # refused: frames of another size than the job's (64 and 320 values to job 7, 256 to job 5), a count
    # that is no whole number of blocks, a count the UDP length disagrees with, a frame shorter than its
    # UDP length says (its last block cut: the parser fails on it)
    (1, agg(1, BR, 0, 0, 0, 0, V[0])), (1, agg(1, BR, 0, 0, 0, 0, X[0])), (1, agg(1, R, 0, 0, 0, 0, W[0])),
    (1, agg_raw(1, BR, 100, 100)), (1, agg_raw(1, BR, 256, 192)), (1, agg_raw(1, BR, 256, 231, udp_len=8 + 16 + 1024)),
    # job 8 (child, 320-value frames): slot 3 set 1 chunk 7: two workers -> partial up as child 1; the
    # parent's result stored and passed down; a retransmission answered from it
    (1, agg(1, BC, 3, 1, 0, 7, X[0])), (2, agg(2, BC, 3, 1, 1, 7, X[1])),
    (PARENT_PORT, agg(PARENT_PORT, BC, 3, 1, 7, 7, X[2], pkt_type=PktType.RESULT)),
    (2, agg(2, BC, 3, 1, 1, 7, X[1])),
    (1, agg(1, 99, 0, 0, 0, 0, X[0])),                                   # no such job here: routed (no route)
]

def _expect(outputs) -> None:
    model = Model()
    for i, ((port, frame), got) in enumerate(zip(SENDS, outputs)):
        want = sorted(model.outputs(port, frame))
        assert got == want, f"packet {i}: got {got}\n want {want}"
    counts = dict(line.split() for line in outputs[-1][0][1].decode().splitlines())
    assert int(counts["refused"]) == model.refused == 4 + 6
    assert int(counts["consumed"]) == 9 + 7
    assert int(counts["completed"]) == 4 + 3 and int(counts["partial_up"]) == 1 + 1
    assert int(counts["dup_answered"]) == 2 + 2 and int(counts["dup_resent_up"]) == 1
    assert int(counts["dup_dropped"]) == 1 + 1 and int(counts["result_down"]) == 1 + 1
    big = outputs[SENDS.index((3, agg(3, BR, 1, 1, 2, 5, W[8])))]   # job 7's saturated round, to its 3 workers
    assert len(big) == 3 and all(unpack_packet(raw(Ether(f)[UDP].payload)).header.flags == 1 for _, f in big)


_model = Model()
PACKETS = [Send(port, frame, expect_nothing=not _model.outputs(port, frame)) for port, frame in SENDS]
PACKETS.append(Step(_read_ops))
SCENARIOS = [Scenario("fabric_agg", "fabric", PACKETS, setup=_setup, expect=_expect)]
