"""The dense Synthesizer (Tay et al., 2021, "Synthesizer: Rethinking Self-Attention in Transformer
Models") in both stacks' self-attention, the paper's attention across stacks, as a user writes it
in plain PyTorch, and an adapter written from docs/audit.md (issue 43, tenth round).

Its choices: each head's weights over the keys are *synthesized* from the query position's own
vector, ``B_i = W_2 relu(W_1 x_i + b_1) + b_2`` (W_1 d_model -> d_k per head, W_2 d_k -> 1024, the
longest sentence; the first n columns are kept for n keys), masked (the decoder's causal mask, the
source's padding) and softmaxed; there are no queries and no keys (no dot products), only the
values' projection and W^O. The cross-attention is the paper's multi-head attention with Eq. 1
(the adapter's ``attention``). Everything else is the shell of :mod:`talking_heads` (the paper's
base model, post-norm, sinusoids, scaled shared embeddings, the recipe).

Departures from the paper: the self-attention weights are not softmax(Q K^T / sqrt(d_k)); they
depend on the key's *position* (column j of W_2), not on its content, so self-attention does not
commute with a permutation of the positions; each self-attention layer has 1024 x d_model + 1024 h
parameters in W_2 instead of W^Q and W^K.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from repro.audit.adapter import Adapter
from tests.audit.handwritten.round10.talking_heads import ShellAdapter, TalkingHeadsTransformer

MAX_LEN = 1024


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def heads(self, t: Tensor) -> Tensor:
        return t.view(t.size(0), t.size(1), self.n_heads, -1).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        out = scaled_dot_product(self.heads(self.w_q(query)), self.heads(self.w_k(key)), self.heads(self.w_v(value)),
                                 mask)
        return self.w_o(out.transpose(1, 2).flatten(2))


class DenseSynthesizer(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, d_k = n_heads, d_model // n_heads
        self.w_1 = nn.Linear(d_model, d_model)
        self.w_2 = nn.Parameter(torch.empty(n_heads, d_k, MAX_LEN))
        self.b_2 = nn.Parameter(torch.zeros(n_heads, 1, MAX_LEN))
        nn.init.xavier_uniform_(self.w_2)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def heads(self, t: Tensor) -> Tensor:
        return t.view(t.size(0), t.size(1), self.n_heads, -1).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        n_keys = value.size(1)
        hidden = torch.relu(self.heads(self.w_1(query)))                     # (batch, h, n, d_k)
        logits = (hidden @ self.w_2 + self.b_2)[..., :n_keys]               # (batch, h, n, n_keys)
        if mask is not None:
            logits = logits.masked_fill(~mask, float("-inf"))
        out = logits.softmax(dim=-1) @ self.heads(self.w_v(value))
        return self.w_o(out.transpose(1, 2).flatten(2))


class SynthesizerTransformer(TalkingHeadsTransformer):
    Attention, CrossAttention = DenseSynthesizer, MultiHeadAttention


class SynthesizerAdapter(ShellAdapter):
    name = "dense Synthesizer self-attention (hand-written)"
    Net = SynthesizerTransformer

    def attention(self, query, key, value, mask):
        return scaled_dot_product(query, key, value, mask)


def adapter() -> Adapter:
    return SynthesizerAdapter()
