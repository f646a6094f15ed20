"""What one rank computes and sends, per micro-batch and per layer (the numbers the generator
puts on its ops; `aifabric.workloads.flops` has the whole-model formulas they come from).

* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): every layer's attention and MLP blocks
  end in an all-reduce of the block's output in forward and of its input's gradient in backward,
  ``b*s*h*dtype`` bytes each (2 per layer forward, 2 backward); matrices and FLOPs split TP ways.
* Pipeline parallelism: a stage sends ``b*s*h*dtype`` bytes of activations forward and the same of
  gradients backward per micro-batch (every TP rank sends its full copy: no scatter/gather).
* Mixture of experts: a rank's ``b*s`` tokens each go to ``top_k`` experts, ``b*s*top_k*h*dtype``
  bytes in the all-to-all that dispatches them and as much in the one that combines the results
  (again in backward), of which the EP-th share stays on the rank (the all-to-all's
  ``(EP-1)/EP`` factor). Routing is taken as balanced: each rank computes ``b*s*top_k`` tokens'
  expert MLPs.
* Data parallelism: a rank's gradients, its share of the parameters (matrices split TP ways, its
  stage's layers, ``experts/EP`` experts) times the dtype size, reduced over DP ranks (expert
  gradients over the DP/EP ranks holding the same experts).
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.workloads.flops import BACKWARD_TO_FORWARD, embedding_params, final_norm_params, \
    layer_forward_flops, layer_params, logits_forward_flops
from aifabric.workloads.job import Job


@dataclass(frozen=True)
class RankSizes:
    attention_fwd_flops: float
    mlp_fwd_flops: float
    logits_fwd_flops: float
    activation_bytes: int           # one micro-batch's b*s*h*dtype: TP all-reduce, PP send/recv
    all_to_all_bytes: int           # one MoE dispatch or combine
    layer_dense_params: int         # a layer's parameters on this rank outside the experts
    layer_expert_params: int        # its experts' parameters on this rank
    embedding_params: int           # on the first stage
    output_params: int              # on the last stage (untied, or a tied copy when PP > 1)
    final_norm_params: int          # on the last stage: the norm before the output layer

    @property
    def backward_factor(self) -> int:
        return BACKWARD_TO_FORWARD


def rank_sizes(job: Job) -> RankSizes:
    m, p = job.shape, job.parallelism
    fl = layer_forward_flops(m, p.micro_batch)
    lp = layer_params(m)
    tokens = p.micro_batch * m.seq_len
    mlp = lp.mlp_per_expert // p.tp
    dense = lp.attention // p.tp + lp.norms + lp.router + (0 if m.is_moe else mlp)
    experts = (m.experts // p.ep) * mlp if m.is_moe else 0
    output = 0 if m.tied_embeddings and p.pp == 1 else embedding_params(m) // p.tp
    return RankSizes(
        attention_fwd_flops=fl.attention / p.tp,
        mlp_fwd_flops=fl.mlp / p.tp,
        logits_fwd_flops=logits_forward_flops(m, p.micro_batch) / p.tp,
        activation_bytes=tokens * m.hidden * m.dtype_bytes,
        all_to_all_bytes=tokens * m.top_k * m.hidden * m.dtype_bytes if m.is_moe else 0,
        layer_dense_params=dense,
        layer_expert_params=experts,
        embedding_params=embedding_params(m) // p.tp,
        output_params=output,
        final_norm_params=final_norm_params(m),
    )
