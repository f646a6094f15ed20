"""Host side of in-network aggregation: wire format, quantisation, the aggregator model, the
parameter server with its workers, and the ring baseline, over real UDP sockets on loopback.

Every worker and server binds the spec's port on its own 127.x.y.N address (Linux answers on all
of 127/8); each test draws a fresh 127.x.y.0/24 so that concurrent runs never share an address.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from loopback_ranks import fresh_net, run_parallel

from hostagent.collectives.aggregation import quantize as q
from hostagent.collectives.aggregation.aggregator import Aggregator, Dest, RejectedPacket
from hostagent.collectives.aggregation.protocol import (
    AGG_UDP_PORT,
    AGG_VALUES,
    AggHeader,
    EXPONENT_BIAS,
    FLAG_OVERFLOW,
    FRAME_VALUES,
    INT32_MAX,
    PACKET_BYTES,
    AggPacket,
    MalformedPacket,
    PktType,
    check_frame_values,
    frame_bytes,
    pack_packet,
    split_chunks,
    unpack_packet,
)
from hostagent.collectives.baseline_ring import RingClient, RingConfig, ring_peers
from hostagent.collectives.baseline_ringwire import RingHeader, RingKind, pack_data, unpack_ring
from hostagent.collectives.ps import JobSpec, ParameterServer
from hostagent.collectives.tensors import check_aggregated, check_ring, make_tensors
from hostagent.collectives.aggregation.worker import AllReduceClient, AllReduceError, JobConfig, first_exponents
from hostagent.training import combine

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 0.05  # retransmission timeout of the workers under test
RETRIES = 400  # generous: a loaded machine must not fail a correct protocol
JOIN_SECONDS = 60


def header(**fields: int) -> AggHeader:
    base = dict(pkt_type=PktType.CONTRIB, flags=0, job_id=1, slot=0, set_id=0, worker_id=0,
                num_workers=3, exponent=EXPONENT_BIAS, seq=0)
    base.update(fields)
    return AggHeader(**base)


def contrib(worker: int, values: np.ndarray | int, **fields: int) -> AggPacket:
    h = header(worker_id=worker, **fields)
    vals = np.full(h.frame_values, values, dtype=np.int32) if np.isscalar(values) else np.asarray(values, dtype=np.int32)
    return AggPacket(h, vals)


# --- wire format ---------------------------------------------------------------------------


@pytest.mark.parametrize("frame_values, frame", [(64, 314), (128, 570), (192, 826), (256, 1082), (320, 1338)])
def test_packet_layout_and_round_trip(frame_values: int, frame: int) -> None:
    values = np.arange(frame_values, dtype=np.int32) - 5
    h = header(flags=FLAG_OVERFLOW, job_id=0x1234, slot=0x0203, set_id=1, worker_id=31, num_workers=8,
               exponent=200, seq=-32, frame_values=frame_values)
    data = pack_packet(h, values)
    assert len(data) == 16 + 4 * frame_values and frame_bytes(frame_values) == frame
    assert data[:16] == bytes([0, 1, 0x12, 0x34, 0x02, 0x03, 1, 31, 8, 200, 0xFF, 0xFF, 0xFF, 0xE0]) + \
        frame_values.to_bytes(2, "big")
    assert struct.unpack(f"!{frame_values}i", data[16:]) == tuple(values.tolist())
    back = unpack_packet(data)
    assert back.header == h
    assert back.values.dtype == np.int32 and np.array_equal(back.values, values)
    assert PACKET_BYTES == 272 and FRAME_VALUES == (64, 128, 192, 256, 320)   # the default frame: SwitchML's


@pytest.mark.parametrize(
    "offset, byte, named",
    [(0, 2, "pkt_type"), (1, 0x02, "flags"), (6, 2, "set"), (7, 32, "worker_id"), (15, 65, "frame_values 65")],
)
def test_malformed_fields_are_named(offset: int, byte: int, named: str) -> None:
    data = bytearray(pack_packet(header(), np.zeros(AGG_VALUES, dtype=np.int32)))
    data[offset] = byte
    with pytest.raises(MalformedPacket, match=named):
        unpack_packet(bytes(data))


@pytest.mark.parametrize("frame_values", FRAME_VALUES)
def test_malformed_lengths_and_counts_are_named(frame_values: int) -> None:
    good = pack_packet(header(frame_values=frame_values), np.zeros(frame_values, dtype=np.int32))
    other = 64 if frame_values != 64 else 128
    for data in (good[:-1], good + b"\0", good[:16] + bytes(4 * other), good + bytes(4 * other)):
        with pytest.raises(MalformedPacket, match=f"{len(data)} bytes, expected {len(good)} for its frame_values "
                                                  f"{frame_values}$"):
            unpack_packet(data)
    with pytest.raises(MalformedPacket, match="3 bytes, shorter than the 16-byte header"):
        unpack_packet(good[:3])
    for count in (0, 63, 100, 384, 0xFFFF):          # not 1..5 whole blocks, whatever the length
        bad = good[:14] + count.to_bytes(2, "big") + good[16:]
        with pytest.raises(MalformedPacket, match=f"frame_values {count} is not one of 64, 128, 192, 256, 320"):
            unpack_packet(bad)
    with pytest.raises(MalformedPacket, match=rf"shape \({frame_values - 1},\), expected \({frame_values},\)"):
        pack_packet(header(frame_values=frame_values), np.zeros(frame_values - 1, dtype=np.int32))
    with pytest.raises(MalformedPacket, match="frame_values 96 is not one of"):
        pack_packet(header(frame_values=96), np.zeros(96, dtype=np.int32))


def test_malformed_payloads() -> None:
    with pytest.raises(MalformedPacket, match="dtype"):
        pack_packet(header(), np.zeros(AGG_VALUES, dtype=np.int64))
    with pytest.raises(MalformedPacket, match="job_id"):
        pack_packet(header(job_id=1 << 16), np.zeros(AGG_VALUES, dtype=np.int32))


# --- quantisation --------------------------------------------------------------------------


def quantised_sum(tensors: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(float32 result, agreed exponents, exact float64 sum) as workers and aggregator make them."""
    n = len(tensors)
    chunks = [split_chunks(t) for t in tensors]
    agreed = np.max([q.chunk_exponents(c) for c in chunks], axis=0)
    sums = np.sum([q.quantize(c, agreed, n).astype(np.int64) for c in chunks], axis=0)
    assert np.abs(sums).max(initial=0) <= INT32_MAX  # never overflows int32
    return q.dequantize(sums, agreed, n), agreed, np.sum([c.astype(np.float64) for c in chunks], axis=0)


@pytest.mark.parametrize("n", [2, 3, 8, 255])
def test_quantised_sum_within_bound(n: int) -> None:
    for seed in range(5):
        rng = np.random.default_rng([seed, n])
        size = 64 * 20
        spread = np.repeat(np.ldexp(1.0, rng.integers(-60, 60, (n, 20))), 64, axis=1)
        tensors = [(rng.standard_normal(size) * spread[i]).astype(np.float32) for i in range(n)]
        result, agreed, exact = quantised_sum(tensors)
        bound = q.error_bound(n, agreed, result)
        error = np.abs(result - exact)
        assert np.all(error <= bound), f"seed {seed}: worst ratio {np.max(error / bound)}"
        # the bound is tight enough to mean something: about n**2 quanta of 2**E / 2**31
        assert np.all(bound <= n * n * np.ldexp(1.0, agreed - EXPONENT_BIAS - 30)[:, None] + 2**-22 * np.abs(exact))


def test_largest_magnitudes_do_not_overflow() -> None:
    """n workers all holding the largest float32 (the worst case for the int32 sum)."""
    top = np.finfo(np.float32).max
    chunk = np.full((1, 64), top, dtype=np.float32)
    chunk[0, 5] = -top
    agreed = q.chunk_exponents(chunk)
    assert agreed.tolist() == [128 + EXPONENT_BIAS]
    for n in (1, 2, 3, 7, 8, 100, 255):
        total = q.quantize(chunk, agreed, n).astype(np.int64) * n
        assert np.abs(total).max() <= INT32_MAX
        quantum = 1 / q.scales(n, agreed)[0]
        assert np.all(np.abs(total * quantum - n * chunk.astype(np.float64)) <= n * 0.5 * quantum * (1 + 1e-9))


def test_zero_and_denormal_chunks() -> None:
    zeros = np.zeros(64, dtype=np.float32)
    denormal = np.array([1e-45, -1e-42, 3e-39] + [0.0] * 61, dtype=np.float32)
    big = np.full(64, 1e3, dtype=np.float32)
    tensors = [np.concatenate([zeros, denormal, big, zeros]), np.concatenate([zeros, -denormal * 2, big, denormal])]
    exps = q.chunk_exponents(split_chunks(tensors[0]))
    assert exps.tolist() == [0, 0, 10 + EXPONENT_BIAS, 0]  # zeros and denormals clamp to biased 0
    result, agreed, exact = quantised_sum(tensors)
    assert np.all(result[0] == 0) and np.all(result[0] == exact[0])
    assert np.all(np.abs(result - exact) <= q.error_bound(2, agreed, result))


@pytest.mark.parametrize("bad, index", [(np.inf, 77), (-np.inf, 0), (np.nan, 130)])
def test_non_finite_input_is_refused_with_its_index(bad: float, index: int) -> None:
    x = np.ones(200, dtype=np.float32)
    x[index] = bad
    with pytest.raises(ValueError, match=f"element {index} is"):
        q.chunk_exponents(split_chunks(x))
    with pytest.raises(ValueError, match=f"element {index} is"):
        q.check_finite(x)


def test_quantise_refuses_an_exponent_below_the_chunk_magnitude() -> None:
    chunk = np.full((1, 64), 4.0, dtype=np.float32)  # needs e = 3
    with pytest.raises(ValueError, match="chunk 0"):
        q.quantize(chunk, np.array([2 + EXPONENT_BIAS]), 2)
    with pytest.raises(ValueError, match="chunk 17: magnitude exceeds the agreed exponent 2"):
        q.quantize_row(chunk[0].astype(np.float64), 2 + EXPONENT_BIAS, 2, index=17)
    assert np.array_equal(q.quantize_row(chunk[0].astype(np.float64), 3 + EXPONENT_BIAS, 2), q.quantize(chunk, [130], 2)[0])


@pytest.mark.parametrize("frame_values", FRAME_VALUES)
def test_quantisation_is_per_frame_exactly_as_numpy_computes_it(frame_values: int) -> None:
    """One exponent per frame: the largest magnitude of the frame's values over every worker sets
    the scale of all of them (a 320-value frame has one, where five 64-value frames had five)."""
    n, size = 3, 64 * 17 + 9
    tensors = make_tensors(seed=frame_values, workers=n, size=size, dtype="float32")
    rows = -(-size // frame_values)
    padded = [np.concatenate([t, np.zeros(rows * frame_values - size, np.float32)]).reshape(rows, frame_values)
              for t in tensors]
    peak = np.max([np.abs(t).max(axis=1) for t in padded], axis=0)
    exponent = np.frexp(peak)[1]                                   # |x| < 2**e over the frame and the workers
    scale = (2**31 - 1) / n / np.ldexp(1.0, exponent)
    want = [np.rint(t.astype(np.float64) * scale[:, None]).astype(np.int32) for t in padded]
    chunks = [split_chunks(t, frame_values) for t in tensors]
    agreed = np.max([q.chunk_exponents(c) for c in chunks], axis=0)
    assert agreed.tolist() == (exponent + EXPONENT_BIAS).tolist()
    for c, w in zip(chunks, want):
        assert np.array_equal(q.quantize(c, agreed, n), w)
        assert np.array_equal(q.quantize_row(c[-1].astype(np.float64), int(agreed[-1]), n, rows - 1), w[-1])
    total = np.sum([w.astype(np.int64) for w in want], axis=0)
    result = (total / scale[:, None]).astype(np.float32).reshape(-1)[:size]
    assert np.array_equal(combine.in_network(tensors, frame_values)[0], result)


def test_frame_values_must_be_whole_blocks_up_to_five() -> None:
    assert [check_frame_values(v) for v in FRAME_VALUES] == [64, 128, 192, 256, 320]
    for bad in (0, 32, 96, 384, 64.0):
        with pytest.raises(ValueError, match=rf"frame_values {bad!r} is not a whole number of 64-value blocks"):
            check_frame_values(bad)
        with pytest.raises(ValueError, match=rf"frame_values {bad!r}"):
            JobConfig(job_id=1, worker_id=0, num_workers=2, aggregator=("127.0.0.1", 1), frame_values=bad).validate()
        with pytest.raises(ValueError, match=rf"job 3: frame_values {bad!r}"):
            Aggregator(job_id=3, fan_in=2, slots=4, frame_values=bad)
    assert JobSpec.parse("3:4:16:320") == JobSpec(3, 4, 16, 320) and JobSpec.parse("3:4").frame_values == 64
    with pytest.raises(ValueError, match="JOB:FAN_IN"):
        JobSpec.parse("3:4:16:320:1")


# --- the aggregator model ------------------------------------------------------------------


def test_retransmitted_contribution_is_not_added_twice() -> None:
    agg = Aggregator(job_id=1, fan_in=3, slots=4)
    assert agg.handle(contrib(0, 10)) == []
    assert agg.handle(contrib(0, 10)) == []  # retransmission into an incomplete round: dropped
    assert agg.handle(contrib(1, 20)) == []
    [out] = agg.handle(contrib(2, 30))
    assert out.dest is Dest.CHILDREN and out.packet.header.pkt_type is PktType.RESULT
    assert np.all(out.packet.values == 60)
    assert (agg.stats.contributions, agg.stats.dropped, agg.stats.rounds) == (3, 1, 1)


def test_duplicate_after_done_is_answered_from_the_stored_result() -> None:
    agg = Aggregator(job_id=1, fan_in=2, slots=4)
    agg.handle(contrib(0, 5, slot=2, exponent=130, seq=6))
    [result] = agg.handle(contrib(1, 7, slot=2, exponent=140, seq=6))
    assert result.packet.header.exponent == 140
    [answer] = agg.handle(contrib(1, 999, slot=2, exponent=100, seq=6))  # a retransmission
    assert answer.dest is Dest.SENDER
    h = answer.packet.header
    assert (h.pkt_type, h.slot, h.seq, h.exponent, h.flags) == (PktType.RESULT, 2, 6, 140, 0)
    assert np.all(answer.packet.values == 12)  # the stored sum, not the retransmission's values
    assert agg.stats.answered == 1


def test_answers_carry_the_rounds_seq_and_stale_results_are_refused() -> None:
    agg = Aggregator(job_id=1, fan_in=2, slots=2)
    agg.handle(contrib(0, 1, slot=1, seq=41))
    agg.handle(contrib(1, 2, slot=1, seq=41))
    # worker 1 restarted with a fresh stream and meets the old round: answered with seq 41,
    # which its chunk (seq -1) rejects; never the old sums under its own seq
    [answer] = agg.handle(contrib(1, 0, slot=1, seq=-1))
    assert answer.packet.header.seq == 41
    child = Aggregator(job_id=1, fan_in=1, slots=2, parent_index=0)
    [up] = child.handle(contrib(0, 5, slot=0, seq=7))
    assert up.packet.header.seq == 7
    for stale_seq, slot in ((6, 0), (7, 1)):
        result = AggPacket(header(pkt_type=PktType.RESULT, slot=slot, seq=stale_seq), np.zeros(AGG_VALUES, dtype=np.int32))
        with pytest.raises(RejectedPacket, match="stale RESULT"):
            child.handle(result)
    assert child.cell_state(0, 0)[4] is False  # not DONE: nothing stale was stored


def test_moving_to_the_other_set_clears_the_bit_and_rounds_alternate() -> None:
    agg = Aggregator(job_id=1, fan_in=2, slots=1)
    agg.handle(contrib(0, 1, set_id=0, seq=0))
    agg.handle(contrib(1, 2, set_id=0, seq=0))  # chunk 0 done in set 0
    assert agg.cell_state(0, 0)[:2] == (0b11, 2)
    assert agg.handle(contrib(0, 3, set_id=1, seq=1)) == []  # worker 0 moves on to chunk 1
    assert agg.cell_state(0, 0)[0] == 0b10  # its bit in set 0 is cleared
    [again] = agg.handle(contrib(1, 2, set_id=0, seq=0))  # worker 1 missed chunk 0's result
    assert again.dest is Dest.SENDER and np.all(again.packet.values == 3)
    [done1] = agg.handle(contrib(1, 4, set_id=1, seq=1))
    assert np.all(done1.packet.values == 7) and agg.cell_state(0, 0)[0] == 0
    # chunk 2 reuses set 0: a new round, not a retransmission, although count == fan_in there
    assert agg.handle(contrib(0, 100, set_id=0, seq=2)) == []
    assert agg.cell_state(0, 0)[:2] == (0b01, 1) and not agg.cell_state(0, 0)[4]
    [done2] = agg.handle(contrib(1, 200, set_id=0, seq=2))
    assert np.all(done2.packet.values == 300)


def test_saturating_add_sets_overflow_and_exponent_is_the_max() -> None:
    agg = Aggregator(job_id=1, fan_in=3, slots=2)
    values = np.zeros(AGG_VALUES, dtype=np.int32)
    values[3], values[4] = INT32_MAX, -INT32_MAX
    agg.handle(contrib(0, values, exponent=120))
    agg.handle(contrib(1, values, exponent=150))
    [out] = agg.handle(contrib(2, 1, exponent=130))
    h, v = out.packet.header, out.packet.values
    assert h.flags == FLAG_OVERFLOW and h.exponent == 150
    # saturation is per addition (the spec's rule), the flag is what stays
    assert v[3] == INT32_MAX and v[4] == -(2**31) + 1 and v[0] == 1
    assert agg.stats.overflows == 1


def test_non_root_sends_partials_up_and_passes_results_down() -> None:
    agg = Aggregator(job_id=1, fan_in=2, slots=2, parent_index=5)
    agg.handle(contrib(0, 1, slot=1, seq=9))
    [up] = agg.handle(contrib(1, 2, slot=1, seq=9))
    assert up.dest is Dest.PARENT
    assert (up.packet.header.pkt_type, up.packet.header.worker_id) == (PktType.CONTRIB, 5)
    assert np.all(up.packet.values == 3)
    [resent] = agg.handle(contrib(0, 1, slot=1, seq=9))  # the partial may have been lost
    assert resent.dest is Dest.PARENT and np.all(resent.packet.values == 3)
    total = AggPacket(header(pkt_type=PktType.RESULT, slot=1, seq=9, worker_id=5), np.full(AGG_VALUES, 42, dtype=np.int32))
    [down] = agg.handle(total)
    assert down.dest is Dest.CHILDREN and np.all(down.packet.values == 42)
    [answer] = agg.handle(contrib(1, 2, slot=1, seq=9))
    assert answer.dest is Dest.SENDER and np.all(answer.packet.values == 42)


def test_aggregator_rejects_what_is_not_its_own() -> None:
    agg = Aggregator(job_id=1, fan_in=2, slots=4)
    for pkt, named in [
        (contrib(0, 1, job_id=2), "job 2"),
        (contrib(0, 1, slot=4), "slot 4"),
        (contrib(2, 1), "worker_id 2"),
        (contrib(0, 1, frame_values=128), "a frame of 128 values; the job's frames carry 64"),
        (AggPacket(header(pkt_type=PktType.RESULT), np.zeros(AGG_VALUES, dtype=np.int32)), "root"),
    ]:
        with pytest.raises(RejectedPacket, match=named):
            agg.handle(pkt)


# --- parameter server and workers ----------------------------------------------------------


def ps_clients(net: str, job: int, n: int, slots: int, loss: float = 0.0, first_host: int = 2,
               frame_values: int = AGG_VALUES) -> list[AllReduceClient]:
    return [
        AllReduceClient(JobConfig(
            job_id=job, worker_id=r, num_workers=n, aggregator=(net + "1", AGG_UDP_PORT), slots=slots,
            bind=(net + str(first_host + r), AGG_UDP_PORT), timeout=TIMEOUT, max_retries=RETRIES,
            drop_outgoing=loss, drop_seed=100 + r, frame_values=frame_values,
        ))
        for r in range(n)
    ]


def allreduce_all(clients: list, tensors: list[np.ndarray]) -> list[object]:
    return run_parallel([lambda c=c, t=t: c.allreduce(t) for c, t in zip(clients, tensors)])


def check_all(results: list[object], tensors: list[np.ndarray], checker=check_aggregated) -> None:
    for rank, result in enumerate(results):
        assert isinstance(result, np.ndarray), f"rank {rank}: {result!r}"
        assert result.dtype == tensors[0].dtype and result.shape == tensors[0].shape
        check = checker(result, tensors)
        assert check.ok, f"rank {rank}: error {check.max_abs_error} over bound {check.bound}"
    assert all(np.array_equal(results[0], r) for r in results[1:]), "workers got different sums"


@pytest.mark.parametrize("n, frame_values", [(2, 64), (3, 64), (8, 64), (3, 128), (8, 192), (2, 256), (3, 320)])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_ps_allreduce_equals_numpy(n: int, frame_values: int, dtype: str) -> None:
    net = fresh_net()
    size = 64 * 37 + 5  # 38 chunks of 64 over 8 slots (8 of 320), the last chunk not full
    tensors = make_tensors(seed=n, workers=n, size=size, dtype=dtype)
    with ParameterServer([JobSpec(1, n, 8, frame_values)], (net + "1", AGG_UDP_PORT)).start() as ps:
        clients = ps_clients(net, 1, n, slots=8, frame_values=frame_values)
        try:
            results = allreduce_all(clients, tensors)
            check_all(results, tensors, partial(check_aggregated, frame_values=frame_values))
        finally:
            for c in clients:
                c.close()
        if dtype == "float32":     # bit for bit what the training reference computes in one process
            assert np.array_equal(results[0], combine.in_network(tensors, frame_values)[0])
        chunks = -(-size // frame_values)
        packets = chunks + (min(8, chunks) if dtype == "float32" else 0)  # chunks (+ the priming round)
        assert ps.snapshot()["contributions"] == n * packets
        assert all(c.last_stats.packets_sent - c.last_stats.retransmissions == packets for c in clients)
        assert all(c.last_stats.bytes_sent == (c.last_stats.packets_sent) * (16 + 4 * frame_values) for c in clients)


def test_exponents_agreed_beforehand_replace_the_priming_round() -> None:
    """Workers given the max of their `first_exponents` (what a process group's header agreement
    brings) send no priming frame and get, bit for bit, the sums of primed workers; primed and
    unprimed calls follow each other on one job with its slots' sets alternating."""
    net, n, slots = fresh_net(), 3, 8
    size = 64 * 37 + 5
    tensors = make_tensors(seed=5, workers=n, size=size, dtype="float32")
    tensors[1][:64] *= 1e6            # the first chunk's shared exponent is rank 1's
    with ParameterServer([JobSpec(6, n, slots)], (net + "1", AGG_UDP_PORT)).start() as ps:
        clients = ps_clients(net, 6, n, slots=slots)
        try:
            first = np.max([first_exponents(t, clients[0].config) for t in tensors], axis=0)
            assert first.shape == (slots,)
            primed = allreduce_all(clients, tensors)
            before = ps.snapshot()["contributions"]
            agreed = run_parallel([lambda c=c, t=t: c.allreduce(t, first_exponents=first)
                                   for c, t in zip(clients, tensors)])
            chunks = -(-size // 64)
            assert ps.snapshot()["contributions"] - before == n * chunks
            assert all(c.last_stats.packets_sent - c.last_stats.retransmissions == chunks for c in clients)
            check_all(agreed, tensors)
            assert all(np.array_equal(a, b) for a, b in zip(agreed, primed))
            check_all(allreduce_all(clients, tensors), tensors)          # primed again after
            with pytest.raises(ValueError, match="first_exponents: 7 exponents"):
                clients[0].allreduce(tensors[0], first_exponents=first[:7])
        finally:
            for c in clients:
                c.close()


@pytest.mark.parametrize("size", [1, 63, 65, 64 * 8])
def test_ps_small_and_ragged_sizes(size: int) -> None:
    net = fresh_net()
    tensors = make_tensors(seed=size, workers=3, size=size, dtype="float32")
    with ParameterServer([JobSpec(4, 3, 16)], (net + "1", AGG_UDP_PORT)).start():
        clients = ps_clients(net, 4, 3, slots=16)
        try:
            check_all(allreduce_all(clients, tensors), tensors)
        finally:
            for c in clients:
                c.close()


def test_successive_calls_keep_the_slots_sets_alternating() -> None:
    net = fresh_net()
    with ParameterServer([JobSpec(2, 3, 4)], (net + "1", AGG_UDP_PORT)).start():
        clients = ps_clients(net, 2, 3, slots=4)
        try:
            for call, (size, dtype) in enumerate([(64 * 5 + 1, "float32"), (64 * 2, "int32"), (64 * 7, "float32"), (3, "int32")]):
                tensors = make_tensors(seed=call, workers=3, size=size, dtype=dtype)
                check_all(allreduce_all(clients, tensors), tensors)
        finally:
            for c in clients:
                c.close()


@pytest.mark.parametrize("loss", [0.01, 0.05])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_ps_allreduce_survives_send_loss(loss: float, dtype: str) -> None:
    net = fresh_net()
    n, size = 4, 64 * 60 + 17
    tensors = make_tensors(seed=7, workers=n, size=size, dtype=dtype)
    with ParameterServer([JobSpec(9, n, 16)], (net + "1", AGG_UDP_PORT), drop_outgoing=loss, drop_seed=1).start() as ps:
        clients = ps_clients(net, 9, n, slots=16, loss=loss)
        try:
            check_all(allreduce_all(clients, tensors), tensors)
            dropped = sum(c.last_stats.dropped_on_purpose for c in clients) + ps.snapshot()["dropped_on_purpose"]
            assert dropped > 0
            assert sum(c.last_stats.retransmissions for c in clients) > 0
        finally:
            for c in clients:
                c.close()


def test_two_jobs_share_one_parameter_server() -> None:
    net = fresh_net()
    jobs = [JobSpec(1, 2, 8), JobSpec(2, 3, 4)]
    t1 = make_tensors(seed=1, workers=2, size=64 * 30 + 3, dtype="float32")
    t2 = make_tensors(seed=2, workers=3, size=64 * 25 + 9, dtype="int32")
    with ParameterServer(jobs, (net + "1", AGG_UDP_PORT)).start() as ps:
        c1 = ps_clients(net, 1, 2, slots=8)
        c2 = ps_clients(net, 2, 3, slots=4, first_host=10)
        try:
            results = run_parallel([lambda c=c, t=t: c.allreduce(t) for c, t in zip(c1 + c2, t1 + t2)])
            check_all(results[:2], t1)
            check_all(results[2:], t2)
        finally:
            for c in c1 + c2:
                c.close()
        assert ps.snapshot()["rounds"] == (31 + 8) + 26


def test_ps_counts_frames_not_of_the_jobs_size() -> None:
    net = fresh_net()
    with ParameterServer([JobSpec(1, 2, 4, 320)], (net + "1", AGG_UDP_PORT)) as ps:
        frame = pack_packet(header(frame_values=320), np.ones(320, dtype=np.int32))
        ps.handle_datagram(pack_packet(header(), np.ones(64, dtype=np.int32)), (net + "2", AGG_UDP_PORT))
        ps.handle_datagram(frame[:-4], (net + "2", AGG_UDP_PORT))      # shorter than its frame_values says
        ps.handle_datagram(frame, (net + "2", AGG_UDP_PORT))
        counters = ps.snapshot()
    assert (counters["rejected"], counters["malformed"], counters["contributions"]) == (1, 1, 1)


def test_int32_overflow_raises_naming_the_chunk() -> None:
    net = fresh_net()
    tensors = [np.ones(64 * 4, dtype=np.int32) for _ in range(2)]
    tensors[0][130] = INT32_MAX  # chunk 2
    with ParameterServer([JobSpec(3, 2, 8)], (net + "1", AGG_UDP_PORT)).start():
        clients = ps_clients(net, 3, 2, slots=8)
        try:
            for result in allreduce_all(clients, tensors):
                assert isinstance(result, OverflowError) and "chunk 2 " in str(result), result
            with pytest.raises(AllReduceError, match="earlier allreduce failed"):
                clients[0].allreduce(tensors[1])
        finally:
            for c in clients:
                c.close()


def test_stale_results_are_ignored() -> None:
    """A hand-written aggregator answers every contribution first with copies that differ in
    seq, set or job, then with the real result: the worker takes only the real one."""
    net = fresh_net()
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((net + "1", AGG_UDP_PORT))
    server.settimeout(0.2)
    agg = Aggregator(job_id=5, fan_in=1, slots=2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = server.recvfrom(2048)
            except socket.timeout:
                continue
            pkt = unpack_packet(data)
            for out in agg.handle(pkt):
                h, junk = out.packet.header, np.full(AGG_VALUES, -7, dtype=np.int32)
                for bad in (dict(seq=h.seq + 2), dict(set_id=1 - h.set_id), dict(job_id=6), dict(slot=1 - h.slot)):
                    server.sendto(pack_packet(replace(h, **bad), junk), addr)
                server.sendto(pack_packet(out.packet.header, out.packet.values), addr)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        [client] = ps_clients(net, 5, 1, slots=2)
        with client:
            tensor = np.arange(64 * 3, dtype=np.int32)
            assert np.array_equal(client.allreduce(tensor), tensor)
            assert client.last_stats.stale + client.last_stats.duplicates >= 4 * 3
    finally:
        stop.set()
        thread.join()
        server.close()


def test_worker_gives_up_naming_job_chunk_and_slot() -> None:
    net = fresh_net()
    config = JobConfig(job_id=11, worker_id=0, num_workers=2, aggregator=(net + "1", AGG_UDP_PORT), slots=4,
                       bind=(net + "2", AGG_UDP_PORT), timeout=0.01, max_retries=3)
    with AllReduceClient(config) as client:
        with pytest.raises(AllReduceError, match=r"job 11: chunk 0 \(seq 0\) on slot 0 .* after 3 retransmissions"):
            client.allreduce(np.ones(10, dtype=np.int32))
        assert client.last_stats.retransmissions == 3 * 1


# --- ring ----------------------------------------------------------------------------------


def ring_clients(net: str, n: int, loss: float = 0.0, frame_values: int = 64) -> list[RingClient]:
    peers = ring_peers([net + str(2 + r) for r in range(n)])
    return [
        RingClient(RingConfig(rank=r, peers=peers, job_id=3, window=16, timeout=TIMEOUT, max_retries=RETRIES,
                              drop_outgoing=loss, drop_seed=200 + r, frame_values=frame_values))
        for r in range(n)
    ]


def close_all(clients: list[RingClient]) -> None:
    run_parallel([c.close for c in clients])  # each lingers for its neighbour's late retransmissions


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_ring_allreduce_equals_numpy(n: int, dtype: str) -> None:
    net = fresh_net()
    size = 64 * 5 * n + 29  # six packets per segment, the last ones padding
    tensors = make_tensors(seed=n, workers=n, size=size, dtype=dtype)
    clients = ring_clients(net, n)
    try:
        check_all(allreduce_all(clients, tensors), tensors, check_ring)
        assert clients[0].last_stats.bytes_sent >= 2 * (n - 1) * 6 * (20 + 256)
    finally:
        close_all(clients)


@pytest.mark.parametrize("frame_values", [192, 320])
def test_ring_allreduce_in_larger_frames_equals_numpy(frame_values: int) -> None:
    """The baseline ring in the frames an in-network job of that size uses: fewer, larger DATA
    packets (their payload on the wire is frame_values x 4 bytes), the same sums."""
    net, n = fresh_net(), 3
    size = frame_values * 4 * n + 5            # five packets per segment, the last one mostly padding
    tensors = make_tensors(seed=7, workers=n, size=size, dtype="int32")
    clients = ring_clients(net, n, frame_values=frame_values)
    try:
        check_all(allreduce_all(clients, tensors), tensors, check_ring)
        stats = clients[0].last_stats
        assert stats.bytes_sent >= 2 * (n - 1) * 5 * (20 + 4 * frame_values)
        assert stats.packets_sent < 2 * 2 * (n - 1) * 5          # DATA and at most as many ACKs
    finally:
        close_all(clients)


def test_ring_data_of_another_frame_size_is_refused() -> None:
    """A ring of 320-value frames takes a 64-value DATA packet for a malformed one, not a chunk."""
    header = RingHeader(RingKind.DATA, 0, 0, rank=0, job_id=3, op=0, seq=0)
    small = pack_data(header, np.zeros(64, dtype=np.int32))
    with pytest.raises(MalformedPacket, match="expected 1300"):
        unpack_ring(small, 320)
    assert unpack_ring(pack_data(header, np.arange(320, dtype=np.int32)), 320)[1].tolist() == list(range(320))


@pytest.mark.parametrize("n, loss", [(3, 0.01), (3, 0.05), (8, 0.05)])
def test_ring_allreduce_survives_send_loss(n: int, loss: float) -> None:
    net = fresh_net()
    clients = ring_clients(net, n, loss)
    try:
        for call, dtype in enumerate(["int32", "float32"]):
            tensors = make_tensors(seed=call, workers=n, size=64 * 12 * n + 7, dtype=dtype)
            check_all(allreduce_all(clients, tensors), tensors, check_ring)
        assert sum(c.last_stats.dropped_on_purpose for c in clients) > 0
        assert sum(c.last_stats.retransmissions for c in clients) > 0
    finally:
        close_all(clients)


def test_ring_int32_overflow_raises_on_every_rank() -> None:
    net = fresh_net()
    tensors = [np.ones(64 * 6, dtype=np.int32) for _ in range(3)]
    tensors[1][200] = INT32_MAX
    clients = ring_clients(net, 3)
    try:
        for result in allreduce_all(clients, tensors):
            assert isinstance(result, OverflowError) and "elements 192..255" in str(result), result
    finally:
        close_all(clients)


# --- command line --------------------------------------------------------------------------


def cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hostagent.collectives", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=JOIN_SECONDS)
    return proc.returncode, out, err


def test_cli_parameter_server_and_workers() -> None:
    net = fresh_net()
    ps = cli("ps", "--bind", net + "1", "--job", "7:3:8:192", "--drop-outgoing", "0.02")
    assert "192 values a frame" in ps.stderr.readline()
    workers = [
        cli("worker", "--ps", net + "1", "--job", "7", "--workers", "3", "--rank", str(r), "--slots", "8",
            "--frame-values", "192", "--bind", net + str(2 + r), "--size", "3000", "--dtype", "float32",
            "--seed", "4", "--timeout", "0.05", "--retries", "200", "--drop-outgoing", "0.02")
        for r in range(3)
    ]
    reports = []
    for w in workers:
        code, out, err = finish(w)
        assert code == 0, err
        reports.append(json.loads(out))
    ps.send_signal(signal.SIGTERM)
    code, out, err = finish(ps)
    assert code == 0, err
    counters = json.loads(out)
    for rank, report in enumerate(reports):
        assert report["ok"] and report["rank"] == rank and report["algorithm"] == "ps"
        assert report["elements"] == 3000 and report["tensor_bytes"] == 12000 and report["frame_values"] == 192
        assert 0 < report["max_abs_error"] <= report["bound"]
    assert counters["packets_in"] >= sum(r["packets_sent"] - r["dropped_on_purpose"] for r in reports)
    assert counters["dropped_on_purpose"] > 0


def test_cli_ring() -> None:
    net = fresh_net()
    peers = ",".join(net + str(2 + r) for r in range(3))
    procs = [cli("ring", "--peers", peers, "--rank", str(r), "--size", "5000", "--dtype", "int32",
                 "--timeout", "0.05", "--retries", "200") for r in range(3)]
    for rank, proc in enumerate(procs):
        code, out, err = finish(proc)
        assert code == 0, err
        report = json.loads(out)
        assert report["ok"] and report["algorithm"] == "ring" and report["rank"] == rank
        assert report["max_abs_error"] == 0 and report["bytes_sent"] > 5000 * 4 * 2 * 2 / 3


def test_cli_failures_exit_non_zero_with_one_line() -> None:
    net = fresh_net()
    lonely = cli("worker", "--ps", net + "1", "--job", "1", "--workers", "2", "--rank", "0", "--bind", net + "2",
                 "--size", "100", "--timeout", "0.01", "--retries", "2")
    code, out, err = finish(lonely)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: job 1: chunk 0 (seq 0) on slot 0")
    code, out, err = finish(cli("worker", "--ps", net + "1", "--job", "1", "--workers", "2", "--rank", "0",
                                "--size", "100", "--frame-values", "100"))
    assert code == 2 and "--frame-values: invalid choice: 100 (choose from 64, 128, 192, 256, 320)" in err

    ps = cli("ps", "--bind", net + "1", "--job", "1:2", "--duration", "20")
    assert "listening" in ps.stderr.readline()
    workers = [cli("worker", "--ps", net + "1", "--job", "1", "--workers", "2", "--rank", str(r),
                   "--bind", net + str(2 + r), "--size", "640", "--dtype", "int32", "--int-max", str(INT32_MAX),
                   "--timeout", "0.05") for r in range(2)]
    for w in workers:
        code, out, err = finish(w)
        assert code == 1 and out == "" and err.count("\n") == 1
        assert "overflowed int32" in err
    ps.kill()
    ps.wait()


def test_ring_answers_a_late_retransmission_after_the_call_returned() -> None:
    """The left neighbour's final ack can be lost while this rank has already returned (and the
    application waits for something else): the rank still acknowledges the retransmission."""
    net = fresh_net()
    peers = ring_peers([net + "2", net + "3"])
    clients = [RingClient(RingConfig(rank=r, peers=peers, job_id=3, timeout=0.5)) for r in range(2)]
    tensors = make_tensors(seed=1, workers=2, size=64 * 4, dtype="int32")
    try:
        check_all(allreduce_all(clients, tensors), tensors, check_ring)
        replay = pack_data(RingHeader(RingKind.DATA, 0, 0, rank=0, job_id=3, op=0, seq=0), np.zeros(AGG_VALUES, dtype=np.int32))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            raw.bind((net + "9", 0))
            raw.sendto(replay, peers[1])
        give_up = time.monotonic() + 5  # the answer comes from rank 1 on its own, without close()
        while clients[1].linger_stats.duplicates == 0 and time.monotonic() < give_up:
            time.sleep(0.01)
        assert clients[1].linger_stats.duplicates == 1 and clients[1].linger_stats.packets_sent == 1  # the ack
    finally:
        close_all(clients)
    assert clients[0].linger_stats.packets_received == 1  # it reached rank 0


def test_worker_timeout_follows_the_round_trip() -> None:
    """A relay holds every packet 0.1 s each way (round trip 0.2 s) against a first timeout of
    0.02 s: the worker's timeout backs off and then follows the measured round trips, so beyond
    the first wave (8 slots, each resent about 4 times while the timeout doubles past 0.2 s)
    chunks are seldom sent again: fewer resends than chunks, where a fixed 0.02 s resends each
    about 10 times and a timeout reset to 0.02 s after every answer about 4 times. The margin
    over the first wave's 32 is for a busy machine, where the relay's thread is late."""
    import heapq
    import socket
    import threading

    net, delay, chunks = fresh_net(), 0.1, 80
    relay = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    relay.bind((net + "9", AGG_UDP_PORT))
    relay.settimeout(0.005)
    worker_addr, ps_addr = (net + "2", AGG_UDP_PORT), (net + "1", AGG_UDP_PORT)
    stop = threading.Event()

    def forward() -> None:
        queue: list = []
        while not stop.is_set():
            try:
                data, src = relay.recvfrom(2048)
                heapq.heappush(queue, (time.monotonic() + delay, data, ps_addr if src == worker_addr else worker_addr))
            except socket.timeout:
                pass
            while queue and queue[0][0] <= time.monotonic():
                _, data, dst = heapq.heappop(queue)
                relay.sendto(data, dst)

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    tensor = np.arange(64 * chunks, dtype=np.int32)
    try:
        with ParameterServer([JobSpec(12, 1, 8)], ps_addr).start():
            config = JobConfig(job_id=12, worker_id=0, num_workers=1, aggregator=(net + "9", AGG_UDP_PORT), slots=8,
                               bind=worker_addr, timeout=0.02, max_retries=50)
            with AllReduceClient(config) as client:
                assert np.array_equal(client.allreduce(tensor), tensor)
                resent = client.last_stats.retransmissions
                assert client.rto.srtt is not None and client.rto.srtt >= 2 * delay
    finally:
        stop.set()
        thread.join()
        relay.close()
    assert resent < chunks, f"{resent} retransmissions of {chunks} chunks"
