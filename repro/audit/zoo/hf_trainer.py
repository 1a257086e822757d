"""What the Hugging Face ``Trainer`` does for a transformers model, shared by the Marian and FSMT
adapters: its default optimizer, its inverse-square-root schedule, its label smoother, and the
defaults of ``TrainingArguments`` (read off the dataclass, nothing instantiated or downloaded).

* optimizer: ``TrainingArguments``' defaults build AdamW with betas (0.9, 0.999), eps 1e-8,
  weight decay 0 (``optim="adamw_torch_fused"``; on the CPU the same update as
  ``torch.optim.AdamW``). The paper's Adam uses beta2 0.98 and eps 1e-9.
* learning rate: ``get_inverse_sqrt_schedule(optimizer, num_warmup_steps=4000)`` is the shape of
  Eq. 3 (linear warm-up, then 1/sqrt(step)) with the Trainer's ``learning_rate`` set to Eq. 3's
  peak, d_model^-0.5 * warmup^-0.5. The Trainer calls ``optimizer.step()`` before
  ``lr_scheduler.step()``, so update k runs at the schedule's value for k - 1: the first
  update at rate 0, the peak at update 4001. The adapter reports that, per the protocol's
  step convention (update counted from 1). The Trainer's default schedule (``linear``, no
  warm-up) is not Eq. 3 at all; the inverse-square-root one is the closest it offers.
* loss: ``LabelSmoother(epsilon, ignore_index=pad)``, which the Trainer uses when
  ``label_smoothing_factor`` > 0 (its default is 0: no smoothing). It spreads epsilon over all
  V classes. Called with ``num_items_in_batch=1`` it returns the sum the protocol asks for.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor
from transformers import TrainingArguments
from transformers.optimization import get_inverse_sqrt_schedule
from transformers.trainer_pt_utils import LabelSmoother

TRAINING_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}


def optimizer(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW with ``TrainingArguments``' default betas, epsilon and weight decay."""
    d = TRAINING_DEFAULTS
    return torch.optim.AdamW(
        params, lr=d["learning_rate"], betas=(d["adam_beta1"], d["adam_beta2"]), eps=d["adam_epsilon"],
        weight_decay=d["weight_decay"],
    )


def learning_rate(step: int, d_model: int, warmup_steps: int) -> float:
    """The rate of update ``step`` (from 1) under the Trainer's loop: the inverse-square-root
    schedule's value for step - 1, at a peak rate of d_model^-0.5 * warmup^-0.5."""
    peak = d_model**-0.5 * warmup_steps**-0.5
    dummy = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    schedule = get_inverse_sqrt_schedule(dummy, num_warmup_steps=warmup_steps).lr_lambdas[0]
    return peak * schedule(step - 1)


def loss(logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
    """The Trainer's ``LabelSmoother``, summed over the non-padding tokens."""
    return LabelSmoother(epsilon=smoothing, ignore_index=pad_id)({"logits": logits}, target, num_items_in_batch=1)


def hyperparameters() -> dict[str, Any]:
    """The Trainer's defaults that claims read."""
    return {
        "label_smoothing": (TRAINING_DEFAULTS["label_smoothing_factor"], "TrainingArguments.label_smoothing_factor default"),
        "warmup_steps": (TRAINING_DEFAULTS["warmup_steps"], "TrainingArguments.warmup_steps default"),
    }


class TrainedByHFTrainer:
    """Adapter methods for a transformers model trained by the ``Trainer``: its optimizer, its
    schedule and its loss, as above (mixed into the Marian and FSMT adapters)."""

    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return optimizer(params)

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        return learning_rate(step, d_model, warmup_steps)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        return loss(logits, target, pad_id, smoothing)
