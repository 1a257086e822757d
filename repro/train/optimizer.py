"""Section 5.3: the Adam optimizer with beta_1 = 0.9, beta_2 = 0.98 and epsilon = 1e-9."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from repro.train.config import TrainConfig


def build_optimizer(
    model: nn.Module, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-9
) -> torch.optim.Adam:
    """Adam over every trainable parameter (each shared tensor once); the rate is set per step
    by :func:`repro.train.schedule.set_learning_rate`. On a GPU the fused kernel updates every
    parameter in one launch (the same Adam; torch's tests hold it equal to the loop of kernels)."""
    params, seen = [], set()
    for param in model.parameters():
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            params.append(param)
    fused = bool(params) and all(p.device.type == "cuda" for p in params)
    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, **({"fused": True} if fused else {}))


def optimizer_for(cfg: "TrainConfig", model: nn.Module) -> torch.optim.Adam:
    """The optimizer a training run with ``cfg`` builds (the loop's and the audit's one builder)."""
    return build_optimizer(model, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
