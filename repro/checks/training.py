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
    to the convention of spreading over V-1 or V classes). Padding positions must get no gradient,
    and the loss value must be the cross-entropy H(q, p) of the q its gradient implies (a kernel
    whose gradient and value disagree trains towards another target than it reports)."""
    smoothing = claim.params.get("smoothing", 0.1)
    gen = torch.Generator().manual_seed(ctx.seed)
    # A large vocabulary to measure the mass (conventions of V-1 or V classes agree to 1e-3),
    # a small one to compare value and gradient (where a 1/V share of the smoothing shows).
    off_target, pad_grad, _ = _smoothing_probe(ctx, gen, 1000, smoothing)
    _, pad_grad_small, mismatch = _smoothing_probe(ctx, gen, 12, smoothing)
    pad_grad = max(pad_grad, pad_grad_small)
    ok = pad_grad == 0 and mismatch <= 1e-4 and claim.within(off_target)
    return Measurement(off_target, ok, f"mass off the label {off_target:.4f}; gradient at padding {pad_grad:.1e}; "
                                       f"loss value against H(q, p) of the q its gradient implies: {mismatch:.1e} "
                                       f"relative difference (V = 12)")


def _smoothing_probe(ctx: CheckContext, gen: torch.Generator, vocab: int, smoothing: float) -> tuple[float, float, float]:
    """(mass off the label, gradient at padding, |loss - H(q, p)| / H) for one call of the loss."""
    pad = 0
    logits = (torch.randn(6, vocab, generator=gen) * 2).requires_grad_(True)
    target = torch.randint(1, vocab, (6,), generator=gen)
    target[-1] = pad
    loss = ctx.target.loss(logits, target, pad, smoothing)
    loss.backward()
    grad = logits.grad
    logp = torch.log_softmax(logits.detach().double(), -1)[:-1]
    q = logp.exp() - grad[:-1].double()
    off_target = (1 - q.gather(1, target[:-1, None])).mean().item()
    implied = -(q * logp).sum().item()
    return off_target, grad[-1].abs().max().item(), abs(implied - loss.item()) / max(abs(implied), 1e-12)


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


@checker("training.loop_rates")
def loop_rates(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 3 as the training loop applies it: the rate the optimizer holds in updates 1, 2, ...,
    4000, 4001, ... (the first update is update 1: it must not run at rate 0, and the peak must
    land on update ``warmup_steps``, not one later). Measured: the worst relative error."""
    d_model, warmup = claim.params.get("d_model", 512), claim.params.get("warmup", 4000)
    steps = claim.params.get("steps", [1, 2, warmup - 1, warmup, warmup + 1, 2 * warmup])
    rates = ctx.target.update_rates(steps, d_model, warmup)
    errors = [abs(r / eq3(s, d_model, warmup) - 1) for s, r in zip(steps, rates)]
    worst = max(errors)
    shown = ", ".join(f"update {s}: {r:.3e}" for s, r in zip(steps, rates))
    return Measurement(worst, None if rates[0] > 0 else False, f"{shown}; worst relative error {worst:.1e}")


@checker("training.checkpoint_cadence")
def checkpoint_cadence(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 6.1: checkpoints "written at 10-minute intervals", observed on the training loop with
    a fake clock, each update taking ``seconds_per_update`` (hardware faster or slower than the
    paper's). Measured: the updates between consecutive checkpoints (the last, written at the end of
    the run, left out) in minutes of the paper's hardware, at ``paper_seconds_per_update`` (Section
    5.2: 0.4 s per base step): the same share of training on any hardware."""
    seconds, updates = claim.params.get("seconds_per_update", 60), claim.params.get("updates", 35)
    paper_seconds = claim.params.get("paper_seconds_per_update", seconds)
    steps = ctx.target.checkpoint_steps(seconds, updates)
    gaps = sorted({(b - a) * paper_seconds / 60 for a, b in zip([0, *steps[:-2]], steps[:-1])})
    if not gaps:
        return Measurement(None, False, f"checkpoints after updates {steps}: no interval to measure")
    value = gaps[0] if len(gaps) == 1 else gaps
    return Measurement(value, detail=(f"{updates} updates of {seconds} s: checkpoints after updates {steps}; "
                                      f"minutes at the paper's {paper_seconds} s per update"))


@checker("training.average_last")
def average_last(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 6.1: "a single model obtained by averaging the last 5 checkpoints": the average the
    implementation makes of synthetic checkpoints, against the mean of the newest k. Measured: the
    worst difference (0: the newest k, each weighed 1/k)."""
    k, total = claim.params.get("k", 5), claim.params.get("checkpoints", 8)
    gen = torch.Generator().manual_seed(ctx.seed)
    shapes = {"w": (3, 4), "b": (4,)}
    states = [{n: torch.randn(shape, generator=gen) for n, shape in shapes.items()} for _ in range(total)]
    got = ctx.target.average_last(states, k)
    worst = 0.0
    for name in shapes:
        want = torch.stack([s[name] for s in states[-k:]]).double().mean(0)
        worst = max(worst, (got[name].double() - want).abs().max().item())
    return Measurement(worst, detail=f"average of the last {k} of {total} checkpoints: max |difference| {worst:.1e}")


class AdapterValueError(ValueError):
    """An adapter gave a value of the wrong kind for the claim that reads it."""


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
