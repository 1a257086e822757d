"""Section 3.4: embeddings scaled by sqrt(d_model), sharing one weight matrix."""

from __future__ import annotations

import math

from torch import Tensor, nn


class ScaledEmbedding(nn.Module):
    """Token embedding multiplied by sqrt(d_model) (Section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        return self.lut.weight

    def forward(self, tokens: Tensor) -> Tensor:
        return self.lut(tokens) * self.scale
