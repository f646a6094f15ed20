"""The order of a rank's operations: no op waits for a later one, a DP bucket waits for the
backward of its own layers (and no more), a stage computes a micro-batch only after receiving
it, every collective's members and every send's receiver agree, and the whole iteration runs
to the end without ranks waiting on each other for ever (1F1B and GPipe)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest

from aifabric.workloads import Job, Kind, ModelShape, Parallelism, WorkloadError, estimate, generate
from aifabric.workloads.schedule import stage_order

SMALL = ModelShape(name="small", layers=8, hidden=64, ffn=256, heads=4, seq_len=16, vocab=100)
MOE = ModelShape(name="moe", layers=4, hidden=64, ffn=128, heads=4, seq_len=16, vocab=100, experts=4, top_k=2)

JOBS = {
    "dp+tp+pp 1f1b": Job(SMALL, Parallelism(dp=2, tp=2, pp=4, micro_batches=6, bucket_mb=0.05)),
    "dp+pp gpipe zero1": Job(SMALL, Parallelism(dp=2, pp=2, micro_batches=3, bucket_mb=0.05, zero_stage=1,
                                                schedule="gpipe")),
    "moe ep zero3": Job(MOE, Parallelism(dp=4, ep=2, tp=2, pp=2, micro_batches=4, bucket_mb=0.05, zero_stage=3)),
}


@pytest.fixture(params=list(JOBS), scope="module")
def workload(request):
    return generate(JOBS[request.param])


def test_no_op_depends_on_a_later_op(workload):
    for ops in workload.ranks:
        for op in ops:
            assert op.id == ops.index(op)
            assert all(d < op.id for d in op.deps), op


def test_a_dp_bucket_waits_for_the_backward_of_its_own_layers_in_the_last_micro_batch(workload):
    last = workload.job.parallelism.micro_batches - 1
    for ops in workload.ranks:
        buckets = [op for op in ops if op.stream.value == "dp" and op.kind in (Kind.ALL_REDUCE, Kind.REDUCE_SCATTER)]
        assert buckets
        for bucket in buckets:
            mine = {op.id for op in ops if op.is_compute and op.name.startswith(f"bwd mb{last} L")
                    and int(op.name.split()[2][1:]) in bucket.layers}
            layer_deps = {d for d in bucket.deps if ops[d].is_compute and " L" in ops[d].name}
            assert mine <= layer_deps and len(mine) == 2 * len(bucket.layers)
            # more only for the embedding, whose gradient is ready with the first layer's input gradient
            assert layer_deps == mine or "embedding" in bucket.name
            # the rest: the output layer's (logits backward) or the embedding's (layer 0's input gradient)
            assert all(f"bwd mb{last} " in ops[d].name for d in bucket.deps)


def test_the_first_bucket_is_issued_before_the_rest_of_backward(workload):
    """Overlap: the ops after a bucket in the list include backward compute of other layers."""
    for ops in workload.ranks:
        first = next(op for op in ops if op.stream.value == "dp" and op.layers and op.kind is not Kind.ALL_GATHER
                     and not op.name.startswith("zero3"))
        later = [op for op in ops[first.id + 1:] if op.is_compute and op.name.startswith("bwd")]
        assert later and not set(first.layers) & {int(op.name.split()[2][1:]) for op in later if " L" in op.name}


def test_a_stage_computes_a_micro_batch_only_after_receiving_it(workload):
    for ops in workload.ranks:
        recvs = [op for op in ops if op.kind is Kind.RECV]
        for recv in recvs:
            mb = recv.name.split()[2]
            direction = "fwd" if "activations" in recv.name else "bwd"
            first_compute = next(op for op in ops if op.is_compute and op.name.startswith(f"{direction} {mb} "))
            assert recv.id < first_compute.id
            assert _reaches(ops, first_compute.id, recv.id), (recv.name, first_compute.name)


def _reaches(ops, start: int, target: int) -> bool:
    stack, seen = [start], set()
    while stack:
        i = stack.pop()
        if i == target:
            return True
        if i not in seen:
            seen.add(i)
            stack.extend(ops[i].deps)
    return False


def test_collective_members_agree_and_every_send_has_its_receive(workload):
    by_key = defaultdict(list)
    for op in workload.all_ops():
        if not op.is_compute:
            by_key[op.key].append(op)
    for key, ops in by_key.items():
        if ops[0].kind in (Kind.SEND, Kind.RECV):
            assert sorted(op.kind.value for op in ops) == ["recv", "send"], key
            assert ops[0].group == ops[1].group and ops[0].bytes == ops[1].bytes
        else:
            assert sorted(op.rank for op in ops) == sorted(ops[0].group), key
            assert {(op.kind, op.bytes, op.group) for op in ops} == {(ops[0].kind, ops[0].bytes, ops[0].group)}


def test_the_iteration_runs_to_the_end(workload):
    est = estimate(workload)
    assert all(end is not None for ends in est.end_s for end in ends)


def test_a_collective_one_rank_never_joins_is_reported_by_key():
    w = generate(JOBS["dp+tp+pp 1f1b"])
    ranks = list(w.ranks)
    ranks[3] = tuple(replace(op, key="dp/elsewhere") if op.stream.value == "dp" else op for op in ranks[3])
    with pytest.raises(WorkloadError, match=r"wait on each other for ever: .*rank 3 at 'dp/elsewhere'"):
        estimate(type(w)(w.job, tuple(ranks), w.scale))


def test_1f1b_order_of_each_stage():
    f, b = "F", "B"
    assert stage_order("1f1b", 0, 4, 4) == [(f, 0), (f, 1), (f, 2), (f, 3), (b, 0), (b, 1), (b, 2), (b, 3)]
    assert stage_order("1f1b", 2, 4, 4) == [(f, 0), (f, 1), (b, 0), (f, 2), (b, 1), (f, 3), (b, 2), (b, 3)]
    assert stage_order("1f1b", 3, 4, 4) == [(f, 0), (b, 0), (f, 1), (b, 1), (f, 2), (b, 2), (f, 3), (b, 3)]
    assert stage_order("gpipe", 3, 4, 2) == [(f, 0), (f, 1), (b, 0), (b, 1)]
