"""The parameter server: the job's fallback aggregator as a host process on (ip, AGG_UDP_PORT).

One root `Aggregator` per configured job, taking the job's frame_values (a packet of another
size is rejected and counted, as the switches refuse it). Worker addresses are learned from their CONTRIBs, keyed
by (job, worker_id); a RESULT goes to every worker of the job, the answer to a retransmission
only to its sender. Malformed packets and packets of unknown jobs are counted and dropped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Iterable

from hostagent.collectives.aggregation.aggregator import Aggregator, AggregatorStats, Dest, RejectedPacket
from hostagent.collectives.aggregation.protocol import (
    AGG_UDP_PORT,
    DEFAULT_FRAME_VALUES,
    DEFAULT_SLOTS,
    MalformedPacket,
    PktType,
    pack_packet,
    unpack_packet,
)
from hostagent.collectives.transport import UdpEndpoint

POLL_SECONDS = 0.1  # how often a waiting server looks at its stop event


@dataclass(frozen=True)
class JobSpec:
    job_id: int
    fan_in: int  # workers sending to this server
    slots: int = DEFAULT_SLOTS
    frame_values: int = DEFAULT_FRAME_VALUES  # values per packet of the job

    @classmethod
    def parse(cls, text: str) -> JobSpec:
        """JOB:FAN_IN[:SLOTS[:FRAME_VALUES]], e.g. "1:8", "2:4:16" or "3:4:16:320"."""
        parts = text.split(":")
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            numbers = []
        if len(numbers) not in (2, 3, 4):
            raise ValueError(f"job {text!r} is not JOB:FAN_IN[:SLOTS[:FRAME_VALUES]]")
        return cls(*numbers)


@dataclass
class ServerCounters:
    malformed: int = 0
    unknown_job: int = 0
    rejected: int = 0


class ParameterServer:
    def __init__(
        self,
        jobs: Iterable[JobSpec],
        bind: tuple[str, int] = ("0.0.0.0", AGG_UDP_PORT),
        drop_outgoing: float = 0.0,
        drop_seed: int = 0,
    ) -> None:
        self.aggregators: dict[int, Aggregator] = {}
        for job in jobs:
            if job.job_id in self.aggregators:
                raise ValueError(f"job {job.job_id} is configured twice")
            self.aggregators[job.job_id] = Aggregator(job.job_id, job.fan_in, job.slots, frame_values=job.frame_values)
        self.workers: dict[int, dict[int, tuple[str, int]]] = {job: {} for job in self.aggregators}
        self.counters = ServerCounters()
        self.endpoint = UdpEndpoint(bind, drop_outgoing, drop_seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.endpoint.address

    def handle_datagram(self, data: bytes, sender: tuple[str, int]) -> None:
        try:
            pkt = unpack_packet(data)
        except MalformedPacket:
            self.counters.malformed += 1
            return
        h = pkt.header
        agg = self.aggregators.get(h.job_id)
        if agg is None:
            self.counters.unknown_job += 1
            return
        if h.pkt_type == PktType.CONTRIB and h.worker_id < agg.fan_in:
            self.workers[h.job_id][h.worker_id] = sender
        try:
            outgoing = agg.handle(pkt)
        except RejectedPacket:
            self.counters.rejected += 1
            return
        for out in outgoing:
            data = pack_packet(out.packet.header, out.packet.values)
            if out.dest is Dest.SENDER:
                self.endpoint.send(data, sender)
            elif out.dest is Dest.CHILDREN:
                for addr in self.workers[h.job_id].values():
                    self.endpoint.send(data, addr)
            # Dest.PARENT cannot happen: the server is always a root.

    def serve(self) -> None:
        """Handle packets until stop() is called."""
        while not self._stop.is_set():
            got = self.endpoint.recv(POLL_SECONDS)
            if got is not None:
                self.handle_datagram(*got)

    def start(self) -> ParameterServer:
        self._thread = threading.Thread(target=self.serve, name="allreduce-ps", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.endpoint.close()

    def __enter__(self) -> ParameterServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def snapshot(self) -> dict[str, int]:
        """Packets in/out, duplicates and the other counters, summed over jobs."""
        totals = AggregatorStats()
        for agg in self.aggregators.values():
            for f in fields(AggregatorStats):
                setattr(totals, f.name, getattr(totals, f.name) + getattr(agg.stats, f.name))
        s = self.endpoint.stats
        return {
            "packets_in": s.packets_received,
            "bytes_in": s.bytes_received,
            "packets_out": s.packets_sent,
            "bytes_out": s.bytes_sent,
            "dropped_on_purpose": s.dropped_on_purpose,
            "duplicates": totals.retransmissions,
            **{f.name: getattr(totals, f.name) for f in fields(AggregatorStats) if f.name != "retransmissions"},
            **{f.name: getattr(self.counters, f.name) for f in fields(ServerCounters)},
        }
