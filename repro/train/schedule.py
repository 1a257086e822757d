"""Section 5.3, Eq. 3: the learning rate schedule.

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

It rises linearly for the first ``warmup_steps`` updates and then decays with the inverse
square root of the step number; the two branches meet at step = warmup_steps. Steps count
from 1 (the first update uses step 1).
"""

from __future__ import annotations

from torch.optim import Optimizer

#: Section 5.3: "We used warmup_steps = 4000" (the one place this default is written).
PAPER_WARMUP_STEPS = 4000


def learning_rate(step: int, d_model: int, warmup_steps: int = PAPER_WARMUP_STEPS, scale: float = 1.0) -> float:
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


#: The peak of Eq. 3 for the paper's base model (d_model 512, warmup_steps 4000): 6.99e-4.
PAPER_BASE_PEAK = 512**-0.5 * PAPER_WARMUP_STEPS**-0.5


def paper_peak_scale(d_model: int, warmup_steps: int) -> float:
    """The ``lr_scale`` that makes Eq. 3 peak where it peaks for the paper's base model.

    The rule for scaled-down recipes: Eq. 3 peaks at ``d_model**-0.5 * warmup_steps**-0.5``
    (at ``step == warmup_steps``), so a small model with a short warm-up would train far above
    any rate the paper used (d_model 128 with 300 warm-up steps: 3.3e-3, 4.7x the base peak).
    Scaling Eq. 3 by ``sqrt(d_model * warmup_steps / (512 * 4000))`` keeps its shape (linear
    warm-up, inverse square root decay) and puts its peak at the base model's 7.0e-4.
    """
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model and warmup_steps must be positive, got {d_model}, {warmup_steps}")
    return PAPER_BASE_PEAK / (d_model**-0.5 * warmup_steps**-0.5)
