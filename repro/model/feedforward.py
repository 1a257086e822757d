"""Section 3.3: the position-wise feed-forward network (Eq. 2)."""

from __future__ import annotations

from torch import Tensor, nn


class PositionwiseFeedForward(nn.Module):
    """Eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alike."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.w_1(x).relu())
