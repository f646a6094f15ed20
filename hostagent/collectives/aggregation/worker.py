"""The worker side of in-network aggregation: `AllReduceClient.allreduce(tensor)`.

Protocol (p4src/README.md, "In-network aggregation"): the tensor is cut into chunks of the
job's frame_values (JobConfig.frame_values: 64 .. 320, whole 64-value blocks; one chunk, one
packet, one exponent); chunk c travels on slot c % slots, one chunk outstanding per slot (window = slots).
On the result of chunk c the worker sends chunk c + slots on the same slot in the other set.
float32 chunks are quantised with an exponent the workers agree on without an extra round trip:
the packet of chunk c carries the sender's exponent for chunk c + slots and the result returns the
max. The first chunks' exponents come from the call's header agreement when the caller ran one
(`allreduce(tensor, first_exponents=...)`, the process group's path: `first_exponents`); without
it a priming round (seq -slots .. -1, zero values) brings them, one frame per slot used.

Successive calls on one client continue the job's stream: the next call's chunk 0 has seq
base + (whole waves used) + slots, and every slot's set keeps alternating from its last use, as the
aggregator's shadow-set rule requires. A job's aggregator state must therefore be fresh when a
new set of clients starts on it (a new job, i.e. a new epoch on the switches, or a new parameter
server process). On stale state the aggregator answers with its old round's seq, which the
worker ignores: it ends in AllReduceError, never in a wrong sum.

A chunk is resent when its result is later than the retransmission timeout, which follows the
measured round trips of chunks answered at the first try (RtoEstimator), never below
JobConfig.timeout, doubled after each timeout until the next sample: on rate-limited links a
fixed 0.1 s resent chunks that were only queued.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hostagent.collectives.aggregation import quantize as q
from hostagent.collectives.aggregation.protocol import (
    AGG_UDP_PORT,
    DEFAULT_FRAME_VALUES,
    DEFAULT_SLOTS,
    FLAG_OVERFLOW,
    MAX_CHILDREN,
    AggHeader,
    MalformedPacket,
    PktType,
    check_frame_values,
    pack_packet,
    split_chunks,
    unpack_packet,
    wrap_seq,
)
from hostagent.collectives.transport import Pending, RtoEstimator, TransferStats, UdpEndpoint

MAX_RTO_S = 2.0  # a chunk's resend timeout never grows past this


class AllReduceError(RuntimeError):
    """The allreduce gave up (no result after the allowed retransmissions); nothing is returned."""


@dataclass(frozen=True)
class JobConfig:
    job_id: int
    worker_id: int  # index among the children of the aggregator this worker sends to
    num_workers: int  # workers in the whole job (n in the quantisation scale)
    aggregator: tuple[str, int]  # where CONTRIBs go (the job's fallback aggregator)
    slots: int = DEFAULT_SLOTS
    bind: tuple[str, int] = ("0.0.0.0", AGG_UDP_PORT)
    timeout: float = 0.1  # least (and first) seconds before an outstanding chunk is sent again
    max_retries: int = 100  # retransmissions of one chunk before giving up
    drop_outgoing: float = 0.0  # testing knob: fraction of sent packets discarded
    drop_seed: int = 0
    frame_values: int = DEFAULT_FRAME_VALUES  # values per packet: the job's (Job.worker_config)

    def validate(self) -> None:
        if not 0 <= self.job_id <= 0xFFFF:
            raise ValueError(f"job_id {self.job_id} does not fit in 16 bits")
        if not 0 <= self.worker_id < MAX_CHILDREN:
            raise ValueError(f"worker_id {self.worker_id} is outside 0..{MAX_CHILDREN - 1}")
        if not 1 <= self.num_workers <= q.MAX_WORKERS:
            raise ValueError(f"num_workers {self.num_workers} is outside 1..{q.MAX_WORKERS}")
        if not 1 <= self.slots <= 0xFFFF:
            raise ValueError(f"slots {self.slots} is outside 1..65535")
        if self.timeout <= 0 or self.max_retries < 0:
            raise ValueError(f"timeout {self.timeout} must be > 0 and max_retries {self.max_retries} >= 0")
        check_frame_values(self.frame_values)


@dataclass(kw_only=True)
class _Outstanding(Pending):
    chunk: int  # index in this call; negative: priming
    seq: int
    set_id: int


class _Call:
    """The state of one allreduce: chunks, agreed exponents, sums, what each slot waits for."""

    def __init__(self, client: AllReduceClient, chunks: np.ndarray, is_float: bool, base: int,
                 first_exponents: np.ndarray | None = None) -> None:
        self.client = client
        self.cfg = client.config
        self.chunks = chunks
        self.is_float = is_float
        self.base = base
        self.n = len(chunks)
        self.sums = np.zeros_like(chunks, dtype=np.int32)
        self.own_exps = q.chunk_exponents(chunks) if is_float else None
        self.wide = chunks.astype(np.float64) if is_float else None  # quantised one row per packet
        self.agreed = np.zeros(self.n, dtype=np.int64)
        self.primed = first_exponents is not None or not is_float
        if first_exponents is not None:
            first = np.asarray(first_exponents, dtype=np.int64)
            if not is_float or first.shape != (min(self.cfg.slots, self.n),):
                raise ValueError(f"first_exponents: {first.shape[0] if first.ndim == 1 else first.shape} exponents for "
                                 f"a {'float32' if is_float else 'int32'} call of {self.n} chunks on "
                                 f"{self.cfg.slots} slots (float32 only, one per slot used)")
            self.agreed[: first.size] = first
        self.outstanding: dict[int, _Outstanding] = {}
        self.completed = 0

    def start(self) -> None:
        slots = self.cfg.slots
        for s in range(min(slots, self.n)):
            self._send(s if self.primed else s - slots)

    def _send(self, chunk: int) -> None:
        cfg = self.cfg
        slot = chunk % cfg.slots
        nxt = chunk + cfg.slots
        if chunk < 0:
            values = np.zeros(cfg.frame_values, dtype=np.int32)
        elif self.is_float:
            values = q.quantize_row(self.wide[chunk], int(self.agreed[chunk]), cfg.num_workers, chunk)
        else:
            values = self.chunks[chunk]
        exponent = int(self.own_exps[nxt]) if self.is_float and nxt < self.n else 0
        header = AggHeader(
            PktType.CONTRIB, 0, cfg.job_id, slot, self.client.next_set(slot, chunk), cfg.worker_id,
            cfg.num_workers, exponent, wrap_seq(self.base + chunk), cfg.frame_values,
        )
        data = pack_packet(header, values)
        out = _Outstanding(chunk=chunk, seq=header.seq, set_id=header.set_id, data=data, sent_at=time.monotonic())
        self.outstanding[slot] = out
        self.client.endpoint.send(out.data, cfg.aggregator)

    def on_datagram(self, data: bytes) -> None:
        stats = self.client.endpoint.stats
        try:
            pkt = unpack_packet(data)
        except MalformedPacket:
            stats.stale += 1
            return
        h = pkt.header
        if (h.pkt_type != PktType.RESULT or h.job_id != self.cfg.job_id or h.slot >= self.cfg.slots
                or h.frame_values != self.cfg.frame_values):
            stats.stale += 1
            return
        out = self.outstanding.get(h.slot)
        if out is None or h.seq != out.seq or h.set_id != out.set_id:
            # a copy of a result this slot already took (multicast and an answered retransmission)?
            chunk = wrap_seq(h.seq - self.base)
            taken_below = out.chunk if out is not None else self.n
            if chunk % self.cfg.slots == h.slot and -self.cfg.slots <= chunk < taken_below:
                stats.duplicates += 1
            else:
                stats.stale += 1
            return
        self._complete(out, pkt.header, pkt.values)

    def _complete(self, out: _Outstanding, h: AggHeader, values: np.ndarray) -> None:
        c, slots = out.chunk, self.cfg.slots
        if h.flags & FLAG_OVERFLOW:
            first = c * self.cfg.frame_values
            raise OverflowError(
                f"job {self.cfg.job_id}: chunk {c} (elements {first}..{first + self.cfg.frame_values - 1}) "
                f"overflowed int32 at the aggregator"
            )
        del self.outstanding[h.slot]
        if out.retries == 0:  # Karn: a resent chunk's result times nothing
            self.client.rto.sample(time.monotonic() - out.sent_at)
        if c >= 0:
            self.sums[c] = values
            self.completed += 1
        nxt = c + slots
        if nxt < self.n:
            self.agreed[nxt] = h.exponent
            self._send(nxt)

    def retransmit_due(self, now: float) -> float:
        """Resend every chunk whose timeout passed; the time of the next timeout."""
        cfg, estimator = self.cfg, self.client.rto
        rto, resent = estimator.rto, False
        next_due = now + rto
        for slot, out in self.outstanding.items():
            due = out.sent_at + rto
            if due <= now:
                self.client.endpoint.resend(out, cfg.aggregator, now, cfg.max_retries, self._give_up(out, slot))
                resent = True
                due = now + rto
            next_due = min(next_due, due)
        if resent:
            estimator.backoff()  # once per timeout, not per chunk resent
        return next_due

    def _give_up(self, out: _Outstanding, slot: int) -> Callable[[int], AllReduceError]:
        cfg = self.cfg
        return lambda tries: AllReduceError(
            f"job {cfg.job_id}: chunk {out.chunk} (seq {out.seq}) on slot {slot} got no result "
            f"after {tries} retransmissions to {cfg.aggregator[0]}:{cfg.aggregator[1]}"
        )

    def result(self) -> np.ndarray:
        if self.is_float:
            return q.dequantize(self.sums, self.agreed, self.cfg.num_workers)
        return self.sums


class AllReduceClient:
    """One worker of one job. `allreduce` finishes with every worker's sum or raises
    (AllReduceError, OverflowError, ValueError for inf/nan); it never returns a partial result."""

    def __init__(self, config: JobConfig) -> None:
        config.validate()
        self.config = config
        self.endpoint = UdpEndpoint(config.bind, config.drop_outgoing, config.drop_seed)
        self.last_stats = TransferStats()
        self.rto = RtoEstimator(config.timeout, MAX_RTO_S)  # from the results' round trips, kept across calls
        self._base = 0  # seq of the next call's chunk 0
        self._last_set: list[int | None] = [None] * config.slots
        self._failed: str | None = None

    def next_set(self, slot: int, chunk: int) -> int:
        """The set of the next chunk on `slot`: the spec's (c // slots) % 2 on first use, then
        the other set than the slot's previous chunk."""
        last = self._last_set[slot]
        set_id = (chunk // self.config.slots) % 2 if last is None else 1 - last
        self._last_set[slot] = set_id
        return set_id

    def allreduce(self, tensor: np.ndarray, first_exponents: np.ndarray | None = None) -> np.ndarray:
        """Every worker's sum of ``tensor``. ``first_exponents``: the exponents of the first
        min(slots, chunks) chunks all workers agreed on (the max of each one's `first_exponents`),
        for a float32 call: no priming round is sent. Every worker of a call passes them or none does."""
        tensor = np.asarray(tensor)
        if tensor.dtype not in (np.float32, np.int32):
            raise TypeError(f"allreduce takes float32 or int32 tensors, not {tensor.dtype}")
        if self._failed:
            raise AllReduceError(f"job {self.config.job_id}: an earlier allreduce failed ({self._failed})")
        is_float = tensor.dtype == np.float32
        if is_float:
            q.check_finite(tensor)
        call = _Call(self, split_chunks(tensor, self.config.frame_values), is_float, self._base, first_exponents)
        slots = self.config.slots
        self._base += -(-call.n // slots) * slots + slots
        self.endpoint.stats = TransferStats()
        started = time.monotonic()
        try:
            self._run(call)
        except BaseException as exc:  # the job's aggregator state is unknown from here on
            self._failed = str(exc) or type(exc).__name__
            raise
        finally:
            self.endpoint.stats.elapsed_s = time.monotonic() - started
            self.last_stats = self.endpoint.stats
        return call.result().reshape(-1)[: tensor.size].reshape(tensor.shape)

    def _run(self, call: _Call) -> None:
        call.start()
        next_due = time.monotonic() + self.rto.rto
        while call.completed < call.n:
            got = self.endpoint.recv(next_due - time.monotonic())
            if got is not None:
                call.on_datagram(got[0])
            now = time.monotonic()
            if now >= next_due or got is None:
                next_due = call.retransmit_due(now)

    def close(self) -> None:
        self.endpoint.close()

    def __enter__(self) -> AllReduceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_exponents(tensor: np.ndarray, config: JobConfig) -> np.ndarray:
    """This worker's exponents of the chunks a float32 call sends first (one per slot used), for
    the call's header agreement; their max over the workers is `allreduce`'s ``first_exponents``."""
    values = np.asarray(tensor, dtype=np.float32).reshape(-1)
    head = values[: config.slots * config.frame_values]
    return q.chunk_exponents(split_chunks(head, config.frame_values))
