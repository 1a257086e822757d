"""Section 3.1: the encoder and decoder layers, each sub-layer wrapped post-norm.

The paper's sub-layer output is LayerNorm(x + Dropout(Sublayer(x))) (Sections 3.1, 5.4).
``norm_first`` builds the pre-norm variant x + Dropout(Sublayer(LayerNorm(x))) that many
later implementations use; it is *not* the paper and exists so that the post-norm claim can
be shown to catch it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import Tensor, nn

from repro.model.attention import KeyValueCache, MultiHeadAttention
from repro.model.transformer_config import TransformerConfig
from repro.model.feedforward import PositionwiseFeedForward


class SublayerConnection(nn.Module):
    """Residual connection and layer normalisation around one sub-layer."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        # Under bf16 autocast the norm computes in fp32 and its output is kept in the sub-layer's dtype
        # y.dtype (bf16): the stream between sub-layers is then stored in bf16, as fairseq's and
        # Megatron's bf16 training store it, and every element-wise kernel around a sub-layer moves
        # half the bytes. Without autocast both are fp32 and the cast is the identity.
        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the position-wise FFN."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.d_k, cfg.d_v, cfg.attention)
        self.feed_forward = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.sublayers = nn.ModuleList(SublayerConnection(cfg.d_model, cfg.dropout, cfg.norm_first) for _ in range(2))

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, mask))
        return self.sublayers[1](x, self.feed_forward)


@dataclass
class DecoderLayerCache:
    """What one decoder layer keeps between incremental steps (the self-attention's keys and values
    in buffers of ``capacity`` positions when the decoder knows its output limit)."""

    self_attn: KeyValueCache = field(default_factory=KeyValueCache)
    cross_attn: KeyValueCache = field(default_factory=KeyValueCache)

    @classmethod
    def with_capacity(cls, capacity: int) -> "DecoderLayerCache":
        return cls(KeyValueCache(capacity=capacity), KeyValueCache())

    def reorder(self, index: Tensor) -> None:
        self.self_attn.reorder(index)
        self.cross_attn.reorder(index)


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder output, then the FFN."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.d_k, cfg.d_v, cfg.attention)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.d_k, cfg.d_v, cfg.attention)
        self.feed_forward = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.sublayers = nn.ModuleList(SublayerConnection(cfg.d_model, cfg.dropout, cfg.norm_first) for _ in range(3))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: DecoderLayerCache | None = None,
        causal: bool = False,
    ) -> Tensor:
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, tgt_mask, cache=self_cache, causal=causal))
        x = self.sublayers[1](
            x, lambda y: self.cross_attn(y, memory, memory, src_mask, cache=cross_cache, static_kv=True)
        )
        return self.sublayers[2](x, self.feed_forward)
