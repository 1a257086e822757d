"""Sigmoid attention (Ramapuram et al., 2024, "Theory, analysis, and best practices for sigmoid
self-attention") in an otherwise paper-faithful encoder-decoder, and an adapter written from
docs/audit.md (issue 43, tenth round).

Its choices: each weight is ``sigmoid(q.k / sqrt(d_k) + b)`` with the paper's recommended bias
``b = -log(n)``, n the number of keys the call is given (``k.size(-2)``, padding included, as the
reference FlashSigmoid wrapper takes the sequence length); masked keys get ``-inf`` before the
sigmoid (weight 0); no normalisation over the keys; fused q/k/v projection (one ``nn.Linear`` of
3 d_model, called once on x for self-attention, its three row blocks apart for cross-attention).
Everything else is the shell of :mod:`talking_heads` (the paper's base model).

Departures from the paper: the weights are element-wise sigmoids, not a softmax over the keys
(Eq. 1), so they do not sum to 1; the bias -log(n) counts the padding keys, so a sentence's
outputs move with the padding of its batch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter
from tests.audit.handwritten.round10.talking_heads import ShellAdapter, TalkingHeadsTransformer


def sigmoid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    logits = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) - math.log(k.size(-2))
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.sigmoid(logits) @ v


class SigmoidMultiHead(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        if query is key is value:
            q, k, v = self.qkv(query).chunk(3, dim=-1)
        else:
            (w_q, w_k, w_v), (b_q, b_k, b_v) = self.qkv.weight.chunk(3), self.qkv.bias.chunk(3)
            q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        heads = lambda t: t.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)
        out = sigmoid_attention(heads(q), heads(k), heads(v), mask)
        return self.out(out.transpose(1, 2).flatten(2))


class SigmoidTransformer(TalkingHeadsTransformer):
    Attention = CrossAttention = SigmoidMultiHead


class SigmoidAdapter(ShellAdapter):
    name = "sigmoid attention with b = -log n (hand-written)"
    Net = SigmoidTransformer

    def attention(self, query, key, value, mask):
        return sigmoid_attention(query, key, value, mask)


def adapter() -> Adapter:
    return SigmoidAdapter()
