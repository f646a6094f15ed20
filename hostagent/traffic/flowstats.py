"""What a receiver counts per flow: `UdpFlowStats` (datagrams by sequence number, with an
optional SRD-style reordering buffer) and `TcpFlowStats` (one connection's stream), each
summarised as a record (`UdpReceived`, `TcpReceived`) that the receiver prints as JSON.

Definitions (per flow, sequence numbers 0..total-1):

* out of order: a datagram whose sequence number is lower than the highest seen before it and
  that was not seen before (a repeat is a duplicate, not out of order);
* reorder distance: for an out-of-order datagram, highest seen minus its sequence number;
* lost: datagrams never received, counted when the receiver ends (``total - unique``);
* times are CLOCK_REALTIME (all Mininet hosts share the machine's clock): send times come
  from the datagrams, arrival times from the kernel's receive timestamps;
* fct: last arrival minus the earliest send time received (the flow's first datagram's, when
  it arrived); for TCP, the last byte's arrival minus the sender's connect time;
* TCP out of order: the segments the kernel received out of order (tcp_info ``rcv_ooopack``),
  read when the stream is complete or closed;
* reordering buffer (SRD-style delivery in order to the application): datagrams above the next
  expected sequence number wait in it; ``buffer_max`` is the most that waited at once,
  ``buffer_wait_max_us`` the longest one waited, ``held_at_end`` those still waiting behind a
  loss when the receiver ended (no retransmission fills the gap).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FlowKey:
    """The 5-tuple of a received flow (addresses as the receiver saw them), the flow id its
    packets carried and how much they said the flow holds (datagrams; TCP: bytes)."""

    protocol: str
    src: str
    sport: int
    dst: str
    dport: int
    flow_id: int
    expected: int


@dataclass
class UdpReceived(FlowKey):
    packets: int
    unique: int
    bytes: int
    out_of_order: int
    duplicates: int
    lost: int
    reorder_distance_max: int
    first_send: float
    first_arrival: float
    last_arrival: float
    fct_s: float
    delay_mean_us: float
    delay_max_us: float
    complete: bool
    buffer_max: int | None = None
    buffer_wait_max_us: float | None = None
    delivered_in_order: int | None = None
    held_at_end: int | None = None


@dataclass
class TcpReceived(FlowKey):
    bytes: int
    connect: float
    first_arrival: float
    last_arrival: float
    fct_s: float            # last byte's arrival minus the sender's connect time
    complete: bool
    out_of_order: int | None  # segments the kernel received out of order (tcp_info rcv_ooopack)


class UdpFlowStats:
    """The datagrams of one flow (one 5-tuple) as they arrive."""

    __slots__ = ("src", "sport", "dst", "dport", "flow_id", "total", "seen", "packets", "unique", "bytes",
                 "out_of_order", "duplicates", "highest", "distance_max", "first_send_ns", "first_arrival_ns",
                 "last_arrival_ns", "delay_sum_ns", "delay_max_ns", "reorder", "next_expected", "buffer",
                 "buffer_max", "wait_max_ns", "delivered")

    def __init__(self, src: str, sport: int, dst: str, dport: int, flow_id: int, total: int,
                 reorder_buffer: bool = False):
        self.src, self.sport, self.dst, self.dport = src, sport, dst, dport
        self.flow_id, self.total = flow_id, total
        self.seen = bytearray(total)
        self.packets = self.unique = self.bytes = 0
        self.out_of_order = self.duplicates = self.distance_max = 0
        self.highest = -1
        self.first_send_ns = 1 << 63
        self.first_arrival_ns = self.last_arrival_ns = 0
        self.delay_sum_ns = self.delay_max_ns = 0
        self.reorder = reorder_buffer
        self.next_expected = 0
        self.buffer: dict[int, int] = {}        # sequence number -> arrival ns
        self.buffer_max = self.delivered = self.wait_max_ns = 0

    @property
    def complete(self) -> bool:
        return self.unique == self.total

    def add(self, seq: int, send_ns: int, arrival_ns: int, nbytes: int) -> None:
        """One datagram (``seq`` < total, checked by the wire decoder)."""
        self.packets += 1
        self.bytes += nbytes
        if not self.first_arrival_ns:
            self.first_arrival_ns = arrival_ns
        self.last_arrival_ns = arrival_ns
        if self.seen[seq]:
            self.duplicates += 1
            return
        self.seen[seq] = 1
        self.unique += 1
        if seq < self.highest:
            self.out_of_order += 1
            self.distance_max = max(self.distance_max, self.highest - seq)
        else:
            self.highest = seq
        self.first_send_ns = min(self.first_send_ns, send_ns)
        delay = arrival_ns - send_ns
        self.delay_sum_ns += delay
        self.delay_max_ns = max(self.delay_max_ns, delay)
        if self.reorder:
            self._deliver(seq, arrival_ns)

    def _deliver(self, seq: int, arrival_ns: int) -> None:
        if seq != self.next_expected:
            self.buffer[seq] = arrival_ns
            self.buffer_max = max(self.buffer_max, len(self.buffer))
            return
        self.delivered += 1
        self.next_expected += 1
        while self.next_expected in self.buffer:
            waited = arrival_ns - self.buffer.pop(self.next_expected)
            self.wait_max_ns = max(self.wait_max_ns, waited)
            self.delivered += 1
            self.next_expected += 1

    def record(self) -> UdpReceived:
        got = self.unique
        rec = UdpReceived(
            "udp", self.src, self.sport, self.dst, self.dport, self.flow_id, self.total, self.packets, got,
            self.bytes, self.out_of_order, self.duplicates, self.total - got, self.distance_max,
            self.first_send_ns / 1e9, self.first_arrival_ns / 1e9, self.last_arrival_ns / 1e9,
            (self.last_arrival_ns - self.first_send_ns) / 1e9, self.delay_sum_ns / got / 1e3 if got else 0.0,
            self.delay_max_ns / 1e3, self.complete)
        if self.reorder:
            rec.buffer_max, rec.buffer_wait_max_us = self.buffer_max, self.wait_max_ns / 1e3
            rec.delivered_in_order, rec.held_at_end = self.delivered, len(self.buffer)
        return rec


class TcpFlowStats:
    """One accepted connection: the preamble, then the stream's bytes."""

    __slots__ = ("src", "sport", "dst", "dport", "flow_id", "expected", "bytes", "connect_ns",
                 "first_arrival_ns", "last_arrival_ns", "head", "out_of_order")

    def __init__(self, src: str, sport: int, dst: str, dport: int):
        self.src, self.sport, self.dst, self.dport = src, sport, dst, dport
        self.flow_id = -1
        self.expected = -1                 # unknown until the preamble is in
        self.bytes = 0
        self.connect_ns = self.first_arrival_ns = self.last_arrival_ns = 0
        self.head = b""
        self.out_of_order: int | None = None

    @property
    def complete(self) -> bool:
        return self.expected >= 0 and self.bytes >= self.expected

    def record(self) -> TcpReceived:
        return TcpReceived("tcp", self.src, self.sport, self.dst, self.dport, self.flow_id, self.expected,
                           self.bytes, self.connect_ns / 1e9, self.first_arrival_ns / 1e9,
                           self.last_arrival_ns / 1e9,
                           (self.last_arrival_ns - self.connect_ns) / 1e9 if self.bytes else 0.0, self.complete,
                           self.out_of_order)
