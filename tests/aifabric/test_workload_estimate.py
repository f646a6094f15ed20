"""The analytic link-bound step time against one worked out by hand, and the scale factor:
bytes and compute shrink together, so the emulated iteration is the real one dilated."""
from __future__ import annotations

import pytest

from aifabric.workloads import Job, ModelShape, Parallelism, Scale, estimate, fit, generate
from aifabric.workloads.scale import CANNOT_PRESERVE

SMALL = ModelShape(name="small", layers=4, hidden=64, ffn=256, heads=4, seq_len=16, vocab=100)
RATE = 800e9 / 8                              # 800 Gb/s: 1e11 bytes/s
LAYER_BYTES = (12 * 64 * 64 + 2 * 64) * 2     # a layer's gradients: 98560 bytes
EMBEDDING_BYTES = 100 * 64 * 2                # 12800
FINAL_NORM_BYTES = 64 * 2                      # the norm before the output layer
# per rank: b=2 sequences; forward of a layer 24*b*s*h^2*(1 + s/6h), logits 2*b*s*h*V; backward twice
LAYER_FWD_FLOPS = 24 * 2 * 16 * 64 * 64 * (1 + 16 / (6 * 64))
COMPUTE_S = 3 * (4 * LAYER_FWD_FLOPS + 2 * 2 * 16 * 64 * 100) / 1e12


def job(bucket_mb: float) -> Job:
    return Job(SMALL, Parallelism(dp=2, micro_batch=2, bucket_mb=bucket_mb), sustained_tflops=1)


def test_one_bucket_reduced_after_backward_adds_its_whole_time():
    est = estimate(generate(job(bucket_mb=100), Scale(real_link_gbps=800)))
    # all-reduce of 2 ranks: bytes * 2(n-1)/n = bytes on the link
    by_hand = COMPUTE_S + (4 * LAYER_BYTES + FINAL_NORM_BYTES + EMBEDDING_BYTES) / RATE
    assert est.step_s == pytest.approx(by_hand, rel=1e-9)
    assert est.ranks[0].compute_s == pytest.approx(COMPUTE_S, rel=1e-9)
    assert est.ranks[0].exposed_comm_s == pytest.approx(by_hand - COMPUTE_S, rel=1e-9)


def test_buckets_per_layer_hide_all_but_the_last_behind_backward():
    # a layer's backward (6.6 us) outlasts its bucket's all-reduce (1 us): only layer 0's bucket
    # and the embedding's, both ready when backward ends, are exposed
    est = estimate(generate(job(bucket_mb=0.1), Scale(real_link_gbps=800)))
    assert est.step_s == pytest.approx(COMPUTE_S + (LAYER_BYTES + EMBEDDING_BYTES) / RATE, rel=1e-9)
    assert est.ranks[0].comm_s_by_kind["all_reduce"] == pytest.approx(
        (4 * LAYER_BYTES + FINAL_NORM_BYTES + EMBEDDING_BYTES) / RATE)


def test_in_network_data_parallel_all_reduces_cross_each_link_once():
    # groups of 4: a ring all-reduce puts 2(n-1)/n = 1.5 x the bytes on each link, the switches
    # 1 x; the TP all-reduces (groups of 4 too) stay on the ring's factor
    par = Parallelism(dp=4, tp=4, micro_batch=2, bucket_mb=100)
    w = generate(Job(SMALL, par, sustained_tflops=1), Scale(real_link_gbps=800))
    ring, switches = estimate(w), estimate(w, in_network=True)
    dp_bytes = sum(op.bytes for op in w.ops(0) if op.stream.value == "dp")
    assert dp_bytes > 0
    assert ring.ranks[0].comm_s_by_kind["all_reduce"] - switches.ranks[0].comm_s_by_kind["all_reduce"] == \
        pytest.approx(dp_bytes * (1.5 - 1.0) / RATE, rel=1e-9)
    assert ring.step_s - switches.step_s == pytest.approx(dp_bytes * 0.5 / RATE, rel=1e-9)   # the last bucket is exposed


def test_the_emulated_iteration_is_the_real_one_dilated():
    w = generate(Job(SMALL, Parallelism(dp=2, tp=2, pp=2, micro_batch=2, micro_batches=4, bucket_mb=0.1)),
                 Scale(factor=64, real_link_gbps=400, emulated_link_mbps=10))
    real, emulated = estimate(w), estimate(w, emulated=True)
    assert w.scale.time_dilation == pytest.approx(400e9 / (64 * 10e6))
    assert emulated.step_s == pytest.approx(real.step_s * w.scale.time_dilation, rel=1e-9)
    for r_real, r_emu in zip(real.ranks, emulated.ranks):
        assert r_emu.exposed_comm_s / r_emu.step_s == pytest.approx(r_real.exposed_comm_s / r_real.step_s)
    for op in w.all_ops():
        assert op.emulated_bytes * 64 == op.bytes
        assert op.emulated_seconds == pytest.approx(op.seconds * w.scale.time_dilation)


def test_fit_picks_the_factor_that_makes_the_iteration_last_the_target():
    shape_job = Job(SMALL, Parallelism(dp=2, pp=2, micro_batch=2, micro_batches=4))
    real = estimate(generate(shape_job)).step_s
    scale = fit(real, target_seconds=2.0, emulated_link_mbps=1.2)
    assert estimate(generate(shape_job, scale), emulated=True).step_s == pytest.approx(2.0, rel=0.01)


def test_scaled_sizes_round_up_and_the_limits_are_stated():
    s = Scale(factor=1000)
    assert (s.bytes(98560), s.bytes(1), s.bytes(0)) == (99, 1, 0)
    assert any(item.startswith("latency") for item in CANNOT_PRESERVE)
    assert any(item.startswith("per-packet overheads") for item in CANNOT_PRESERVE)
    assert s.to_dict()["cannot_preserve"] == list(CANNOT_PRESERVE)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_a_pipeline_with_free_links_takes_m_plus_p_minus_1_slots(schedule: str):
    # vocabulary 1: the logits are negligible, so the stages are even; links at 10^9 Gb/s: free
    shape = ModelShape(name="p", layers=8, hidden=64, ffn=256, heads=4, seq_len=16, vocab=1)
    w = generate(Job(shape, Parallelism(pp=4, micro_batch=2, micro_batches=6, schedule=schedule), sustained_tflops=1),
                 Scale(real_link_gbps=1e9))
    forward = 2 * LAYER_FWD_FLOPS / 1e12       # a stage's 2 layers, one micro-batch
    assert estimate(w).step_s == pytest.approx((6 + 4 - 1) * 3 * forward, rel=2e-3)
