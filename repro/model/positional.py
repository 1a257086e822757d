"""Section 3.5: positional encodings (sinusoids) and learned positional embeddings (Table 3 E)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Shape (max_len, d_model). The wavelengths 2*pi * 10000^(2i/d_model) form a geometric
    progression from 2*pi to 10000 * 2*pi.
    """
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids added to the embeddings; no parameters."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        if offset + length > self.table.size(0):
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.table.size(0)}")
        return self.table[offset : offset + length]


class LearnedPositionalEmbedding(nn.Module):
    """Table 3 row (E): one learned vector per position instead of the sinusoids."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        if offset + length > self.table.num_embeddings:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.table.num_embeddings}")
        return self.table.weight[offset : offset + length]
