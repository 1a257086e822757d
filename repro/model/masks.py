"""Attention masks. Convention: a boolean tensor, ``True`` where attention is allowed."""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens: shape (batch, 1, 1, length), broadcast over heads and queries."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """Section 3.1: position i may attend to positions <= i only. Shape (1, 1, length, length)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]
