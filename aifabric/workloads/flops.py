"""Parameter counts and FLOPs of a transformer, from its shape (Megatron-LM's accounting).

Forward FLOPs of one layer on ``t = b*s`` tokens (a multiply-add is 2 FLOPs), with ``kv`` the K/V
width (``h`` without grouped-query attention), ``f`` the MLP width and ``m`` its matrices (2, or 3
when gated):

* attention: ``2*t*h*(h + 2*kv)`` (Q, K, V) ``+ 4*t*s*h`` (scores and their product with V)
  ``+ 2*t*h*h`` (output projection);
* MLP: ``2*t*h*f*m``, times ``top_k`` for a mixture of experts (each token through k experts),
  plus the router's ``2*t*h*experts``;
* logits: ``2*t*h*V`` once per micro-batch.

Backward is twice forward (gradients of inputs and of weights). With ``f = 4h``, multi-head
attention and an ungated dense MLP the sum over an iteration of ``B`` sequences is exactly the
formula of Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM" (SC 2021), without activation recomputation: ``72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))``
(`megatron_iteration_flops`).

Parameters: a layer holds ``h*(h + 2*kv) + h*h`` in attention, ``m*h*f`` per MLP (one per
expert), ``h*experts`` in the router and ``2*h`` in its two norms; the embedding ``V*h``, the
final norm ``h`` and the output layer another ``V*h`` unless tied (Llama-2-7B: 6,738,415,616,
Mixtral-8x7B: 46,702,792,704, as published). Biases and position embeddings are left out (under 0.1%
of any preset; Megatron's ``12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h))`` counts them).
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.workloads.shape import ModelShape

BACKWARD_TO_FORWARD = 2


@dataclass(frozen=True)
class LayerFlops:
    attention: float
    mlp: float

    @property
    def total(self) -> float:
        return self.attention + self.mlp


@dataclass(frozen=True)
class LayerParams:
    attention: int
    mlp_per_expert: int     # the MLP of a dense model, one expert's of a mixture
    router: int
    norms: int

    def total(self, experts: int) -> int:
        return self.attention + self.mlp_per_expert * max(experts, 1) + self.router + self.norms


def layer_forward_flops(shape: ModelShape, sequences: int) -> LayerFlops:
    t, h, s = sequences * shape.seq_len, shape.hidden, shape.seq_len
    attention = 2 * t * h * (h + 2 * shape.kv_width) + 4 * t * s * h + 2 * t * h * h
    mlp = 2 * t * h * shape.ffn * shape.mlp_matrices * shape.top_k
    if shape.is_moe:
        mlp += 2 * t * h * shape.experts
    return LayerFlops(float(attention), float(mlp))


def logits_forward_flops(shape: ModelShape, sequences: int) -> float:
    return float(2 * sequences * shape.seq_len * shape.hidden * shape.vocab)


def layer_params(shape: ModelShape) -> LayerParams:
    h = shape.hidden
    return LayerParams(
        attention=h * (h + 2 * shape.kv_width) + h * h,
        mlp_per_expert=shape.mlp_matrices * h * shape.ffn,
        router=h * shape.experts,
        norms=2 * h,
    )


def embedding_params(shape: ModelShape) -> int:
    return shape.vocab * shape.hidden


def final_norm_params(shape: ModelShape) -> int:
    """The norm between the last layer and the output layer."""
    return shape.hidden


def model_params(shape: ModelShape) -> int:
    """Every parameter of the model (see the module doc for what is counted)."""
    output = 0 if shape.tied_embeddings else embedding_params(shape)
    return (shape.layers * layer_params(shape).total(shape.experts) + embedding_params(shape) + final_norm_params(shape)
            + output)


def iteration_flops(shape: ModelShape, sequences: int) -> float:
    """Forward and backward FLOPs of ``sequences`` sequences through the whole model."""
    per_pass = shape.layers * layer_forward_flops(shape, sequences).total + logits_forward_flops(shape, sequences)
    return per_pass * (1 + BACKWARD_TO_FORWARD)


def megatron_iteration_flops(shape: ModelShape, sequences: int) -> float:
    """Narayanan et al. 2021's closed form (no recomputation); equal to `iteration_flops` for
    dense GPT-style shapes (f = 4h, no GQA, no gating), a check on it."""
    b, s, l, h, v = sequences, shape.seq_len, shape.layers, shape.hidden, shape.vocab
    return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
