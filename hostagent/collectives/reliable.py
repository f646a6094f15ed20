"""Reliable messages between the ranks of a process group over UDP (the fabric carries UDP).

Each message is cut into packets of at most PAYLOAD bytes; every packet carries a per-destination
sequence number. Acknowledgements are cumulative and selective (every seq below a floor, plus a
list of those above it) and delayed: one per ACK_EVERY packets or after `ack_delay_s`, so on links
limited in packets per second they cost a fraction of the data's packets. The sender keeps at most `window` unacknowledged
packets per peer and resends a packet whose acknowledgement is late (timeout doubling per resend,
capped); the timeout follows each peer's measured round trip (RFC 6298's smoothed RTT + 4
deviations, from packets sent once), never below `rto_s`, so queues in slow switches do not
cause spurious resends that would deepen them. The receiver drops copies of packets it already took (counted as duplicates, still
acknowledged so the sender stops) and reassembles messages by (source, tag). A background thread
receives, acknowledges and resends, so a rank blocked in recv still keeps its peers' windows moving.
With a congestion control (`TransportConfig.cc`, hostagent.collectives.peer_cc) each peer's
window and pacing are the control's, the packet that fills a window or ends a message asks to be
acknowledged at once (DATA_ACKREQ), and an acknowledgement's tag says how long the receiver held
it back after the newest packet it covers (microseconds; 0 without cc).

Every rank sends a HEARTBEAT to every peer each HEARTBEAT_S, so a rank that stops (process
killed, host gone) is noticed by all the others after `silent_after_s`, each naming it, rather
than each blaming the neighbour it happened to wait on. A peer never heard from may still be
starting and is only given up at the call's deadline.

A rank that gives up on a call sends ABORT (a few unacknowledged copies) to everyone naming the
cause, so the others raise at once instead of waiting out their own deadline.

This module is the reference. `hostagent.collectives.host_path.open_transport(...)` makes a
transport on the host path its config asks for (`TransportConfig.host_path`): by default the
native engine (hostagent.collectives.native: the same protocol in C, its own thread, batched
socket calls) where the machine's C compiler builds it, else this Python code; `host_path` and
`host_path_reason` on the transport (and in ProcessGroup.stats()) say which runs and why.
"""

from __future__ import annotations

import enum
import struct
import threading
import time
from dataclasses import dataclass
from typing import Sequence

from hostagent.collectives.peer_cc import PeerControls
from hostagent.collectives.repath import PeerPaths
from hostagent.collectives.rocev2 import RoceEndpoint
from hostagent.collectives.transport import Pending, RtoEstimator, TransferStats, UdpEndpoint, byte_view
from hostagent.congestion import CcSettings
from hostagent.lossless.pause import PauseReader

MAGIC = b"CL"
HEADER = struct.Struct("!2sBIHIQII")  # magic, kind, group, source rank, seq, tag, fragment, fragments
PAYLOAD = 1400  # bytes of message per packet: header + payload + IP/UDP fit a 1500-byte MTU
ABORT_COPIES = 3
MAX_RTO_S = 2.0
PAUSE_CHECK_S = 0.0005     # a paused sender looks again this soon at the latest (hostagent.traffic.sender's)
HEARTBEAT_S = 0.25
ACK_EVERY = 8  # packets taken from one source before an acknowledgement goes out at once
SACK = struct.Struct("!I")
ETH_IP_UDP_BYTES = 14 + 20 + 8
DATA_FRAME_BYTES = PAYLOAD + HEADER.size + ETH_IP_UDP_BYTES  # a full data packet's Ethernet frame (no FCS)
ACK_FRAME_BYTES = HEADER.size + ETH_IP_UDP_BYTES + 2 * SACK.size  # an acknowledgement, a couple of entries typically
MAX_SACKS = (PAYLOAD - 4) // SACK.size
CALL_NUMBER_BITS = 24  # a call id (tag >> 32) is its subgroup's number above these bits and its own number
HOST_PATHS = ("auto", "native", "python")


def fragment_fits(frag: int, count: int, length: int) -> bool:
    """A DATA packet as the senders cut messages: fragment < fragments, the last at most PAYLOAD
    bytes and every other exactly PAYLOAD (anything else is malformed: counted stale)."""
    return count >= 1 and frag < count and length <= PAYLOAD and (frag == count - 1 or length == PAYLOAD)


class Kind(enum.IntEnum):
    DATA = 1
    ACK = 2
    ABORT = 3
    HEARTBEAT = 4
    DATA_ACKREQ = 5    # DATA whose acknowledgement the sender asks for at once (RoCE's AckReq): with cc only


class CollectiveError(RuntimeError):
    """A collective call that cannot finish right; the message names the cause."""


class PeerSilent(CollectiveError):
    """A peer stopped sending anything at all (heartbeats included): dead or unreachable."""

    def __init__(self, peer: int, what: str, waited_s: float) -> None:
        since = "never heard from" if waited_s == float("inf") else f"nothing heard for {waited_s:.2f} s"
        super().__init__(f"rank {peer} is silent: no {what} ({since}); dead or unreachable")
        self.peer = peer


class CallTimeout(CollectiveError):
    """The deadline passed waiting on a peer that is alive (it did not make the call, or waits itself)."""

    def __init__(self, peer: int, what: str) -> None:
        super().__init__(f"no {what} from rank {peer} within the deadline; rank {peer} is alive "
                         "(it has not made this call, or waits on another rank)")
        self.peer = peer


class Aborted(CollectiveError):
    """Another rank gave up on the call and said why."""

    def __init__(self, by: int, reason: str) -> None:
        super().__init__(f"rank {by} aborted the call: {reason}")
        self.by = by
        self.reason = reason


@dataclass
class _Inbox:
    fragments: dict[int, bytes]
    count: int


@dataclass(frozen=True)
class TransportConfig:
    """How a group's ranks move packets: `window` unacknowledged packets per peer, `rto_s` the
    first (and least) retransmission timeout, a peer silent for `silent_after_s` is dead;
    `drop_outgoing` (seeded by `drop_seed`) drops that share of sent packets, for loss tests.
    `rocev2`: packets go RoCEv2-like (UDP 4791, a BTH whose queue pair names the group's flow to
    each peer, ECN-capable) so the host agents' PLB and DCQCN act on them (hostagent.collectives
    .rocev2); `rate_control_port` (with rocev2; 0: none) is where the sender hears the rates
    DCQCN sets for its queue pairs. `host_path`: "auto" (native where it builds, else Python),
    "native" (or refuse to start, saying why) or "python"; None: $AIFABRIC_HOST_PATH, else auto
    (hostagent.collectives.host_path). `dscp` marks every packet (the switches' traffic class);
    `pause` ("MAP_ID:HOST_ID", hostagent.lossless.HostPause.sender_arg) holds every packet while the
    host's class `priority` is paused by PFC, as a RoCE NIC's queue waits (the Python path only).
    `repath`: a flow that loses packets moves to another path by itself, from another source port
    (hostagent.collectives.repath; the Python path only). `cc`: a congestion control (TIMELY or
    Swift) sets each peer's window and pacing (hostagent.collectives.peer_cc; the Python path only).
    `qps`: every message to a peer is cut into that many parts, each sent from a source port of
    its own (a queue pair: QP scaling, as Meta's collectives spread a peer pair over ECMP; the
    Python path only); `qp_ports`: the source ports of queue pairs 1..qps-1 (the lab chooses them
    with the fabric's hash, aifabric.experiments.rank_ports.queue_pair_ports), empty: ports the
    kernel gives."""
    window: int = 64
    rto_s: float = 0.03
    silent_after_s: float = 10.0
    drop_outgoing: float = 0.0
    drop_seed: int = 0
    rocev2: bool = False
    rate_control_port: int = 0
    host_path: str | None = None
    dscp: int = 0
    priority: int = 0
    pause: str | None = None
    repath: bool = False
    cc: CcSettings | None = None
    qps: int = 1
    qp_ports: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.host_path is not None and self.host_path not in HOST_PATHS:
            raise ValueError(f"TransportConfig: host_path {self.host_path!r} is not one of {', '.join(HOST_PATHS)}")
        if not self.rocev2 and self.rate_control_port:
            raise ValueError("TransportConfig: rate_control_port paces RoCEv2 queue pairs; set rocev2 too")
        if self.rocev2 and self.drop_outgoing:
            raise ValueError("TransportConfig: drop_outgoing is not offered with rocev2")
        if not 0 <= self.dscp < 64 or not 0 <= self.priority < 8:
            raise ValueError(f"TransportConfig: dscp {self.dscp} (0..63) or priority {self.priority} (0..7) out of range")
        if self.rocev2 and (self.dscp or self.pause is not None):
            raise ValueError("TransportConfig: a traffic class (dscp, pause) is not offered with rocev2")
        if self.rocev2 and self.repath:
            raise ValueError("TransportConfig: RoCEv2 flows are moved by the host agents' PLB (a new queue pair), not by repath")
        if self.qps < 1:
            raise ValueError(f"TransportConfig: qps {self.qps} must be at least 1")
        if self.qp_ports and len(self.qp_ports) != self.qps - 1:
            raise ValueError(f"TransportConfig: {len(self.qp_ports)} qp_ports for {self.qps} queue pairs "
                             f"(one a queue pair after the first)")
        if self.qps > 1 and (self.rocev2 or self.repath):
            raise ValueError("TransportConfig: qps spreads a peer's messages over source ports of the ranks' own: "
                             "not with rocev2 (one queue pair a peer, moved by PLB) nor repath (one path a peer at a time)")
        if self.rocev2 and self.cc is not None:
            raise ValueError("TransportConfig: RoCEv2 flows are paced by the host agents' DCQCN, not by cc")


class ReliableTransport:
    """Messages to and from the other ranks of one group; `peers[r]` is rank r's (ip, port).
    The Python reference; its native twin, hostagent.collectives.native.NativeTransport, has the
    same methods and errors, and host_path.open_transport makes the one the config chooses."""

    host_path, host_path_reason = "python", "made as the Python reference itself"

    def __init__(self, rank: int, peers: list[tuple[str, int]], group: int = 0,
                 config: TransportConfig = TransportConfig()) -> None:
        self._settings(rank, peers, group, config)
        rto_s = self.rto_s
        self.endpoint = (RoceEndpoint(self.peers[rank], self.peers, group, config.rate_control_port) if config.rocev2
                         else UdpEndpoint(self.peers[rank], config.drop_outgoing, drop_seed=config.drop_seed,
                                          dscp=config.dscp, arrival_times=config.cc is not None))
        if config.qps > 1:
            self.endpoint.open_paths(config.qps, config.qp_ports)
        self._pause = PauseReader.from_arg(config.pause) if config.pause else None
        self._paths = PeerPaths(len(self.peers)) if config.repath else None
        self._cc = (PeerControls(config.cc, len(self.peers), DATA_FRAME_BYTES, config.window)
                    if config.cc is not None else None)
        self.paused_s = 0.0              # time sends were held by PFC
        self.stats: TransferStats = self.endpoint.stats
        self._by_address = {p: r for r, p in enumerate(self.peers)}
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._next_seq = [0] * len(peers)
        self._pending: list[dict[int, Pending]] = [{} for _ in peers]
        self._floor = [0] * len(peers)  # every seq below it was taken, per source
        self._above: list[set[int]] = [set() for _ in peers]
        self._rto = [RtoEstimator(rto_s, MAX_RTO_S) for _ in peers]
        self._owed = [0] * len(peers)  # packets taken since our last acknowledgement, per source
        self._owed_since = [0.0] * len(peers)
        self._data_at = [0.0] * len(peers)  # cc: when the last DATA from each source reached the kernel
        self._partial: dict[tuple[int, int], _Inbox] = {}
        self._mail: dict[tuple[int, int], bytes] = {}
        self.aborts: dict[int, tuple[int, str]] = {}  # call number -> (rank, reason)
        self._heard: list[float | None] = [None] * len(peers)  # when each peer was last heard from
        self.send_errors = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"reliable-rank{rank}", daemon=True)
        self._thread.start()

    def _settings(self, rank: int, peers: list[tuple[str, int]], group: int, config: TransportConfig) -> None:
        """What both host paths keep of their arguments."""
        self.rank = rank
        self.config = config
        self.silent_after_s = config.silent_after_s
        self.peers = [tuple(p) for p in peers]
        self.group = group
        self.window = config.window
        self.rto_s = config.rto_s
        self.ack_delay_s = config.rto_s / 3  # well inside the sender's timeout

    # --- the caller's side --------------------------------------------------------------------

    def send(self, dst: int, tag: int, payload: bytes, deadline: float, watch: Sequence[int] = ()) -> None:
        """Queue `payload` for rank `dst`; returns once every packet is in flight (not yet
        acknowledged). Raises PeerSilent early if a rank in `watch` (or dst) stopped. `payload`:
        bytes or any buffer (a numpy array is sent as its bytes, without a copy first)."""
        payload = byte_view(payload)
        count = max(1, -(-len(payload) // PAYLOAD))
        for frag in range(count):
            body = payload[frag * PAYLOAD : (frag + 1) * PAYLOAD]
            with self._cond:
                while len(self._pending[dst]) >= self._window(dst):
                    self._check(tag, dst, watch)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._late(dst, "acknowledgement")
                    self._cond.wait(min(left, self.rto_s))
                seq = self._next_seq[dst]
                self._next_seq[dst] += 1
                kind = Kind.DATA_ACKREQ if self._asks_ack(dst, frag, count) else Kind.DATA
                data = HEADER.pack(MAGIC, kind, self.group, self.rank, seq, tag, frag, count) + body
                wait = self._cc.pace(dst) if self._cc is not None else 0.0
                # the message's parts in turn, each on its queue pair
                qp = frag * self.config.qps // count if self.config.qps > 1 else None
                self._pending[dst][seq] = Pending(data=data, sent_at=time.monotonic() + wait, path=qp)
            if wait:
                time.sleep(wait)
            self._send(data, dst, qp)

    def recv(self, src: int, tag: int, deadline: float, watch: Sequence[int] = ()) -> bytes:
        """The message `tag` from rank `src`, waiting until `deadline` (time.monotonic())."""
        key = (src, tag)
        with self._cond:
            while key not in self._mail:
                self._check(tag, src, watch)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._late(src, f"message (tag {tag:#x})")
                self._cond.wait(min(left, 0.1))
            return self._mail.pop(key)

    def flush(self, deadline: float) -> None:
        """Wait until every packet we sent was acknowledged."""
        with self._cond:
            while True:
                waiting = [r for r, p in enumerate(self._pending) if p]
                if not waiting:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._late(waiting[0], "acknowledgement")
                self._cond.wait(min(left, self.rto_s))

    def abort(self, call: int, reason: str) -> None:
        """Tell every peer that call number `call` failed here, and why (best effort)."""
        body = reason.encode()[:PAYLOAD]
        data = HEADER.pack(MAGIC, Kind.ABORT, self.group, self.rank, 0, call, 0, 1) + body
        with self._cond:
            self.aborts.setdefault(call, (self.rank, reason))
        for _ in range(ABORT_COPIES):
            for r in range(len(self.peers)):
                if r != self.rank:
                    self._send(data, r)

    def close(self) -> None:
        self._closed = True
        self._thread.join(timeout=2.0)
        self.endpoint.close()

    def host_path_stats(self) -> dict[str, float | str]:
        """Which host path runs this transport and why, and with rocev2 what its framing counted
        (RoceEndpoint.counters(); the native engine adds its own counters)."""
        out: dict[str, float | str] = {"host_path": self.host_path, "host_path_reason": self.host_path_reason}
        if self._pause is not None:
            out["paused_s"] = round(self.paused_s, 3)
        if self._paths is not None:
            out["repaths"] = self._paths.moves
        if self._cc is not None:
            out.update(self._cc.stats([r for r in range(len(self.peers)) if r != self.rank]))
        if isinstance(self.endpoint, RoceEndpoint):
            out.update(self.endpoint.counters())
        return out

    def _check(self, tag: int, peer: int, watch: Sequence[int]) -> None:
        """Raise if another rank aborted this call (or an earlier one) or a watched rank stopped."""
        call = tag >> 32
        for number, (by, reason) in self.aborts.items():  # calls of the same (sub)group only
            if number >> CALL_NUMBER_BITS == call >> CALL_NUMBER_BITS and number <= call and by != self.rank:
                raise Aborted(by, reason)
        now = time.monotonic()
        for r in (peer, *watch):
            heard = self._heard[r]
            if r != self.rank and heard is not None and now - heard > self.silent_after_s:
                raise PeerSilent(r, "packet", now - heard)

    def _window(self, dst: int) -> int:
        return self._cc.window(dst) if self._cc is not None else self.window

    def _asks_ack(self, dst: int, frag: int, count: int) -> bool:
        """With cc, the packet that fills the window or ends a message asks for its
        acknowledgement at once: a control's window can be smaller than ACK_EVERY, and waiting
        out the receiver's acknowledgement delay at each window would idle the link."""
        return self._cc is not None and (frag == count - 1 or len(self._pending[dst]) + 1 >= self._window(dst))

    def _late(self, peer: int, what: str) -> CollectiveError:
        """The error for a deadline passed waiting on `peer`: silent, or alive and not answering."""
        heard = self._heard[peer]
        now = time.monotonic()
        if heard is None or now - heard > self.silent_after_s:
            return PeerSilent(peer, what, float("inf") if heard is None else now - heard)
        return CallTimeout(peer, what)

    def _send(self, data: bytes, dst: int, path: int | None = None) -> None:
        """To rank ``dst`` on ``path`` (None: the path its flow takes now)."""
        if path is None:
            path = self._paths.current[dst] if self._paths is not None else 0
        with self._send_lock:
            if self._pause is not None:
                self._hold()
            try:
                if path:        # (a RoCEv2 endpoint has one path: PLB moves its queue pair)
                    self.endpoint.send(data, self.peers[dst], path)
                else:
                    self.endpoint.send(data, self.peers[dst])
            except OSError:
                self.send_errors += 1  # unreachable right now: the resend timer tries again

    def _hold(self) -> None:
        """Wait while PFC pauses our class (looking again at least every PAUSE_CHECK_S: an XON
        ends a pause early); under the send lock, so nothing of ours leaves meanwhile."""
        while not self._closed:
            held = self._pause.held_ns(self.config.priority)
            if held <= 0:
                return
            start = time.monotonic()
            time.sleep(min(held / 1e9, PAUSE_CHECK_S))
            self.paused_s += time.monotonic() - start

    # --- the background thread ----------------------------------------------------------------

    def _loop(self) -> None:
        beat = 0.0
        while not self._closed:
            got = self.endpoint.recv(self.ack_delay_s if any(self._owed) else self.rto_s / 2)
            while got is not None:
                self._take(*got)
                got = self.endpoint.recv(0)
            now = time.monotonic()
            for src, owed in enumerate(self._owed):
                if owed and now - self._owed_since[src] >= self.ack_delay_s:
                    self._ack(src)
            self._resend_late()
            if time.monotonic() - beat > HEARTBEAT_S:
                beat = time.monotonic()
                data = HEADER.pack(MAGIC, Kind.HEARTBEAT, self.group, self.rank, 0, 0, 0, 0)
                path = self._paths.beat_path() if self._paths is not None else 0
                for r in range(len(self.peers)):
                    if r != self.rank:
                        self._send(data, r, path)

    def _take(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) < HEADER.size:
            self.stats.stale += 1
            return
        magic, kind, group, src, seq, tag, frag, count = HEADER.unpack_from(data)
        if magic != MAGIC or group != self.group or src >= len(self.peers) or src == self.rank:
            self.stats.stale += 1
            return
        data_kind = kind in (Kind.DATA, Kind.DATA_ACKREQ)
        with self._cond:
            self._heard[src] = time.monotonic()
            if kind == Kind.ACK:
                self._take_ack(src, seq, data[HEADER.size :], tag / 1e6)
                self._cond.notify_all()
            elif kind == Kind.ABORT:
                self.aborts.setdefault(tag, (src, data[HEADER.size :].decode(errors="replace")))
                self._cond.notify_all()
            elif kind == Kind.HEARTBEAT:
                pass  # being heard is all it is for
            elif data_kind:
                inbox = self._partial.get((src, tag))
                if not fragment_fits(frag, count, len(data) - HEADER.size) or (inbox is not None and inbox.count != count):
                    self.stats.stale += 1
                    return
                fresh = self._take_data(src, seq, tag, frag, count, data[HEADER.size :])
                if self._cc is not None:
                    self._data_at[src] = self.endpoint.arrived_at
                if not self._owed[src]:
                    self._owed_since[src] = time.monotonic()
                self._owed[src] += 1
                # not fresh: a copy, the sender is resending
                ack_now = not fresh or self._owed[src] >= ACK_EVERY or kind == Kind.DATA_ACKREQ
            else:
                self.stats.stale += 1
                return
        if data_kind and not fresh and self._paths is not None:
            self._paths.move(src, time.monotonic(), self._rto[src].timeout(0))   # our acknowledgements were lost
        if data_kind and ack_now:
            self._ack(src)

    def _ack(self, src: int) -> None:
        """Acknowledge what ``src`` sent; with cc, the acknowledgement's tag says how long we held
        it back after the newest DATA (microseconds), which the sender takes off its RTT sample."""
        with self._cond:
            self._owed[src] = 0
            floor = self._floor[src]
            above = sorted(self._above[src])[:MAX_SACKS]
            held_us = round(max(0.0, time.monotonic() - self._data_at[src]) * 1e6) if self._cc is not None else 0
        body = b"".join(SACK.pack(s) for s in above)
        self._send(HEADER.pack(MAGIC, Kind.ACK, self.group, self.rank, floor, held_us, 0, 0) + body, src)

    def _take_ack(self, src: int, floor: int, body: bytes, held_s: float) -> None:
        pending = self._pending[src]
        acked = [pending.pop(s) for s in [s for s in pending if s < floor]]
        for off in range(0, len(body) - SACK.size + 1, SACK.size):
            p = pending.pop(SACK.unpack_from(body, off)[0], None)
            if p is not None:
                acked.append(p)
        once = [p for p in acked if p.retries == 0]  # Karn: a resent packet's ack times nothing
        if once:
            sent_at = max(p.sent_at for p in once)
            self._rto[src].sample(time.monotonic() - sent_at)
            if self._cc is not None:
                # from the kernel's arrival stamp: our own late reading is not the network's
                arrived = self.endpoint.arrived_at
                self._cc.acked(src, arrived - sent_at - held_s, len(acked), floor, self._next_seq[src])

    def _take_data(self, src: int, seq: int, tag: int, frag: int, count: int, body: bytes) -> bool:
        """False for a copy of a packet already taken."""
        if seq < self._floor[src] or seq in self._above[src]:
            self.stats.duplicates += 1
            return False
        above = self._above[src]
        above.add(seq)
        while self._floor[src] in above:
            above.discard(self._floor[src])
            self._floor[src] += 1
        inbox = self._partial.setdefault((src, tag), _Inbox({}, count))
        inbox.fragments[frag] = body
        if len(inbox.fragments) == inbox.count:
            del self._partial[(src, tag)]
            self._mail[(src, tag)] = b"".join(inbox.fragments[i] for i in range(inbox.count))
            self._cond.notify_all()
        return True

    def _resend_late(self) -> None:
        now = time.monotonic()
        late: list[tuple[int, Pending]] = []
        with self._cond:
            for dst, pending in enumerate(self._pending):
                for p in pending.values():
                    if now - p.sent_at > self._rto[dst].timeout(p.retries):
                        p.retries += 1
                        p.sent_at = now
                        late.append((dst, p))
        for dst in {dst for dst, _ in late}:
            if self._paths is not None:
                self._paths.move(dst, now, self._rto[dst].timeout(0))
            if self._cc is not None:
                self._cc.timed_out(dst, self._rto[dst].srtt)
        for dst, p in late:
            self.stats.retransmissions += 1
            self._send(p.data, dst, p.path)

