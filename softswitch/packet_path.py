"""A program's per-packet steps, specialised when the program is set.

What simple_switch does to every packet (metadata on arrival, parse, ingress, where the
packet goes, queueing, egress, deparse, send) is the same for all packets of one program;
only where the program keeps the fields it touches, and whether it has timestamps or
queueing metadata at all, depends on the program. Looking those up for every packet (and a
wrapper call per step) was about a tenth of softswitch's own time on the fabric program
(benchmarks/softswitch_path.py): here they are resolved once, when the program is set, and
bound into the closures the data plane loop calls. Clones, multicast copies, resubmission
and recirculation leave this straight path through the Dataplane's own methods.

The order of steps, instance types and the metadata a packet keeps follow BMv2's
targets/simple_switch/simple_switch.cpp.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

# absolute imports: this module is also compiled on its own (pipeline/compiled.py)
from softswitch.pipeline.program import INTRINSICS, Program
from softswitch.runtime.pre import ReplicationEngine
from softswitch.pfc import MAC_CONTROL
from softswitch.queues import EgressQueue

NORMAL, INGRESS_CLONE, EGRESS_CLONE, COALESCED, RECIRC, REPLICATION, RESUBMIT = range(7)
MIRROR_SESSION_ID_MASK = 0x7FFF
NO_TRUNCATION = 1 << 62


class PathOwner(Protocol):
    """What a packet path uses of the data plane that owns it (softswitch.dataplane.Dataplane,
    which imports this module): its state, and the methods that take copies, resubmission,
    recirculation and sends off the straight path."""
    counters: object                    # .packets_in ... as the data plane counts them
    drop_port: int
    start_ns: int
    pre: ReplicationEngine
    priority_queues: int
    queues: dict[tuple[int, int], EgressQueue]
    queued: int                         # packets in the egress queues
    _internal: object                   # resubmitted/recirculated packets waiting (a deque)

    pfc: object                         # pfc.Pfc: lossless classes' buffers

    def transmit(self, port: int, frame: bytes) -> None: ...
    def mac_control(self, port: int, frame: bytes) -> None: ...
    def queue(self, port: int, priority: int = 0) -> EgressQueue: ...
    def bad_priority(self, priority: int) -> None: ...
    def clone_ingress(self, prog: Program, F: list, frame: bytes, session: int, ingress_port: int) -> None: ...
    def clone_egress(self, prog: Program, F: list, session: int) -> None: ...
    def copy_field_list(self, prog: Program, field_list_id: int, src: list, dst: list) -> None: ...
    def replicate(self, F: list, targets: list[tuple[int, int]], truncate: int) -> None: ...
    def push_internal(self, F: list, frame: bytes) -> None: ...
    def _drain_queues(self) -> None: ...
    def _packet_failed(self, e: Exception) -> None: ...


@dataclass(frozen=True)
class PacketPath:
    """The entry points of one program's packet path."""
    arrivals: Callable[[int, list], None]          # frames that came in on a port, one after the other
    arrival: Callable[[int, bytes], None]          # a frame that came in on a port
    ingress_state: Callable[[list, bytes], None]   # a packet whose metadata is already set (resubmit, recirculate)
    enqueue: Callable[[int, list], None]           # a packet (or copy) to an egress port's queue
    egress: Callable[[EgressQueue, list], None]    # a packet whose departure time has come


def build_packet_path(dp: "PathOwner", prog: Program) -> PacketPath:
    s, h = prog.intrinsics, prog.layout.hidden
    ingress_port, egress_spec, egress_port = s["ingress_port"], s["egress_spec"], s["egress_port"]
    instance_type, packet_length = s["instance_type"], s["packet_length"]
    # fields a program may lack (None)
    ingress_ts, egress_ts = s["ingress_global_timestamp"], s["egress_global_timestamp"]
    checksum_error, mcast_grp, priority, qid = s["checksum_error"], s["mcast_grp"], s["priority"], s["qid"]
    queueing = prog.with_queueing_metadata
    # simple_switch sets a timestamp truncated to its field's width (32 bits for enq_timestamp
    # and deq_timedelta: they wrap after 71 minutes of uptime; 48 for the global timestamps)
    ingress_ts_mask, egress_ts_mask, enq_ts_mask, deq_timedelta_mask = (
        prog.layout.intrinsic_mask(INTRINSICS[k]) for k in
        ("ingress_global_timestamp", "egress_global_timestamp", "enq_timestamp", "deq_timedelta"))
    enq_ts, enq_qdepth, deq_timedelta, deq_qdepth = (s["enq_timestamp"], s["enq_qdepth"],
                                                     s["deq_timedelta"], s["deq_qdepth"])
    # simple_switch's per-packet registers
    h_length, h_ingress_length, h_truncate, h_payload = (h["packet_length"], h["ingress_length"],
                                                         h["truncate_length"], h["payload"])
    h_clone, h_resubmit, h_recirculate = h["clone_session"], h["resubmit_field_list"], h["recirculate_field_list"]

    template = prog.layout.template
    parse, verify_checksums, run_ingress = prog.parse, prog.verify_checksums, prog.ingress
    run_egress, update_checksums, deparse = prog.egress, prog.update_checksums, prog.deparse
    counters, drop_port, transmit = dp.counters, dp.drop_port, dp.transmit
    not_dropped = (drop_port + 1) & 0x1FF          # egress_spec before egress runs, as BMv2
    monotonic_ns, start_ns = time.monotonic_ns, dp.start_ns
    waiting_internal, drain_queues, packet_failed = dp._internal, dp._drain_queues, dp._packet_failed
    mac_control, pfc = dp.mac_control, dp.pfc

    def arrivals(port: int, frames: list) -> None:
        for frame in frames:
            if frame[12:14] == MAC_CONTROL:        # the MAC's (PFC: pfc.py), never the pipeline's
                mac_control(port, frame)
                continue
            try:
                arrival(port, frame)
            except Exception as e:
                packet_failed(e)
            # BMv2's egress threads run while ingress takes the next packet: whatever may leave
            # now leaves before the next arrival is queued (or a burst at full rate would fill
            # the queue and be dropped, which BMv2 does not do)
            if dp.queued or waiting_internal:
                drain_queues()

    def arrival(port: int, frame: bytes) -> None:
        F = template[:]
        F[ingress_port] = port
        if ingress_ts is not None:                 # only on arrival, as in BMv2
            F[ingress_ts] = ((monotonic_ns() - start_ns) // 1000) & ingress_ts_mask
        ingress_state(F, frame)

    def ingress_state(F: list, frame: bytes) -> None:
        length = len(frame)
        F[packet_length] = F[h_length] = F[h_ingress_length] = length
        F[h_truncate] = NO_TRUNCATION
        consumed = parse(F, frame)
        F[h_payload] = frame[consumed:]
        ok = verify_checksums(F)
        if checksum_error is not None:
            F[checksum_error] = 0 if ok else 1
        run_ingress(F)

        clone = F[h_clone]
        if clone:
            F[h_clone] = 0
            dp.clone_ingress(prog, F, frame, clone & MIRROR_SESSION_ID_MASK, F[ingress_port])
        resubmit = F[h_resubmit]
        if resubmit:
            F2 = template[:]
            dp.copy_field_list(prog, resubmit, F, F2)
            F2[instance_type] = RESUBMIT
            dp.push_internal(F2, frame)
            return
        if mcast_grp is not None and F[mcast_grp]:
            F[instance_type] = REPLICATION
            dp.replicate(F, dp.pre.multicast(F[mcast_grp]), NO_TRUNCATION)
            return
        port = F[egress_spec]
        if port == drop_port:
            counters.dropped += 1
            return
        F[instance_type] = NORMAL
        enqueue(port, F, True)

    def enqueue(port: int, F: list, straight: bool = False) -> None:
        """To the egress queue of ``port`` (and its priority). A packet on the straight path
        (not a copy) skips a queue that would hold only it, due at once, when no packet
        waits anywhere in the switch: it departs now, as the loop's next look would have
        sent it, with the same metadata (queue depths 0, no time waited). A packet of a
        lossless class is counted in its ingress port's buffer while it waits (pfc.py)."""
        prio = F[priority] if priority is not None else 0
        q = dp.queues.get((port, prio))
        if q is None:
            if prio >= dp.priority_queues:           # as simple_switch
                dp.bad_priority(prio)
                return
            q = dp.queue(port, prio)
        if q.dropping:                       # the PFC watchdog's: a storm on this queue
            q.watchdog_drops += 1
            counters.watchdog_drops += 1
            return
        now = (monotonic_ns() - start_ns) // 1000
        if queueing:
            F[enq_ts] = now & enq_ts_mask
            F[enq_qdepth] = len(q.items)
        length = F[h_length]                 # what the link will carry (queues.py), truncated
        if F[h_truncate] < length:
            length = F[h_truncate]
        if straight and not dp.queued and q.leaves_now(now, length):
            depart(q, F, now)
            return
        buf = pfc.admit(F[ingress_port], prio, length) if pfc.lossless else True
        if buf is False:
            counters.lossless_drops += 1
        elif q.push(F, now, length, None if buf is True else buf):
            dp.queued += 1
            if buf is not True:
                pfc.add(buf, length, now)
        else:
            counters.queue_drops += 1
            if buf is not True:              # a lossless class lost to a queue too shallow
                buf.lossless_drops += 1
                counters.lossless_drops += 1

    def egress(q: EgressQueue, F: list) -> None:
        """A packet the loop took off ``q``: its departure time has come."""
        depart(q, F, (monotonic_ns() - start_ns) // 1000)

    def depart(q: EgressQueue, F: list, now: int) -> None:
        if egress_ts is not None:
            F[egress_ts] = now & egress_ts_mask
        if queueing:
            F[deq_timedelta] = (now - F[enq_ts]) & deq_timedelta_mask   # as BMv2: now less the truncated enqueue time
            F[deq_qdepth] = len(q.items)
            if qid is not None:
                F[qid] = q.priority
        F[egress_port] = q.port
        F[egress_spec] = not_dropped
        F[packet_length] = F[h_length]
        run_egress(F)

        clone = F[h_clone]
        if clone:
            F[h_clone] = 0
            dp.clone_egress(prog, F, clone & MIRROR_SESSION_ID_MASK)
        if F[egress_spec] == drop_port:
            counters.dropped += 1
            return
        update_checksums(F)
        frame = deparse(F) + F[h_payload]
        recirculate = F[h_recirculate]
        if recirculate:        # a new packet in BMv2, of the whole deparsed frame (not truncated)
            R = template[:]
            dp.copy_field_list(prog, recirculate, F, R)
            R[instance_type] = RECIRC
            dp.push_internal(R, frame)
            return
        truncate = F[h_truncate]
        if truncate < len(frame):
            frame = frame[:truncate]
        transmit(q.port, frame)

    return PacketPath(arrivals, arrival, ingress_state, enqueue, egress)
