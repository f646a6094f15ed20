"""The workload generator's sizes against numbers worked out by hand for small models: bytes of
each collective per layer (TP), gradients (DP = parameters x dtype size), activations between
pipeline stages, MoE all-to-all, and FLOPs against Megatron-LM's closed form."""
from __future__ import annotations

import pytest

from aifabric.workloads import Job, Kind, ModelShape, Parallelism, generate
from aifabric.workloads.flops import megatron_iteration_flops, model_params
from aifabric.workloads.presets import PRESETS

# h=64, f=4h=256, s=16, V=100, 4 layers, bf16 (2 bytes); micro-batches of b=2 sequences
SMALL = ModelShape(name="small", layers=4, hidden=64, ffn=256, heads=4, seq_len=16, vocab=100)
ACTIVATIONS = 2 * 16 * 64 * 2               # b*s*h*dtype = 4096 bytes
LAYER_PARAMS = 4 * 64 * 64 + 8 * 64 * 64 + 2 * 64      # attention 4h^2 + MLP 2*h*4h + two norms 2h = 49280


def ops_of(job: Job, rank: int, kind: Kind, stream: str | None = None) -> list:
    return [op for op in generate(job).ops(rank) if op.kind is kind and (stream is None or op.stream.value == stream)]


def test_tp_all_reduces_per_layer_are_b_s_h_dtype_bytes_twice_forward_twice_backward():
    job = Job(SMALL, Parallelism(tp=2, micro_batch=2, micro_batches=3))
    ops = ops_of(job, 0, Kind.ALL_REDUCE, "tp")
    assert {op.bytes for op in ops} == {ACTIVATIONS}
    per_layer = [op for op in ops if "mb1 L2" in op.name]
    assert [(op.name.split()[2], op.name.split()[-1]) for op in per_layer] == [
        ("fwd", "attention"), ("fwd", "mlp"), ("bwd", "mlp"), ("bwd", "attention")]
    assert len(ops) == 4 * 4 * 3                # 4 per layer, 4 layers, 3 micro-batches
    assert all(op.group == (0, 1) for op in ops)


def test_dp_gradients_are_the_parameters_times_the_dtype_size():
    job = Job(SMALL, Parallelism(dp=2, micro_batch=2, micro_batches=2, bucket_mb=0.2))
    grads = ops_of(job, 0, Kind.ALL_REDUCE, "dp")
    params = 4 * LAYER_PARAMS + 64 + 100 * 64    # layers + the final norm h + tied embedding V*h = 203584
    assert sum(op.bytes for op in grads) == params * 2 == 407168
    assert len(grads) > 1                   # 0.2 MB buckets: several
    assert all(op.group == (0, 1) for op in grads)


def test_dp_gradients_split_tp_and_pp_ways():
    job = Job(SMALL, Parallelism(dp=2, tp=2, pp=2, micro_batch=2, bucket_mb=100))
    # stage 0, TP rank 0: 2 layers of (attention 4h^2/2 + MLP 8h^2/2 + norms 2h), embedding V*h/2
    stage0 = 2 * (2 * 64 * 64 + 4 * 64 * 64 + 2 * 64) + 100 * 64 // 2
    # last stage: 2 layers, the final norm h and the tied output layer's copy V*h/2 (Megatron keeps one there)
    stage1 = 2 * (2 * 64 * 64 + 4 * 64 * 64 + 2 * 64) + 64 + 100 * 64 // 2
    w = generate(job)
    last = job.parallelism.rank(dp=0, pp=1, tp=0)
    assert [op.bytes for op in w.ops(0) if op.stream.value == "dp"] == [stage0 * 2]
    assert [op.bytes for op in w.ops(last) if op.stream.value == "dp"] == [stage1 * 2]


def test_a_whole_model_s_gradients_on_one_stage_equal_its_parameter_count():
    llama_like = ModelShape(name="l", layers=2, hidden=64, ffn=172, heads=4, seq_len=16, vocab=100,
                            gated_mlp=True, tied_embeddings=False)
    job = Job(llama_like, Parallelism(dp=2))
    grads = ops_of(job, 0, Kind.ALL_REDUCE, "dp")
    # per layer: attention 4h^2, SwiGLU 3*h*f, norms 2h; the final norm h; embedding and untied output 2*V*h
    by_hand = 2 * (4 * 64 * 64 + 3 * 64 * 172 + 2 * 64) + 64 + 2 * 100 * 64
    assert sum(op.bytes for op in grads) == by_hand * 2 == model_params(llama_like) * 2


def test_pp_sends_and_receives_one_micro_batch_s_activations_each_way():
    job = Job(SMALL, Parallelism(pp=2, micro_batch=2, micro_batches=3))
    w = generate(job)
    sends0 = [op for op in w.ops(0) if op.kind is Kind.SEND]
    recvs0 = [op for op in w.ops(0) if op.kind is Kind.RECV]
    sends1 = [op for op in w.ops(1) if op.kind is Kind.SEND]
    recvs1 = [op for op in w.ops(1) if op.kind is Kind.RECV]
    assert [op.bytes for op in sends0 + recvs0 + sends1 + recvs1] == [ACTIVATIONS] * 12
    assert all(op.group == (0, 1) for op in sends0 + recvs1)        # activations forward
    assert all(op.group == (1, 0) for op in sends1 + recvs0)        # gradients backward
    assert sorted(op.key for op in sends0) == sorted(op.key for op in recvs1)


def test_moe_all_to_all_bytes_are_tokens_times_top_k_times_hidden_times_dtype():
    moe = ModelShape(name="moe", layers=2, hidden=64, ffn=128, heads=4, seq_len=16, vocab=100, experts=4, top_k=2)
    job = Job(moe, Parallelism(dp=4, ep=2, micro_batch=2, micro_batches=1, bucket_mb=100))
    w = generate(job)
    a2a = [op for op in w.ops(0) if op.kind is Kind.ALL_TO_ALL]
    assert {op.bytes for op in a2a} == {2 * 16 * 2 * 64 * 2}        # b*s tokens * k * h * dtype = 8192
    assert len(a2a) == 2 * 4                # 2 layers x (dispatch, combine) x (forward, backward)
    assert {op.group for op in a2a} == {(0, 1)}
    assert {op.group for op in w.ops(2) if op.kind is Kind.ALL_TO_ALL} == {(2, 3)}
    grads = [op for op in w.ops(0) if op.stream.value == "dp"]
    dense = [op for op in grads if op.group == (0, 1, 2, 3)]
    expert = [op for op in grads if op.group == (0, 2)]              # ranks holding the same 2 experts
    # dense: attention 4h^2 + router h*E + norms 2h per layer, embedding V*h; experts: 2 of 2*h*f each
    assert sum(op.bytes for op in dense) == (2 * (4 * 64 * 64 + 64 * 4 + 2 * 64) + 64 + 100 * 64) * 2
    assert sum(op.bytes for op in expert) == 2 * (2 * 2 * 64 * 128) * 2


def test_zero_1_reduce_scatters_gradients_and_all_gathers_parameters():
    job = Job(SMALL, Parallelism(dp=2, micro_batch=2, bucket_mb=0.2, zero_stage=1))
    w = generate(job)
    dp = [op for op in w.ops(0) if op.stream.value == "dp"]
    total = (4 * LAYER_PARAMS + 64 + 100 * 64) * 2
    assert sum(op.bytes for op in dp if op.kind is Kind.REDUCE_SCATTER) == total
    assert sum(op.bytes for op in dp if op.kind is Kind.ALL_GATHER) == total
    assert not [op for op in dp if op.kind is Kind.ALL_REDUCE]


def test_zero_3_gathers_each_layer_s_parameters_before_forward_and_backward_every_micro_batch():
    job = Job(SMALL, Parallelism(dp=2, micro_batch=2, micro_batches=3, bucket_mb=0.2, zero_stage=3))
    w = generate(job)
    gathers = [op for op in w.ops(0) if op.kind is Kind.ALL_GATHER]
    assert len(gathers) == 2 * 4 * 3 and {op.bytes for op in gathers} == {LAYER_PARAMS * 2}
    assert sum(op.bytes for op in w.ops(0) if op.kind is Kind.REDUCE_SCATTER) == (4 * LAYER_PARAMS + 64 + 100 * 64) * 2
    by_name = {op.name: op for op in gathers}
    for op in w.ops(0):     # a layer's first compute each pass waits for that pass's gather
        words = op.name.split()
        if op.is_compute and words[-1] in ("attention", "mlp") and (words[0], words[-1]) in (
                ("fwd", "attention"), ("bwd", "mlp")):
            gather = by_name[f"zero3 all_gather {words[0]} {words[1]} {words[2]}"]
            assert gather.id in op.deps and gather.layers == (int(words[2][1:]),)


@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 2), (4, 1)])
def test_compute_adds_up_to_megatron_s_flops_formula(tp: int, pp: int):
    job = Job(SMALL, Parallelism(dp=2, tp=tp, pp=pp, micro_batch=2, micro_batches=4), sustained_tflops=100)
    w = generate(job)
    flops = sum(op.flops for op in w.all_ops() if op.is_compute)
    # 72*B*s*l*h^2*(1 + s/6h + V/12lh) with B = dp*b*m = 16 sequences
    assert flops == pytest.approx(72 * 16 * 16 * 4 * 64 * 64 * (1 + 16 / (6 * 64) + 100 / (12 * 4 * 64)))
    assert flops == pytest.approx(megatron_iteration_flops(SMALL, 16))
    assert all(op.seconds == pytest.approx(op.flops / 100e12) for op in w.all_ops() if op.is_compute)


def test_presets_are_the_published_sizes():
    assert model_params(PRESETS["gpt3-175b"]) == pytest.approx(175e9, rel=0.01)
    assert model_params(PRESETS["llama2-7b"]) == 6_738_415_616             # as published, to the parameter
    assert model_params(PRESETS["mixtral-8x7b"]) == 46_702_792_704
