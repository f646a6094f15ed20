"""The sender: every flow of one host, from one process, starting together at ``start_at``.

UDP flows are paced in the sender (the kernels here have no fq qdisc, so no EDT pacing): one
loop keeps every flow's schedule (datagram n of a flow is due ``start + n / rate_pps`` seconds
after ``start_at``) on CLOCK_MONOTONIC and sleeps only while nothing is due within
``MIN_SLEEP_S``, sending whatever is due in one batch. A flow that falls more than ``MAX_LAG_S``
behind its schedule (the process was not scheduled) has its schedule moved on rather than
bursting to catch up; the moves add up in ``slip_s``. Each datagram carries the flow id, its
sequence number and its send time (`hostagent.traffic.wire`).

TCP flows run one connection each in a thread: connect from the flow's source port, send the
preamble and the bytes, and wait for the receiver's answer; ``fct_s`` is connect to answer.

With ``rate_control_port`` the UDP flows' rates can be lowered from outside while they run
(`hostagent.traffic.ratecontrol`: a host agent's DCQCN reaction point): a flow then sends at
min(its rate_pps, the rate last set for it), the next datagram one new interval after the last
one due. ``rate_updates`` and ``min_rate_pps`` in its record say what happened.

With ``pause`` (a `hostagent.lossless.PauseReader`: the host's PFC state) a UDP flow's datagram
is not sent while its class (``priority``) is paused: the flow waits, its schedule moved on by
the time it waited (``paused_s``), as a NIC's queue of a paused class waits and then goes on at
its pace. The datagrams carry the flow's DSCP (``dscp``).

With ``cc`` (`hostagent.congestion.CcSettings`: TIMELY or Swift) every UDP flow runs
under that host congestion control: its datagrams ask for acknowledgements, the acknowledgements
feed the control, and the flow keeps to the control's window (datagrams in flight) and pacing
rate besides its own rate_pps. A flow held by its full window waits until an acknowledgement
(or a timeout) frees room, its schedule moved on by the wait (``window_wait_s``); the loop
sleeps in select() on the flows' sockets, so an acknowledgement wakes it.

Two impairments exist to check receivers: ``swap_every`` K sends the datagrams with sequence
numbers q and q+1 in swapped order for every q that is a multiple of K (one out-of-order
datagram per swap), ``drop_every`` K skips sequence numbers K-1, 2K-1, ... (counted as
``dropped``, never sent).
"""
from __future__ import annotations

import heapq
import select
import socket
import threading
import time
from dataclasses import asdict, dataclass, field

from hostagent.congestion import CcSettings
from hostagent.traffic.controlled import Controlled
from hostagent.traffic.flows import WireFlow
from hostagent.traffic.ratecontrol import RateListener, frame_bytes
from hostagent.traffic.tcpinfo import tcp_info
from hostagent.traffic.wire import TCP_ACK_BYTES, pack_datagram_header, pack_tcp_preamble, unpack_tcp_ack

MIN_SLEEP_S = 0.0005
MAX_LAG_S = 0.02
PAUSE_CHECK_S = 0.0005      # a paused flow looks again this soon at the latest (an XON ends a pause early)
RATE_CHECK_S = 0.002        # how often rate-control messages are looked for (and the longest sleep then)
WINDOW_CHECK_S = 0.002      # flows their windows hold look for timeouts this often (an acknowledgement wakes them)
DRAIN_S = 2.0               # after the last datagram, acknowledgements are awaited this long at most
TCP_CHUNK = 64 * 1024
_ZEROS = memoryview(bytes(TCP_CHUNK))


@dataclass
class SentFlow:
    id: int
    protocol: str
    dst_addr: str
    sport: int
    dport: int
    sent: int = 0               # UDP: datagrams; TCP: stream bytes handed to the kernel
    bytes: int = 0              # payload bytes sent (TCP: stream bytes, without the preamble)
    first_send: float = 0.0     # CLOCK_REALTIME seconds (TCP: the connect)
    last_send: float = 0.0
    dropped: int = 0            # UDP: datagrams skipped on purpose (drop_every)
    send_errors: int = 0
    slip_s: float = 0.0         # UDP: how far the schedule was moved on after stalls
    acked: int | None = None    # TCP: bytes the receiver said it got
    fct_s: float | None = None  # TCP: connect to the receiver's answer
    retransmits: int | None = None      # TCP: segments retransmitted (tcp_info total_retrans)
    reordering_seen: int | None = None  # TCP: reordering events the kernel detected (tcp_info reord_seen)
    error: str | None = None
    rate_updates: int = 0       # UDP: rate-control messages applied to the flow
    min_rate_pps: float | None = None   # UDP: the lowest rate they set
    paused_s: float = 0.0       # UDP: how long PFC held it (pause)
    cc: str | None = None       # UDP: its congestion control (cc), and what it did:
    acks: int = 0               #   acknowledgements taken
    acks_missing: int = 0       #   datagrams given up as lost after the retransmission timeout
    acks_late: int = 0          #   acknowledgements that came after that
    ack_errors: int = 0         #   datagrams on the flow's socket that were no acknowledgement of it
    rtt_min_us: float | None = None
    rtt_sum_us: float = 0.0     #   the mean RTT is rtt_sum_us / acks
    window_wait_s: float = 0.0  #   how long its window held it
    cc_trace: list = field(default_factory=list)    # (time s, rate bits/s or None, window or None)


@dataclass
class Sent:
    """What one sender process reports (its stdout's last line, as JSON)."""

    clock: str
    start_at: float
    late_s: float               # how long after start_at the process was ready to start
    flows: list[SentFlow] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Sent":
        return cls(data["clock"], data["start_at"], data["late_s"], [SentFlow(**f) for f in data["flows"]])


@dataclass(frozen=True)
class Impairments:
    swap_every: int = 0
    drop_every: int = 0

    def __post_init__(self) -> None:
        for name in ("swap_every", "drop_every"):
            value = getattr(self, name)
            if value != 0 and value < 2:
                raise ValueError(f"{name} {value}: 0 (off) or at least 2")

    def seq_at(self, position: int, size: int) -> int:
        """The sequence number sent in the flow's ``position``-th slot."""
        k = self.swap_every
        if k:
            r = position % k
            if r == 0 and position + 1 < size:
                return position + 1
            if r == 1:
                return position - 1
        return position

    def dropped(self, seq: int) -> bool:
        return bool(self.drop_every) and seq % self.drop_every == self.drop_every - 1


def _family(addr: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def _bound_socket(flow: WireFlow, kind: socket.SocketKind) -> socket.socket:
    family = _family(flow.dst_addr)
    s = socket.socket(family, kind)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if flow.spec.dscp:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, flow.spec.dscp << 2)
            else:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, flow.spec.dscp << 2)
        s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", flow.spec.sport))
    except OSError as err:
        s.close()
        raise OSError(err.errno, f"flow {flow.id}: source port {flow.spec.sport}: {err.strerror}") from None
    return s


class _UdpFlow:
    __slots__ = ("wire", "record", "sock", "buf", "position", "base", "rate", "controlled")

    def __init__(self, wire: WireFlow, record: SentFlow, sock: socket.socket, base: float,
                 cc: CcSettings | None = None):
        self.wire, self.record, self.sock = wire, record, sock
        self.buf = bytearray(wire.spec.payload)
        self.position = 0
        self.base = base            # monotonic time of position 0
        self.rate = wire.spec.rate_pps
        self.controlled = None
        if cc is not None:
            record.cc = cc.name
            self.controlled = Controlled(cc, frame_bytes(wire.spec.payload, ":" in wire.dst_addr), record)

    def due(self) -> float:
        return self.base + self.position / self.rate

    def set_rate_bps(self, rate_bps: float) -> None:
        """Send at min(rate_pps, ``rate_bps`` of frames) from now on (see `set_rate_pps`)."""
        ipv6 = ":" in self.wire.dst_addr
        self.set_rate_pps(rate_bps / (8 * frame_bytes(self.wire.spec.payload, ipv6)))

    def set_rate_pps(self, rate_pps: float) -> None:
        """Send at min(rate_pps, ``rate_pps``) from now on: the next datagram is due one new
        interval after the last one due."""
        rate = min(self.wire.spec.rate_pps, rate_pps)
        if self.position:
            last_due = self.base + (self.position - 1) / self.rate
            self.base = last_due + 1 / rate - self.position / rate
        self.rate = rate
        rec = self.record
        rec.rate_updates += 1
        rec.min_rate_pps = rate if rec.min_rate_pps is None else min(rec.min_rate_pps, rate)


def _apply_rates(flows: list[_UdpFlow], control: RateListener) -> bool:
    changed = False
    for flow_id, rate_bps in control.poll():
        for f in flows:
            if f.wire.id == flow_id and f.position < f.wire.spec.size:
                f.set_rate_bps(rate_bps)
                changed = True
    return changed


def _take_acks(flows: list[_UdpFlow]) -> bool:
    """Read every controlled flow's acknowledgements and timeouts and keep its pace to its
    control's rate; True when a flow's pace changed."""
    now_ns = time.time_ns()
    changed = False
    for f in flows:
        c = f.controlled
        if c is None:
            continue
        c.read_acks(f.sock, f.wire.id, now_ns)
        c.expire(now_ns)
        rate = c.rate_pps()
        want = f.wire.spec.rate_pps if rate is None else min(f.wire.spec.rate_pps, rate)
        if abs(want - f.rate) > 1e-3 * f.rate and f.position < f.wire.spec.size:
            f.set_rate_pps(want)
            changed = True
    return changed


def _drain_acks(flows: list[_UdpFlow]) -> None:
    """After the last datagram: the outstanding acknowledgements, until each is in or timed out."""
    controlled = [f for f in flows if f.controlled is not None]
    end = time.monotonic() + DRAIN_S
    while any(f.controlled.in_flight for f in controlled) and time.monotonic() < end:
        select.select([f.sock for f in controlled], [], [], WINDOW_CHECK_S * 4)
        _take_acks(controlled)
    for f in controlled:                # still out when the wait ended: missing too
        f.record.acks_missing += len(f.controlled.in_flight)
        f.controlled.in_flight.clear()


def _sleep(seconds: float, controlled: list[socket.socket]) -> None:
    """Sleep, waking early when an acknowledgement arrives for a controlled flow."""
    if controlled:
        select.select(controlled, [], [], seconds)
    else:
        time.sleep(seconds)


def _held(f: _UdpFlow, pause, now: float) -> float:
    """Seconds to hold ``f`` now (its class paused: up to PAUSE_CHECK_S at a time), its schedule
    moved on by them; 0 when it may send."""
    held = pause.held_ns(f.wire.spec.priority) / 1e9
    if not held:
        return 0.0
    held = min(held, PAUSE_CHECK_S)
    f.base += held
    f.record.paused_s += held
    return held


def _send_udp(flows: list[_UdpFlow], impair: Impairments, control: RateListener | None = None,
              pause=None) -> None:
    heap = [(f.due(), i) for i, f in enumerate(flows)]
    heapq.heapify(heap)
    next_check = 0.0
    acked = [f.sock for f in flows if f.controlled is not None]
    held: dict[int, float] = {}         # flows their full window holds -> since when
    while heap or held:
        now = time.monotonic()
        moved = bool(acked) and _take_acks(flows)
        if control is not None and now >= next_check:
            next_check = now + RATE_CHECK_S
            moved = _apply_rates(flows, control) or moved
        for i in [i for i in held if flows[i].controlled.window_open()]:
            _release(flows[i], now - held.pop(i))
            heap.append((0.0, i))
            moved = True
        if moved:                                   # due times moved: order the heap again
            heap = [(flows[i].due(), i) for _, i in heap]
            heapq.heapify(heap)
        if not heap:                                # every flow left waits for acknowledgements
            _sleep(WINDOW_CHECK_S, acked)
            continue
        due, i = heap[0]
        if due - now > MIN_SLEEP_S:
            _sleep(due - now if control is None and not held else min(due - now, RATE_CHECK_S), acked)
            continue
        heapq.heappop(heap)
        f = flows[i]
        if pause is not None and _held(f, pause, now):     # PFC: its class is paused
            heapq.heappush(heap, (f.due(), i))
            continue
        if f.controlled is not None and not f.controlled.window_open():     # its congestion window is full
            held[i] = now
            continue
        if now - due > MAX_LAG_S:             # stalled: move the schedule on instead of bursting
            shift = now - due - MAX_LAG_S
            f.base += shift
            f.record.slip_s += shift
        _send_one(f, impair)
        f.position += 1
        if f.position < f.wire.spec.size:
            heapq.heappush(heap, (f.due(), i))


def _release(f: _UdpFlow, waited: float) -> None:
    """A flow its window held for ``waited`` seconds may send again: its schedule moves on by
    the wait (what it would have sent meanwhile is not sent in a burst)."""
    f.base += waited
    f.record.window_wait_s += waited


def _send_one(f: _UdpFlow, impair: Impairments) -> None:
    wire, rec = f.wire, f.record
    seq = impair.seq_at(f.position, wire.spec.size)
    if impair.dropped(seq):
        rec.dropped += 1
        return
    now_ns = time.time_ns()
    pack_datagram_header(f.buf, wire.id, seq, wire.spec.size, now_ns, ack_req=f.controlled is not None)
    try:
        f.sock.sendto(f.buf, (wire.dst_addr, wire.spec.dport))
    except OSError as err:
        rec.send_errors += 1
        rec.error = f"sendto {wire.dst_addr}:{wire.spec.dport}: {err.strerror or err}"
        return
    if f.controlled is not None:
        f.controlled.sent(seq, now_ns)
    if not rec.sent:
        rec.first_send = now_ns / 1e9
    rec.last_send = now_ns / 1e9
    rec.sent += 1
    rec.bytes += wire.spec.payload


def _run_tcp(wire: WireFlow, rec: SentFlow, at: float, timeout: float) -> None:
    """One connection; errors end up in ``rec.error``."""
    time.sleep(max(0.0, at - time.monotonic()))
    try:
        with _bound_socket(wire, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            connect_ns = time.time_ns()
            rec.first_send = connect_ns / 1e9
            s.connect((wire.dst_addr, wire.spec.dport))
            s.sendall(pack_tcp_preamble(wire.id, wire.spec.size, connect_ns))
            left = wire.spec.size
            while left:
                n = s.send(_ZEROS[:min(left, TCP_CHUNK)])
                left -= n
                rec.sent += n
            rec.bytes = rec.sent
            rec.last_send = time.time_ns() / 1e9
            answer = b""
            while len(answer) < TCP_ACK_BYTES:
                chunk = s.recv(TCP_ACK_BYTES - len(answer))
                if not chunk:
                    raise ConnectionError("the receiver closed without answering")
                answer += chunk
            rec.fct_s = (time.time_ns() - connect_ns) / 1e9
            rec.acked = unpack_tcp_ack(answer)
            info = tcp_info(s)
            rec.retransmits, rec.reordering_seen = info.total_retrans, info.reord_seen
    except (OSError, ConnectionError) as err:
        rec.error = f"tcp to {wire.dst_addr}:{wire.spec.dport} from port {wire.spec.sport}: {err}"


def run_sender(flows: list[WireFlow], start_at: float, *, impair: Impairments = Impairments(),
               tcp_timeout: float = 30.0, rate_control_port: int = 0, pause=None,
               cc: CcSettings | None = None) -> Sent:
    """Send ``flows`` starting at ``start_at`` (CLOCK_REALTIME seconds; if that has passed: now,
    with ``late_s`` reported) and return what was sent. Source ports are bound before the start, so a port in use fails at once.
    ``rate_control_port`` (0: none): take UDP rates from there; ``pause``: hold paused classes
    (see the module docstring); ``cc``: the UDP flows' congestion control."""
    ids = [f.id for f in flows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"flow ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    records = [SentFlow(f.id, f.spec.protocol, f.dst_addr, f.spec.sport, f.spec.dport) for f in flows]
    udp: list[_UdpFlow] = []
    control = RateListener(rate_control_port) if rate_control_port else None
    try:
        for wire, rec in zip(flows, records):
            if wire.spec.protocol == "udp":
                udp.append(_UdpFlow(wire, rec, _bound_socket(wire, socket.SOCK_DGRAM), 0.0, cc))
        late = time.time() - start_at
        # start_at on the monotonic clock; a process ready only after it starts at once, its
        # flows' offsets and pacing kept (late_s says by how much it missed the common start)
        mono_start = time.monotonic() + max(0.0, -late)
        for f in udp:
            f.base = mono_start + f.wire.spec.start
        threads = [threading.Thread(target=_run_tcp, args=(w, r, mono_start + w.spec.start, tcp_timeout), daemon=True)
                   for w, r in zip(flows, records) if w.spec.protocol == "tcp"]
        for t in threads:
            t.start()
        _send_udp(udp, impair, control, pause)
        _drain_acks(udp)
        for t in threads:
            t.join()
    finally:
        for f in udp:
            f.sock.close()
        if control is not None:
            control.close()
    return Sent("CLOCK_REALTIME", start_at, max(0.0, late), records)
