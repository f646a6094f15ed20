"""A transformer's shape: what its parameter count, FLOPs and message sizes follow from.

Dense models have ``experts=0``; a mixture-of-experts model replaces every layer's MLP by
``experts`` MLPs of ``ffn`` width, each token routed to ``top_k`` of them. ``kv_heads`` below
``heads`` is grouped-query attention (K and V projections ``kv_heads/heads`` of Q's width);
``gated_mlp`` is a SwiGLU MLP (three ``hidden x ffn`` matrices instead of two).
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.workloads.errors import WorkloadError, require_int

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    seq_len: int
    vocab: int
    kv_heads: int = 0               # 0: as many as heads (multi-head attention)
    experts: int = 0                # 0: dense
    top_k: int = 1
    gated_mlp: bool = False
    tied_embeddings: bool = True
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "ffn", "heads", "seq_len", "vocab", "top_k"):
            require_int(f"model.{name}", getattr(self, name))
        require_int("model.kv_heads", self.kv_heads, minimum=0)
        require_int("model.experts", self.experts, minimum=0)
        if self.dtype not in DTYPE_BYTES:
            raise WorkloadError(f"model.dtype: {self.dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
        if self.hidden % self.heads:
            raise WorkloadError(f"model.heads={self.heads} must divide model.hidden={self.hidden}")
        if self.kv_heads and (self.kv_heads > self.heads or self.heads % self.kv_heads):
            raise WorkloadError(f"model.kv_heads={self.kv_heads} must divide model.heads={self.heads}")
        if self.experts and self.top_k > self.experts:
            raise WorkloadError(f"model.top_k={self.top_k} exceeds model.experts={self.experts}")
        if not self.experts and self.top_k != 1:
            raise WorkloadError(f"model.top_k={self.top_k} needs model.experts > 0 (a dense model routes nowhere)")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_width(self) -> int:
        """Width of the K (and of the V) projection: ``hidden`` under multi-head attention."""
        return self.hidden * (self.kv_heads or self.heads) // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2
