"""Checkers for Section 5: the optimizer, Eq. 3, label smoothing, and the recipe's settings."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.claims.claim import Claim


@checker("training.adam")
def adam(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.3: the optimizer's class and [beta1, beta2, epsilon], read off the optimizer built."""
    opt = ctx.target.optimizer([torch.nn.Parameter(torch.zeros(3))])
    group = opt.param_groups[0]
    betas = group.get("betas")
    if betas is None or "eps" not in group:
        return Measurement(None, False, f"{type(opt).__name__} has no Adam moments")
    decay = group.get("weight_decay", 0.0)
    kind = type(opt).__name__
    measured = [float(betas[0]), float(betas[1]), float(group["eps"])]
    ok = claim.within(measured) and kind in ("Adam", "AdamW") and decay == 0
    return Measurement(measured, ok, f"{kind}, betas={tuple(betas)}, eps={group['eps']:g}, weight_decay={decay:g}")


def eq3(step: int, d_model: int, warmup: int) -> float:
    """Eq. 3, written out for the comparison; step_num counts updates from 1 (at 0 the rate is 0)."""
    if step <= 0:
        return 0.0
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def step_shift(rate: Callable[[int], float], d_model: int, warmup: int, steps: list[int]) -> int | None:
    """The offset s such that the implementation's rate for update ``step`` is Eq. 3 at
    ``step + s`` on every step of the grid, for s in -1, +1; ``None`` when there is none.

    -1 is the Hugging Face Trainer's convention (the optimizer steps before the scheduler, so
    update k runs at the scheduler's value for k - 1: the first update at rate 0, the peak at
    warmup + 1)."""
    for shift in (-1, 1):
        if all(math.isclose(rate(s), eq3(s + shift, d_model, warmup), rel_tol=1e-6, abs_tol=1e-15) for s in steps):
            return shift
    return None


def _shift_text(shift: int | None, warmup: int) -> str:
    if shift is None:
        return ""
    if shift == -1:
        return (f"; off by one update: the rate of update s is Eq. 3 at step s-1, so the first update runs at rate 0 "
                f"and the peak lands at step {warmup + 1} (a scheduler stepped after the optimizer, as the Hugging "
                "Face Trainer does)")
    return f"; off by one update: the rate of update s is Eq. 3 at step s+1 (the peak lands at step {warmup - 1})"


@checker("training.eq3")
def schedule(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 3 at every step of a grid: worst relative error of the implementation's learning rate.

    ``learning_rate(step, ...)`` is the rate of the step-th update, counted from 1 (the
    protocol's convention, :meth:`repro.audit.adapter.Adapter.learning_rate`); an
    implementation whose first update runs at Eq. 3's step 0 (rate 0) is a departure, and the
    detail names the shift."""
    d_model, warmup = claim.params.get("d_model", 512), claim.params.get("warmup", 4000)
    steps = sorted({1, 2, 10, 100, 1000, 3999, 4000, 4001, 8000, 50_000, 100_000, 300_000})

    def rate(s: int) -> float:
        return ctx.target.learning_rate(s, d_model, warmup)

    worst = max(abs(rate(s) / eq3(s, d_model, warmup) - 1) for s in steps)
    shift = step_shift(rate, d_model, warmup, steps) if worst > 1e-6 else None
    return Measurement(worst, detail=f"worst relative error {worst:.1e} over {len(steps)} steps{_shift_text(shift, warmup)}")


@checker("training.lr_peak")
def lr_peak(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 3: the update (counted from 1) at which the learning rate peaks, and its value,
    found by scanning the schedule."""
    d_model, warmup = claim.params.get("d_model", 512), claim.params.get("warmup", 4000)
    rates = [ctx.target.learning_rate(s, d_model, warmup) for s in range(1, 3 * warmup)]
    best = max(range(len(rates)), key=rates.__getitem__)
    what = claim.params.get("measure", "value")
    value = best + 1 if what == "step" else rates[best]
    shift = step_shift(lambda s: rates[s - 1], d_model, warmup, [1, 2, warmup - 1, warmup, warmup + 1, 2 * warmup])
    first = f"; first update at rate {rates[0]:.3e}" if rates[0] == 0 else ""
    return Measurement(value, detail=f"peak {rates[best]:.3e} at step {best + 1}{first}{_shift_text(shift, warmup)}")


@checker("training.label_smoothing")
def label_smoothing(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.4: the probability mass the loss's target distribution puts off the true label.

    For a cross-entropy against a target distribution q, d loss / d logits = softmax(logits) - q,
    so q is recovered from the gradient. Measured: the mass of q off the true label (eps_ls, up
    to the convention of spreading over V-1 or V classes). Padding positions must get no gradient."""
    vocab, pad = 1000, 0
    smoothing = claim.params.get("smoothing", 0.1)
    gen = torch.Generator().manual_seed(ctx.seed)
    logits = torch.randn(6, vocab, generator=gen, requires_grad=True)
    target = torch.randint(1, vocab, (6,), generator=gen)
    target[-1] = pad
    loss = ctx.target.loss(logits, target, pad, smoothing)
    loss.backward()
    grad = logits.grad
    pad_grad = grad[-1].abs().max().item()
    q = torch.softmax(logits.detach(), -1)[:-1] - grad[:-1]
    off_target = (1 - q.gather(1, target[:-1, None])).mean().item()
    ok = pad_grad == 0 and claim.within(off_target)
    return Measurement(off_target, ok, f"mass off the label {off_target:.4f}; gradient at padding {pad_grad:.1e}")


@checker("recipe.value")
def recipe_value(claim: Claim, ctx: CheckContext) -> Measurement:
    """A setting of the training or decoding recipe as the implementation's defaults have it."""
    key = claim.params["key"]
    settings = ctx.target.hyperparameters()
    if key not in settings:
        raise NotApplicable(f"{ctx.target.name} reports no setting '{key}'")
    value, where = settings[key] if isinstance(settings[key], tuple) else (settings[key], "")
    if _is_number(claim.expected) and not _is_number(value):
        raise AdapterValueError(
            f"hyperparameters()['{key}'] is {type(value).__name__} {value!r}; the claim compares a number "
            f"(expected {claim.expected!r})"
        )
    return Measurement(value, detail=f"{key} = {value!r}" + (f" (from {where})" if where else ""))


class AdapterValueError(ValueError):
    """An adapter gave a value of the wrong kind for the claim that reads it."""


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
