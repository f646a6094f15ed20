"""Every rank's operations of one training iteration (`aifabric.workloads.ops` for what an op is,
`aifabric.workloads.sizes` for its sizes).

A rank runs its stage's micro-batches in the schedule's order (`aifabric.workloads.schedule`).
Forward of micro-batch m: receive the previous stage's activations, then per layer attention,
its TP all-reduce, the MoE dispatch all-to-all, the MLP (or experts), the combine all-to-all, the
MLP's TP all-reduce; the last stage then computes the logits, the others send their activations
on. Backward mirrors it: receive the next stage's gradients (the last stage: the logits'
backward), per layer in reverse the MLP's backward between the all-to-alls, a TP all-reduce, the
attention's backward, a TP all-reduce; then send the gradients back.

Data parallelism reduces gradients once per iteration, during the last micro-batch's backward,
in buckets of whole layers filled in backward order (the output layer first, the embedding last)
up to ``bucket_mb``: bucket i waits only for the backward ops of its own layers, so it is reduced
while the rest of backward goes on. ZeRO 0: an all-reduce per bucket; ZeRO 1 and 2: a
reduce-scatter per bucket, and after the last, an all-gather of each bucket's updated
parameters; ZeRO 3: the reduce-scatters, and each layer's parameters all-gathered before its
forward and again before its backward, every micro-batch (embeddings are not gathered).
The optimizer step (elementwise) and the embedding lookup are not modelled as compute.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from aifabric.workloads.job import Job
from aifabric.workloads.ops import Kind, Op, Stream
from aifabric.workloads.placement import Placement
from aifabric.workloads.scale import Scale
from aifabric.workloads.schedule import stage_order
from aifabric.workloads.sizes import RankSizes, rank_sizes


@dataclass(frozen=True)
class Workload:
    job: Job
    ranks: tuple[tuple[Op, ...], ...]
    scale: Scale
    placement: Placement | None = None

    def ops(self, rank: int) -> tuple[Op, ...]:
        return self.ranks[rank]

    def all_ops(self) -> list[Op]:
        return [op for ops in self.ranks for op in ops]

    def to_dict(self) -> dict:
        return {**self.job.to_dict(), "scale": self.scale.to_dict(),
                "placement": self.placement.to_dict() if self.placement else None,
                "ranks": [[op.to_dict() for op in ops] for ops in self.ranks]}


@dataclass
class _Bucket:
    index: int
    blocks: list[str] = field(default_factory=list)     # "L<n>", "output", "embedding"
    dense: int = 0
    expert: int = 0


def generate(job: Job, scale: Scale | None = None, placement: Placement | None = None) -> Workload:
    scale = scale or Scale()
    sizes = rank_sizes(job)
    ranks = tuple(tuple(_RankProgram(job, sizes, scale, r).build()) for r in range(job.parallelism.world))
    return Workload(job, ranks, scale, placement)


class _RankProgram:
    def __init__(self, job: Job, sizes: RankSizes, scale: Scale, rank: int) -> None:
        self.job, self.sizes, self.scale, self.rank = job, sizes, scale, rank
        p = job.parallelism
        self.p, self.c = p, p.coords(rank)
        self.stage = self.c.pp
        self.first_stage, self.last_stage = self.stage == 0, self.stage == p.pp - 1
        first = self.stage * job.layers_per_stage
        self.layers = list(range(first, first + job.layers_per_stage))
        self.flops_per_s = job.sustained_tflops * 1e12
        self.dtype = job.shape.dtype_bytes
        self.ops: list[Op] = []
        self.grad_ready: dict[str, list[int]] = {}      # block -> its last-micro-batch backward ops
        self.buckets = self._plan_buckets()
        self.bucket_of = {b: bucket for bucket in self.buckets for b in bucket.blocks}
        self.bucket_ops: list[tuple[_Bucket, list[int]]] = []

    # --- ops -------------------------------------------------------------------------------

    def _add(self, kind: Kind, stream: Stream, name: str, deps: tuple[int | None, ...] = (), *,
             flops: float = 0.0, size: int = 0, group: tuple[int, ...] = (), key: str = "",
             layers: tuple[int, ...] = ()) -> int:
        op_id = len(self.ops)
        seconds = flops / self.flops_per_s
        self.ops.append(Op(id=op_id, rank=self.rank, kind=kind, stream=stream, name=name,
                           deps=tuple(sorted({d for d in deps if d is not None})), flops=flops,
                           seconds=seconds, bytes=size, group=group, key=key,
                           emulated_bytes=self.scale.bytes(size), emulated_seconds=self.scale.seconds(seconds),
                           layers=layers))
        return op_id

    def _compute(self, name: str, flops: float, *deps: int | None) -> int:
        return self._add(Kind.COMPUTE, Stream.COMPUTE, name, deps, flops=flops)

    def _collective(self, kind: Kind, stream: Stream, name: str, group: tuple[int, ...], size: int, key: str,
                    *deps: int | None, layers: tuple[int, ...] = ()) -> int | None:
        """The op, or None (nothing to wait for) when the group is this rank alone."""
        if len(group) < 2 or size == 0:
            return None
        return self._add(kind, stream, name, deps, size=size, group=group, key=key, layers=layers)

    def _layer_collective(self, kind: Kind, stream: Stream, scope: str, group: tuple[int, ...], size: int,
                          where: str, dep: int) -> int:
        """A layer's TP all-reduce or MoE all-to-all; returns what the next op waits for (``dep``
        itself when the group is this rank alone)."""
        op = self._collective(kind, stream, f"{stream.value} {kind.value} {where}", group, size,
                              f"{scope}/{where.replace(' ', '/')}", dep)
        return dep if op is None else op

    def _tp_all_reduce(self, direction: str, block: str, m: int, layer: int, dep: int) -> int:
        return self._layer_collective(Kind.ALL_REDUCE, Stream.TP, f"tp/pp{self.stage}/dp{self.c.dp}",
                                      self.p.tp_group(self.rank), self.sizes.activation_bytes,
                                      f"{direction} mb{m} L{layer} {block}", dep)

    def _all_to_all(self, direction: str, block: str, m: int, layer: int, dep: int) -> int:
        return self._layer_collective(Kind.ALL_TO_ALL, Stream.EP,
                                      f"ep/pp{self.stage}/tp{self.c.tp}/dp{self.c.dp - self.c.ep}",
                                      self.p.ep_group(self.rank), self.sizes.all_to_all_bytes,
                                      f"{direction} mb{m} L{layer} {block}", dep)

    def _zero3_gather(self, where: str, m: int, layer: int) -> list[int | None]:
        if self.p.zero_stage < 3:
            return []
        base = f"pp{self.stage}/tp{self.c.tp}/mb{m}/L{layer}/{where}"
        dense = self._collective(Kind.ALL_GATHER, Stream.DP, f"zero3 all_gather {where} mb{m} L{layer}",
                                 self.p.dp_group(self.rank), self.sizes.layer_dense_params * self.dtype,
                                 f"z3/{base}", layers=(layer,))
        expert = self._collective(Kind.ALL_GATHER, Stream.DP, f"zero3 all_gather experts {where} mb{m} L{layer}",
                                  self.p.expert_dp_group(self.rank), self.sizes.layer_expert_params * self.dtype,
                                  f"z3e/ep{self.c.ep}/{base}", layers=(layer,))
        return [dense, expert]

    def _pp(self, kind: Kind, what: str, m: int, other_stage: int, dep: int | None = None) -> int:
        peer = self.p.stage_peer(self.rank, other_stage)
        sender, receiver = (self.rank, peer) if kind is Kind.SEND else (peer, self.rank)
        src, dst = self.p.coords(sender).pp, self.p.coords(receiver).pp
        key = f"pp/{what}/dp{self.c.dp}/tp{self.c.tp}/s{src}->s{dst}/mb{m}"
        return self._add(kind, Stream.PP, f"{kind.value} {what} mb{m} {'to' if kind is Kind.SEND else 'from'} "
                         f"stage {other_stage}", (dep,), size=self.sizes.activation_bytes,
                         group=(sender, receiver), key=key)

    # --- passes ----------------------------------------------------------------------------

    def _forward(self, m: int) -> None:
        s = self.sizes
        prev = self._pp(Kind.RECV, "activations", m, self.stage - 1) if not self.first_stage else None
        for layer in self.layers:
            gathered = self._zero3_gather("fwd", m, layer)
            attn = self._compute(f"fwd mb{m} L{layer} attention", s.attention_fwd_flops, prev, *gathered)
            prev = self._tp_all_reduce("fwd", "attention", m, layer, attn)
            if self.job.shape.is_moe:
                prev = self._all_to_all("fwd", "dispatch", m, layer, prev)
            mlp = self._compute(f"fwd mb{m} L{layer} {'experts' if self.job.shape.is_moe else 'mlp'}",
                                s.mlp_fwd_flops, prev)
            prev = mlp
            if self.job.shape.is_moe:
                prev = self._all_to_all("fwd", "combine", m, layer, prev)
            prev = self._tp_all_reduce("fwd", "mlp", m, layer, prev)
        if self.last_stage:
            self._compute(f"fwd mb{m} logits", s.logits_fwd_flops, prev)
        else:
            self._pp(Kind.SEND, "activations", m, self.stage + 1, prev)

    def _backward(self, m: int) -> None:
        s, k = self.sizes, self.sizes.backward_factor
        final = m == self.p.micro_batches - 1
        if self.last_stage:
            prev = self._compute(f"bwd mb{m} logits", k * s.logits_fwd_flops)
            if final and "output" in self.bucket_of:
                self._grads_ready("output", [prev])
        else:
            prev = self._pp(Kind.RECV, "gradients", m, self.stage + 1)
        for layer in reversed(self.layers):
            gathered = self._zero3_gather("bwd", m, layer)
            if self.job.shape.is_moe:
                prev = self._all_to_all("bwd", "combine", m, layer, prev)
            mlp = self._compute(f"bwd mb{m} L{layer} {'experts' if self.job.shape.is_moe else 'mlp'}",
                                k * s.mlp_fwd_flops, prev, *gathered)
            prev = mlp
            if self.job.shape.is_moe:
                prev = self._all_to_all("bwd", "dispatch", m, layer, prev)
            prev = self._tp_all_reduce("bwd", "mlp", m, layer, prev)
            attn = self._compute(f"bwd mb{m} L{layer} attention", k * s.attention_fwd_flops, prev)
            prev = self._tp_all_reduce("bwd", "attention", m, layer, attn)
            if final:
                self._grads_ready(f"L{layer}", [mlp, attn])
        if final and "embedding" in self.bucket_of:
            self._grads_ready("embedding", [prev])
        if not self.first_stage:
            self._pp(Kind.SEND, "gradients", m, self.stage - 1, prev)

    # --- data-parallel gradients -----------------------------------------------------------

    def _plan_buckets(self) -> list[_Bucket]:
        s, limit = self.sizes, self.p.bucket_bytes
        blocks: list[tuple[str, int, int]] = []       # (block, dense params, expert params), backward order
        if self.last_stage:                 # the final norm, and the output layer unless tied away
            blocks.append(("output", s.output_params + s.final_norm_params, 0))
        blocks += [(f"L{layer}", s.layer_dense_params, s.layer_expert_params) for layer in reversed(self.layers)]
        if self.first_stage:
            blocks.append(("embedding", s.embedding_params, 0))
        buckets = [_Bucket(0)]
        for name, dense, expert in blocks:
            b = buckets[-1]
            if b.blocks and (b.dense + b.expert + dense + expert) * self.dtype > limit:
                b = _Bucket(len(buckets))
                buckets.append(b)
            b.blocks.append(name)
            b.dense += dense
            b.expert += expert
        return buckets

    def _grads_ready(self, block: str, ops: list[int]) -> None:
        self.grad_ready[block] = ops
        bucket = self.bucket_of[block]
        if block != bucket.blocks[-1]:
            return
        deps = [d for b in bucket.blocks for d in self.grad_ready[b]]
        layers = tuple(int(b[1:]) for b in bucket.blocks if b.startswith("L"))
        kind = Kind.ALL_REDUCE if self.p.zero_stage == 0 else Kind.REDUCE_SCATTER
        ids = [self._collective(kind, Stream.DP, f"dp {kind.value} bucket {bucket.index} ({','.join(bucket.blocks)})",
                                group, params * self.dtype, key, *deps, layers=layers)
               for group, params, key in self._bucket_groups(bucket)]
        self.bucket_ops.append((bucket, [i for i in ids if i is not None]))

    def _bucket_groups(self, bucket: _Bucket) -> list[tuple[tuple[int, ...], int, str]]:
        """(group, parameters, key) of a bucket's dense part and of its experts' part."""
        base = f"pp{self.stage}/tp{self.c.tp}/bucket{bucket.index}"
        return [(self.p.dp_group(self.rank), bucket.dense, f"dp/{base}"),
                (self.p.expert_dp_group(self.rank), bucket.expert, f"edp/ep{self.c.ep}/{base}")]

    def _gather_parameters(self) -> None:
        """ZeRO 1 and 2: every rank gathers the parameters the others updated."""
        for bucket, reduced in self.bucket_ops:
            layers = tuple(int(b[1:]) for b in bucket.blocks if b.startswith("L"))
            for group, params, key in self._bucket_groups(bucket):
                self._collective(Kind.ALL_GATHER, Stream.DP, f"dp all_gather params bucket {bucket.index}",
                                 group, params * self.dtype, f"{key}/params", *reduced, layers=layers)

    def build(self) -> list[Op]:
        for pass_, m in stage_order(self.p.schedule, self.stage, self.p.pp, self.p.micro_batches):
            (self._forward if pass_ == "F" else self._backward)(m)
        if self.p.zero_stage in (1, 2):
            self._gather_parameters()
        return self.ops
