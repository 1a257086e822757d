"""Swin Transformer V2's attention and residual layout (Liu et al., 2022) in a translation
encoder-decoder, as a user ports ``WindowAttention`` and ``SwinTransformerBlock`` from the Swin
repository (without windows: every position attends to all), and an adapter written from
docs/audit.md (issue 43, tenth round).

Its choices: scaled *cosine* attention, ``F.normalize(q) @ F.normalize(k)^T`` times a learned
per-head temperature ``exp(clamp(logit_scale, max=log(100)))`` initialised at ``log(10)`` (no
1/sqrt(d_k)); q and v projections with biases, k without (Swin's ``qkv_bias`` is q and v only);
"res-post-norm": each sub-layer's output is normalised *before* it is added to the stream,
``x + Dropout(LN(Sublayer(x)))``, and the stream itself is never normalised. Boolean masks
(True = attend) as ``masked_fill(-inf)``. Everything else is the shell of
:mod:`talking_heads` (the paper's base model), cross-attention included (cosine as well, as the
port uses one attention class).

Departures from the paper: the attention is not Eq. 1 (cosine similarities times a learned
temperature, not dot products over sqrt(d_k)); the layer is x + LN(Sublayer(x)), not
LN(x + Sublayer(x)) (the norms sit on the sub-layers' outputs, not after the residual sum).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter
from tests.audit.handwritten.round10.talking_heads import (DecoderLayer, EncoderLayer, ShellAdapter,
                                                           TalkingHeadsTransformer)

MAX_LOGIT_SCALE = math.log(100.0)


def cosine_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, logit_scale: Tensor) -> Tensor:
    """q, k, v (batch, h, n, d); ``logit_scale`` (h, 1, 1), the log of each head's temperature."""
    attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(logit_scale, max=MAX_LOGIT_SCALE).exp()
    if mask is not None:
        attn = attn.masked_fill(~mask, float("-inf"))
    return attn.softmax(dim=-1) @ v


class CosineAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        B, N, C = query.shape
        heads = lambda t: t.reshape(B, t.size(1), self.num_heads, -1).permute(0, 2, 1, 3)
        x = cosine_attention(heads(self.q(query)), heads(self.k(key)), heads(self.v(value)), mask, self.logit_scale)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class ResPostNormEncoderLayer(EncoderLayer):
    def forward(self, x: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        x = x + self.dropout(self.norm1(self.attend(x, pad_mask)))
        return x + self.dropout(self.norm2(self.ffn(x)))


class ResPostNormDecoderLayer(DecoderLayer):
    def forward(self, x: Tensor, memory: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        x = x + self.dropout(self.norm1(self.attend(x)))
        x = x + self.dropout(self.norm2(self.attend_memory(x, memory, pad_mask)))
        return x + self.dropout(self.norm3(self.ffn(x)))


class SwinV2Translator(TalkingHeadsTransformer):
    Attention = CrossAttention = CosineAttention
    Encoder, Decoder = ResPostNormEncoderLayer, ResPostNormDecoderLayer


class CosineAdapter(ShellAdapter):
    name = "Swin V2 cosine attention, res-post-norm (hand-written)"
    Net = SwinV2Translator

    def attention(self, query, key, value, mask):
        logit_scale = torch.full((query.size(1), 1, 1), math.log(10.0), device=query.device)
        return cosine_attention(query, key, value, mask, logit_scale)


def adapter() -> Adapter:
    return CosineAdapter()
