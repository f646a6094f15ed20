"""Published model shapes, as presets (``--preset NAME``).

* ``gpt3-175b``: GPT-3 175B (Brown et al. 2020, table 2.1): 96 layers, hidden 12288, 96 heads,
  sequence 2048; vocabulary 51200 (50257 padded, as Megatron-LM pads it; Narayanan et al. 2021
  use the same shape); MLP 4h, tied embeddings.
* ``llama2-7b``: Llama 2 7B (Touvron et al. 2023): 32 layers, hidden 4096, 32 heads, SwiGLU MLP
  11008 wide, sequence 4096, vocabulary 32000, untied output layer.
* ``mixtral-8x7b``: Mixtral 8x7B (Jiang et al. 2024): 32 layers, hidden 4096, 32 heads with 8 K/V
  heads, 8 SwiGLU experts 14336 wide, top-2 routing, vocabulary 32000, sequence 4096 (its
  published context is 32768; 4096 is a training length).
* ``tiny``: a small GPT-style model for trying things on the emulated links.
"""
from __future__ import annotations

from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.shape import ModelShape

PRESETS: dict[str, ModelShape] = {
    "gpt3-175b": ModelShape(name="gpt3-175b", layers=96, hidden=12288, ffn=4 * 12288, heads=96,
                            seq_len=2048, vocab=51200),
    "llama2-7b": ModelShape(name="llama2-7b", layers=32, hidden=4096, ffn=11008, heads=32, seq_len=4096,
                            vocab=32000, gated_mlp=True, tied_embeddings=False),
    "mixtral-8x7b": ModelShape(name="mixtral-8x7b", layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8,
                               seq_len=4096, vocab=32000, experts=8, top_k=2, gated_mlp=True,
                               tied_embeddings=False),
    "tiny": ModelShape(name="tiny", layers=8, hidden=512, ffn=2048, heads=8, seq_len=512, vocab=8192),
}


def preset(name: str) -> ModelShape:
    try:
        return PRESETS[name]
    except KeyError:
        raise WorkloadError(f"preset: unknown model {name!r}; known: {', '.join(PRESETS)}") from None
