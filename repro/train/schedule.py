"""Section 5.3, Eq. 3: the learning rate schedule.

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

It rises linearly for the first ``warmup_steps`` updates and then decays with the inverse
square root of the step number; the two branches meet at step = warmup_steps. Steps count
from 1 (the first update uses step 1).
"""

from __future__ import annotations

from torch.optim import Optimizer


def learning_rate(step: int, d_model: int, warmup_steps: int = 4000, scale: float = 1.0) -> float:
    """Eq. 3 at update ``step`` (>= 1)."""
    if step < 1:
        raise ValueError(f"Eq. 3 is defined for step >= 1, got {step}")
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def set_learning_rate(optimizer: Optimizer, lr: float) -> None:
    """Apply the schedule by writing the rate into every parameter group before the update.

    Writing the rate from the step number (rather than keeping a scheduler object) makes the
    schedule part of the resumable state for free: the step number is all it needs.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
