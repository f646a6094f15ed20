"""Ring AllReduce (reduce-scatter, then all-gather) over UDP, the baseline to in-network aggregation.

The padded tensor is n segments of P packets of `frame_values` values (RingConfig: 64 to 320,
an in-network job's frame size, to compare like with like). Every worker sends one stream of
2(n-1)P DATA messages to its right neighbour and receives one from its left: message m = step * P
+ chunk. Reduce-scatter step k sends segment (rank - k) mod n and adds what arrives into
(rank - 1 - k) mod n; all-gather step j sends (rank + 1 - j) mod n and stores what arrives in
(rank - j) mod n. Steps are pipelined per packet: message (k, i) leaves as soon as (k - 1, i)
arrived.

Reliability: a window of `window` unacknowledged messages; the receiver acknowledges
cumulatively with a 64-bit selective-ack bitmap, once per window/2 new messages, on a gap (at most
every timeout/8), on a duplicate and when its stream is complete, and otherwise after timeout/8.
The sender resends a message after `timeout`, or earlier (timeout/4) when a later message was
acknowledged past it; it gives up after `max_retries` resends of one message.

int32 sums saturate like the aggregator's and carry OVERFLOW along, so every worker raises
OverflowError naming the chunk instead of returning a wrapped sum; float32 is summed in float32.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from hostagent.collectives.aggregation.aggregator import saturating_add
from hostagent.collectives.aggregation.protocol import (
    DEFAULT_FRAME_VALUES,
    FLAG_OVERFLOW,
    RING_UDP_PORT,
    MalformedPacket,
    check_frame_values,
)
from hostagent.collectives.baseline_ringwire import (
    DTYPE_CODES,
    SACK_BITS,
    RingHeader,
    RingKind,
    pack_ack,
    pack_data,
    unpack_ring,
)
from hostagent.collectives.transport import Pending, TransferStats, UdpEndpoint

MAX_PACKETS_PER_SEGMENT = 0xFFFF  # the header's chunk field
OP_MOD = 1 << 16
EARLY_PACKETS = 1024  # DATA of the neighbour's next call kept while this call finishes
LINGER_QUIET = 4  # after a call, late retransmissions are answered until this many timeouts pass quietly
LINGER_MAX = 50  # ... but no longer than this many timeouts in all
LINGER_POLL = 0.05  # how often the answering thread looks whether the next call wants the socket


class RingError(RuntimeError):
    """The ring gave up on a message; nothing is returned."""


@dataclass(frozen=True)
class RingConfig:
    rank: int
    peers: tuple[tuple[str, int], ...]  # every rank's (ip, port), in ring order
    job_id: int = 0
    bind: tuple[str, int] | None = None  # default: peers[rank]
    window: int = 64
    timeout: float = 0.1
    max_retries: int = 100
    drop_outgoing: float = 0.0
    drop_seed: int = 0
    frame_values: int = DEFAULT_FRAME_VALUES   # values a DATA packet carries (every rank of a ring the same)

    def validate(self) -> None:
        check_frame_values(self.frame_values)
        if not 0 <= self.rank < len(self.peers):
            raise ValueError(f"rank {self.rank} is outside 0..{len(self.peers) - 1}")
        if len(self.peers) > 256:
            raise ValueError(f"{len(self.peers)} peers: the rank field holds 256 at most")
        if not 0 <= self.job_id <= 0xFFFF:
            raise ValueError(f"job_id {self.job_id} does not fit in 16 bits")
        if self.window < 2 or self.timeout <= 0 or self.max_retries < 0:
            raise ValueError(f"window {self.window} < 2, timeout {self.timeout} <= 0 or max_retries < 0")


def ring_peers(ips: list[str], port: int = RING_UDP_PORT) -> tuple[tuple[str, int], ...]:
    return tuple((ip, port) for ip in ips)


@dataclass(kw_only=True)
class _InFlight(Pending):
    sacked: bool = False  # the receiver has it (selective ack); only the cumulative ack is missing


class _RingCall:
    def __init__(self, client: RingClient, padded: np.ndarray, packets: int, op: int) -> None:
        self.client = client
        self.cfg = client.config
        self.n = len(self.cfg.peers)
        self.rank = self.cfg.rank
        self.op = op
        self.P = packets
        self.M = 2 * (self.n - 1) * packets
        self.V = self.cfg.frame_values
        self.buf = padded.reshape(self.n, packets, self.V)
        self.is_int = padded.dtype == np.int32
        self.code = DTYPE_CODES[padded.dtype]
        self.ovf = np.zeros((self.n, packets), dtype=bool)
        self.received = np.zeros(self.M, dtype=bool)
        self.cum_in = 0
        self.unacked_in = 0
        self.first_unacked_at = 0.0
        self.last_ack_at = float("-inf")
        self.next_send = 0
        self.acked = 0
        self.inflight: dict[int, _InFlight] = {}
        self.right = self.cfg.peers[(self.rank + 1) % self.n]
        self.left = self.cfg.peers[(self.rank - 1) % self.n]
        self.ack_delay = self.cfg.timeout / 8
        self.hole_age = self.cfg.timeout / 4

    @property
    def done(self) -> bool:
        return self.cum_in == self.M and self.acked == self.M

    def segment(self, step: int, outgoing: bool) -> int:
        n, r = self.n, self.rank
        if step < n - 1:
            return (r - step) % n if outgoing else (r - 1 - step) % n
        j = step - (n - 1)
        return (r + 1 - j) % n if outgoing else (r - j) % n

    def _header(self, kind: RingKind, seq: int, flags: int = 0, step: int = 0, chunk: int = 0, offset: int = 0) -> RingHeader:
        return RingHeader(kind, flags, self.code, self.rank, self.cfg.job_id, self.op, seq, step, chunk, offset)

    def pump(self, now: float) -> None:
        """Send the next messages the window and the per-packet step dependency allow."""
        while self.next_send < min(self.M, self.acked + self.cfg.window):
            m = self.next_send
            step, i = divmod(m, self.P)
            if step > 0 and not self.received[m - self.P]:
                return
            seg = self.segment(step, outgoing=True)
            flags = FLAG_OVERFLOW if self.ovf[seg, i] else 0
            header = self._header(RingKind.DATA, m, flags, step, i, (seg * self.P + i) * self.V)
            data = pack_data(header, self.buf[seg, i])
            self.inflight[m] = _InFlight(data=data, sent_at=now)
            self.client.endpoint.send(data, self.right)
            self.next_send += 1

    def send_ack(self, now: float) -> None:
        window = self.received[self.cum_in + 1 : self.cum_in + 1 + SACK_BITS]
        sack = 0
        for bit in np.flatnonzero(window):
            sack |= 1 << int(bit)
        self.client.endpoint.send(pack_ack(self._header(RingKind.ACK, self.cum_in), sack), self.left)
        self.unacked_in = 0
        self.last_ack_at = now

    def on_data(self, h: RingHeader, values: np.ndarray, now: float) -> None:
        stats = self.client.endpoint.stats
        m = h.seq
        step, i = divmod(m, self.P) if m < self.M else (-1, -1)
        seg = self.segment(step, outgoing=False) if step >= 0 else -1
        if (h.step, h.chunk, h.offset, h.dtype_code) != (step, i, (seg * self.P + i) * self.V, self.code):
            stats.stale += 1
            return
        if self.received[m]:
            stats.duplicates += 1
            self.send_ack(now)  # our ack may have been lost
            return
        self.received[m] = True
        overflow = bool(h.flags & FLAG_OVERFLOW)
        if step < self.n - 1:
            if self.is_int:
                self.buf[seg, i], saturated = saturating_add(self.buf[seg, i], values)
                overflow = overflow or saturated
            else:
                self.buf[seg, i] += values
            self.ovf[seg, i] |= overflow
        else:
            self.buf[seg, i] = values
            self.ovf[seg, i] = overflow
        gap = m != self.cum_in
        while self.cum_in < self.M and self.received[self.cum_in]:
            self.cum_in += 1
        if self.unacked_in == 0:
            self.first_unacked_at = now
        self.unacked_in += 1
        if (
            self.unacked_in >= self.cfg.window // 2
            or self.cum_in == self.M
            or (gap and now - self.last_ack_at >= self.ack_delay)
        ):
            self.send_ack(now)
        self.pump(now)

    def on_ack(self, h: RingHeader, sack: int, now: float) -> None:
        cum = h.seq
        if cum > self.next_send:
            self.client.endpoint.stats.stale += 1
            return
        for m in range(self.acked, cum):
            self.inflight.pop(m, None)
        self.acked = max(self.acked, cum)
        highest = -1
        while sack:
            bit = (sack & -sack).bit_length() - 1
            sack &= sack - 1
            flight = self.inflight.get(cum + 1 + bit)
            if flight is not None:
                flight.sacked = True
                highest = cum + 1 + bit
        for m in range(self.acked, highest):
            flight = self.inflight.get(m)
            if flight is not None and not flight.sacked and now - flight.sent_at >= self.hole_age:
                self._resend(m, flight, now)
        self.pump(now)

    def _resend(self, m: int, flight: _InFlight, now: float) -> None:
        def give_up(tries: int) -> RingError:
            step, i = divmod(m, self.P)
            return RingError(
                f"ring job {self.cfg.job_id}: rank {self.rank} got no ack for step {step} chunk {i} "
                f"from {self.right[0]}:{self.right[1]} after {tries} retransmissions"
            )

        self.client.endpoint.resend(flight, self.right, now, self.cfg.max_retries, give_up)

    def timers(self, now: float) -> float:
        """Resend what timed out, send a delayed ack; the time to look again."""
        next_due = now + self.ack_delay
        for m, flight in self.inflight.items():
            if flight.sacked:
                continue
            if flight.sent_at + self.cfg.timeout <= now:
                self._resend(m, flight, now)
            next_due = min(next_due, flight.sent_at + self.cfg.timeout)
        if self.unacked_in:
            if now - self.first_unacked_at >= self.ack_delay:
                self.send_ack(now)
            else:
                next_due = min(next_due, self.first_unacked_at + self.ack_delay)
        return next_due

    def result(self) -> np.ndarray:
        if self.ovf.any():
            seg, i = (int(x) for x in np.argwhere(self.ovf)[0])
            first = (seg * self.P + i) * self.V
            raise OverflowError(
                f"ring job {self.cfg.job_id}: chunk {seg * self.P + i} (elements {first}..{first + self.V - 1}) "
                f"overflowed int32"
            )
        return self.buf.reshape(-1)


class RingClient:
    """One rank of a ring. `allreduce` returns the sum over all ranks or raises.

    The left neighbour may still be resending the last messages of a call this rank has finished
    (the final ack can be lost). Until the next call takes the socket over, a thread answers them,
    until LINGER_QUIET timeouts pass quietly; `close()` waits for it, so the neighbour is never
    left waiting for an ack however long the application takes to call again.
    """

    def __init__(self, config: RingConfig) -> None:
        config.validate()
        self.config = config
        bind = config.bind or config.peers[config.rank]
        self.endpoint = UdpEndpoint(bind, config.drop_outgoing, config.drop_seed)
        self.last_stats = TransferStats()
        self._op = 0
        self._finished: tuple[int, int, int] | None = None  # (op, messages, dtype code) of the last call
        self._early: list[bytes] = []
        self.linger_stats = TransferStats()  # what the answering thread saw between calls
        self._answering: threading.Thread | None = None
        self._stop_answering = threading.Event()

    def allreduce(self, tensor: np.ndarray) -> np.ndarray:
        tensor = np.asarray(tensor)
        if tensor.dtype not in DTYPE_CODES:
            raise TypeError(f"ring allreduce takes float32 or int32 tensors, not {tensor.dtype}")
        n = len(self.config.peers)
        values = self.config.frame_values
        packets = max(1, -(-tensor.size // (n * values)))
        if packets > MAX_PACKETS_PER_SEGMENT:
            raise ValueError(f"tensor of {tensor.size} elements needs {packets} packets per segment, over {MAX_PACKETS_PER_SEGMENT}")
        padded = np.zeros(n * packets * values, dtype=tensor.dtype)
        padded[: tensor.size] = tensor.reshape(-1)
        call = _RingCall(self, padded, packets, self._op)
        self._take_socket()
        self.endpoint.stats = TransferStats()
        started = time.monotonic()
        try:
            self._run(call)
        finally:
            self.endpoint.stats.elapsed_s = time.monotonic() - started
            self.last_stats = self.endpoint.stats
            self._finished = (call.op, call.M, call.code)
            self._op = (self._op + 1) % OP_MOD
            self._start_answering()
        return call.result()[: tensor.size].reshape(tensor.shape).copy()

    def _run(self, call: _RingCall) -> None:
        now = time.monotonic()
        call.pump(now)
        early, self._early = self._early, []
        for data in early:
            self._dispatch(data, call, now)
        next_due = call.timers(now)
        while not call.done:
            got = self.endpoint.recv(next_due - time.monotonic())
            now = time.monotonic()
            if got is not None:
                self._dispatch(got[0], call, now)
            if got is None or now >= next_due:
                next_due = call.timers(now)

    def _dispatch(self, data: bytes, call: _RingCall | None, now: float) -> None:
        stats = self.endpoint.stats
        try:
            h, payload = unpack_ring(data, self.config.frame_values)
        except MalformedPacket:
            stats.stale += 1
            return
        n, rank = len(self.config.peers), self.config.rank
        from_left = h.kind == RingKind.DATA and h.rank == (rank - 1) % n
        from_right = h.kind == RingKind.ACK and h.rank == (rank + 1) % n
        next_op = (call.op + 1) % OP_MOD if call is not None else self._op
        if h.job_id != self.config.job_id or not (from_left or from_right):
            stats.stale += 1
        elif call is not None and h.op == call.op:
            if from_left:
                call.on_data(h, payload, now)
            else:
                call.on_ack(h, payload, now)
        elif from_left and self._finished is not None and h.op == self._finished[0]:
            self._ack_finished(h)
        elif from_left and h.op == next_op and len(self._early) < EARLY_PACKETS:
            self._early.append(data)  # the left neighbour already started our next call
        else:
            stats.stale += 1

    def _ack_finished(self, h: RingHeader) -> None:
        """A retransmission of the last call: everything of it arrived, say so again."""
        op, messages, code = self._finished
        self.endpoint.stats.duplicates += 1
        header = RingHeader(RingKind.ACK, 0, code, self.config.rank, self.config.job_id, op, messages)
        self.endpoint.send(pack_ack(header, 0), self.config.peers[(self.config.rank - 1) % len(self.config.peers)])

    def _start_answering(self) -> None:
        self.endpoint.stats = self.linger_stats
        self._stop_answering.clear()
        self._answering = threading.Thread(target=self._answer_late, name="ring-linger", daemon=True)
        self._answering.start()

    def _take_socket(self) -> None:
        if self._answering is not None:
            self._stop_answering.set()
            self._answering.join()
            self._answering = None

    def _answer_late(self) -> None:
        timeout = self.config.timeout
        deadline = time.monotonic() + LINGER_MAX * timeout
        quiet_until = time.monotonic() + LINGER_QUIET * timeout
        while not self._stop_answering.is_set() and (now := time.monotonic()) < min(deadline, quiet_until):
            got = self.endpoint.recv(min(LINGER_POLL, deadline - now, quiet_until - now))
            if got is not None:
                self._dispatch(got[0], None, time.monotonic())
                quiet_until = time.monotonic() + LINGER_QUIET * timeout

    def close(self, linger: bool = True) -> None:
        """Close the socket, after the late retransmissions were answered unless `linger` is False."""
        if self._answering is not None:
            if not linger:
                self._stop_answering.set()
            self._answering.join()
            self._answering = None
        self.endpoint.close()

    def __enter__(self) -> RingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
