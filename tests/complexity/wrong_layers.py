"""Plausible wrong versions of the Table 1 layers, for the tests with teeth."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class BandMaskedFullAttention(nn.Module):
    """'Restricted' self-attention done the easy way: the full n x n scores, then a band mask.
    Same outputs as the banded layer, but O(n^2 d) work."""

    positionwise = ("w_q", "w_k", "w_v", "w_o")
    causal = False

    def __init__(self, d: int, r: int) -> None:
        super().__init__()
        self.r = r
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        n, half = x.size(1), (self.r - 1) // 2
        pos = torch.arange(n, device=x.device)
        band = (pos[:, None] - pos[None, :]).abs() <= half
        scores = (q @ k.transpose(1, 2) / math.sqrt(q.size(-1))).masked_fill(~band, float("-inf"))
        return self.w_o(scores.softmax(-1) @ v)


class VectorisedRecurrent(nn.Module):
    """An 'RNN' vectorised over time by dropping the recurrence: h_t = tanh(W x_t + U 0 + b)."""

    positionwise = ()
    causal = True

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w_input = nn.Linear(d, d)
        self.w_state = nn.Linear(d, d, bias=False)

    def forward(self, x: Tensor, cut: int | None = None) -> Tensor:
        return torch.tanh(self.w_input(x) + self.w_state(torch.zeros_like(x)))
