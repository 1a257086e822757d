"""Additive attention (Bahdanau et al. [2]), the compatibility function Section 3.2.1 sets beside
dot-product attention: score(q, k) = w^T tanh(W_q q + W_k k), softmax over the keys, weighted sum
of the values. Written plainly, as the paper's comparison assumes: the (n_q, n_k, d_k) sum inside
the tanh is formed (there is no matrix-multiplication form of it)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class AdditiveAttention(nn.Module):
    """Attention(Q, K, V) with the additive compatibility; q, k of width d_k, hidden width d_k."""

    def __init__(self, d_k: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        scale = d_k**-0.5
        self.w_q = nn.Parameter(torch.randn(d_k, d_k, generator=generator) * scale)
        self.w_k = nn.Parameter(torch.randn(d_k, d_k, generator=generator) * scale)
        self.w = nn.Parameter(torch.randn(d_k, generator=generator) * scale)

    def forward(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """``query`` (..., n_q, d_k), ``key`` (..., n_k, d_k), ``value`` (..., n_k, d_v)."""
        hidden = torch.tanh((query @ self.w_q)[..., :, None, :] + (key @ self.w_k)[..., None, :, :])
        weights = (hidden @ self.w).softmax(dim=-1)
        return weights @ value
