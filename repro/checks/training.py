"""Checkers for Section 5: the optimizer, Eq. 3, label smoothing, and the recipe's settings."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.checks.jobs import job_config, own, shrunk, watches_jobs
from repro.claims.claim import Claim
from repro.claims.compare import Worst, finite, max_abs_diff
from repro.recipes import get_recipe
from repro.train.probes import ObservedSteps, checkpoint_steps, job_rates, loop_adam_updates, optimizer_updates


#: Gradients of the two observed Adam steps, per entry of the probed parameter: eight entries at
#: the scale of epsilon (1e-11 .. 3e-8, the same in both steps), then (1, 0), (0, 1), (1, -1), (0, 0).
EPSILON_PROBES = (1e-11, 3e-11, 1e-10, 3e-10, 1e-9, 3e-9, 1e-8, 3e-8)


def adam_gradients() -> list[torch.Tensor]:
    first = torch.tensor([*EPSILON_PROBES, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    second = torch.tensor([*EPSILON_PROBES, 0.0, 1.0, -1.0, 0.0], dtype=torch.float64)
    return [first, second]


def recover_adam(seen: ObservedSteps) -> tuple[list[float], list[str]]:
    """[beta1, beta2, epsilon] read off two steps (Kingma & Ba's update with bias correction), and
    what departs from Adam's rule.

    Step 1 moves an entry by -lr g / (|g| + eps) whatever the betas: the eight entries with g near
    epsilon give eps = g (lr / |move| - 1). Step 2, gradient (1, -1): the move is
    +lr (1 - beta1) / (1 + beta1); gradient (1, 0): -lr beta1 / (1 + beta1) sqrt((1 + beta2) /
    beta2). The entry with gradient (0, 1) must then move by -lr sqrt(1 + beta2) / (1 + beta1), the
    one with (0, 0) not at all, and a parameter whose gradient was zero must not move (weight decay)."""
    finite([seen.before, *seen.after, seen.rates, seen.untouched], "the optimizer's steps")
    lr1, lr2 = seen.rates
    first = (seen.after[0] - seen.before) / lr1
    second = (seen.after[1] - seen.after[0]) / lr2
    n = len(EPSILON_PROBES)
    fractions = -first[:n]
    usable = [(g, f) for g, f in zip(EPSILON_PROBES, fractions.tolist()) if 0.02 < f < 0.98]
    nearest = min(zip(EPSILON_PROBES, fractions.tolist()), key=lambda gf: abs(gf[1] - 0.5))
    estimates = [g * (1 / f - 1) for g, f in (usable or [nearest])] if nearest[1] > 0 else [float("inf")]
    eps = sorted(estimates)[len(estimates) // 2]
    e = float(second[n + 2])
    beta1 = (1 - e) / (1 + e)
    s2 = (float(-second[n]) * (1 + beta1) / beta1) ** 2 if beta1 > 0 else float("nan")
    beta2 = 1 / (s2 - 1) if s2 > 1 else float("nan")
    departures = []
    if math.isfinite(beta1) and math.isfinite(beta2) and beta2 > 0:
        want = math.sqrt(1 + beta2) / (1 + beta1)
        if abs(float(-second[n + 1]) / want - 1) > 1e-4:
            departures.append(f"a first gradient after a zero one moved by {float(-second[n + 1]):.6f} lr, "
                              f"Adam's rule with these betas gives {want:.6f} lr")
    if float(first[n + 3].abs()) > 0 or float(second[n + 3].abs()) > 0:
        departures.append("an entry with zero gradient moved")
    if seen.untouched > 0:
        departures.append(f"a parameter with zero gradient moved by {seen.untouched:.3g} (weight decay)")
    return [beta1, beta2, eps], departures


@checker("training.adam")
def adam(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.3: Adam with beta1 = 0.9, beta2 = 0.98 and epsilon = 1e-9, recovered from two
    observed steps (:func:`recover_adam`). repro: two updates of the training loop's own
    ``update()`` with the optimizer the loop builds for the job (params.experiment), at the rate
    Eq. 3 gives updates warmup and warmup + 1 (the largest, so that weight decay would show);
    another implementation: two steps of the optimizer its adapter builds."""
    if watches_jobs(ctx, "optimizer"):
        cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende")))
        # At the peak of Eq. 3 (the rate is largest there, so that weight decay would show).
        seen = loop_adam_updates(cfg, adam_gradients(), (cfg.warmup_steps, cfg.warmup_steps + 1))
        where = f"the loop's update() of job {claim.params.get('experiment', 'table2-base-ende')}"
    else:
        seen = optimizer_updates(ctx.target.optimizer, adam_gradients())
        where = f"two steps of {ctx.target.name}'s optimizer"
    measured, departures = recover_adam(seen)
    finite(measured, "the recovered Adam settings")
    detail = (f"{where}: beta1 {measured[0]:.6f}, beta2 {measured[1]:.6f}, epsilon {measured[2]:.4g} "
              f"(rates {seen.rates[0]:.3e}, {seen.rates[1]:.3e})")
    return Measurement([round(v, 6) if i < 2 else float(f"{v:.5g}") for i, v in enumerate(measured)],
                       False if departures else None, detail + ("; " + "; ".join(departures) if departures else ""))


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
        return finite(float(ctx.target.learning_rate(s, d_model, warmup)), f"the rate of update {s}")

    worst = Worst()
    for s in steps:
        worst.add(abs(rate(s) / eq3(s, d_model, warmup) - 1), f"update {s}")
    shift = step_shift(rate, d_model, warmup, steps) if worst.value > 1e-6 else None
    return Measurement(worst.value, detail=f"worst relative error {worst.value:.1e} over {len(steps)} steps"
                                           f"{_shift_text(shift, warmup)}")


#: An update far beyond any warm-up: Eq. 3 is d_model^-0.5 step^-0.5 there.
FAR = 1_000_000


#: The rates the loop applied, by (experiment, update): several claims watch the same updates.
_APPLIED: dict[tuple[str, str | None, int], float] = {}


def applied_rates(experiment: str, steps: list[int], job: str | None = None) -> list[float]:
    """The rate the training loop applies in each of ``steps`` running the settings of the
    experiment's ``job`` (default: its first; :func:`repro.train.probes.job_rates`), each update
    watched once per process. ``experiment`` may name a recipe instead, as ``recipe:NAME`` (the
    project's own, run by ``repro train``)."""
    missing = sorted({s for s in steps if (experiment, job, s) not in _APPLIED})
    if missing:
        cfg = get_recipe(experiment[7:]).train if experiment.startswith("recipe:") else job_config(experiment, job)
        _APPLIED.update(zip(((experiment, job, s) for s in missing), job_rates(cfg, missing)))
    return finite([_APPLIED[(experiment, job, s)] for s in steps],
                  f"the rates the loop applies for job {job or experiment}")


def loop_peak(experiment: str) -> tuple[int, dict[int, float]]:
    """The update at which the training loop's rate peaks when it runs the job's settings,
    recovered from what it applies: Eq. 3's two branches give rate(1) = c w^-1.5 and rate(s) =
    c s^-0.5 past the peak, so w = (rate(FAR) FAR^0.5 / rate(1))^(2/3), whatever c (d_model^-0.5
    times the recipe's scale). The rates around w are observed too, to show the peak."""
    first, far = applied_rates(experiment, [1, FAR])
    if first <= 0 or far <= 0:
        return 0, {1: first, FAR: far}
    w = max(2, round((far * FAR**0.5 / first) ** (2 / 3)))
    rates = dict(zip([w - 1, w, w + 1], applied_rates(experiment, [w - 1, w, w + 1])))
    return w, {1: first, **rates, FAR: far}


def _observed_peak(experiment: str, what: str) -> Measurement:
    """The update (``what`` = ``step``) or the rate (``value``) of the peak of the rates the loop
    applies running ``experiment``'s settings (:func:`loop_peak`)."""
    w, rates = loop_peak(experiment)
    if not w:
        return Measurement(None, False, f"job {experiment}: the loop's rates {rates} do not rise from update 1")
    peak = rates[w] >= rates[w - 1] and rates[w] > rates[w + 1]
    shown = ", ".join(f"update {s}: {r:.4e}" for s, r in sorted(rates.items()))
    return Measurement(w if what == "step" else rates[w], None if peak else False,
                       f"job {experiment}, the loop's rates: {shown}; peak at update {w}"
                       + ("" if peak else " (not a peak: the rate does not fall after it)"))


@checker("training.recipe_peak", audits=False)
def recipe_peak(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 3 at one of the project's own scales: the peak of the rates the training loop applies
    running recipe ``params.recipe`` (its warm-up, rate scale and width), its update or its value."""
    own(ctx)
    return _observed_peak(f"recipe:{claim.params['recipe']}", claim.params.get("measure", "value"))


@checker("training.lr_peak")
def lr_peak(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 3: the update (counted from 1) at which the learning rate peaks, and its value. repro:
    observed on the training loop running the job's settings (params.experiment; :func:`loop_peak`),
    so the warm-up is the job's, not this claim's; another implementation: its schedule scanned
    with the claim's d_model and warmup (the protocol takes them as arguments)."""
    what = claim.params.get("measure", "value")
    if watches_jobs(ctx, "learning_rate"):
        return _observed_peak(claim.params.get("experiment", "table2-base-ende"), what)
    d_model, warmup = claim.params.get("d_model", 512), claim.params.get("warmup", 4000)
    rates = [finite(float(ctx.target.learning_rate(s, d_model, warmup)), f"the rate of update {s}")
             for s in range(1, 3 * warmup)]
    best = max(range(len(rates)), key=rates.__getitem__)
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
    and the loss value must be the cross-entropy H(q, p) of the q its gradient implies, or KL(q || p)
    = H(q, p) - H(q), which differs by a constant (a kernel whose gradient and value disagree
    otherwise trains towards another target than it reports)."""
    smoothing = claim.params.get("smoothing", 0.1)
    rows, worst_off, verdict = [], None, True
    paths = ctx.target.loss_paths()
    if list(paths) == ["loss"]:  # the protocol's default: the adapter's loss itself (its errors name 'loss')
        paths = {"loss": ctx.target.loss}
    for path, loss in paths.items():
        gen = torch.Generator().manual_seed(ctx.seed)
        # A large vocabulary to measure the mass (conventions of V-1 or V classes agree to 1e-3),
        # a small one to compare value and gradient (where a 1/V share of the smoothing shows).
        off_target, pad_grad, _ = _smoothing_probe(loss, gen, 1000, smoothing)
        _, pad_grad_small, mismatch = _smoothing_probe(loss, gen, 12, smoothing)
        finite([off_target, pad_grad, pad_grad_small, mismatch], f"the loss's gradient and value ({path})")
        pad_grad = max(pad_grad, pad_grad_small)
        verdict &= pad_grad == 0 and mismatch <= 1e-4 and claim.within(off_target)
        if worst_off is None or abs(off_target - smoothing) > abs(worst_off - smoothing):
            worst_off = off_target
        rows.append(f"{path}: mass off the label {off_target:.4f}; gradient at padding {pad_grad:.1e}; loss value "
                    f"against H(q, p) (or KL(q || p)) of the q its gradient implies: {mismatch:.1e} relative difference "
                    "(V = 12)")
    return Measurement(worst_off, verdict, "; ".join(rows))


def _smoothing_probe(loss_fn, gen: torch.Generator, vocab: int, smoothing: float) -> tuple[float, float, float]:
    """(mass off the label, gradient at padding, |loss - H(q, p)| / H) for one call of ``loss_fn``."""
    pad = 0
    logits = (torch.randn(6, vocab, generator=gen) * 2).requires_grad_(True)
    target = torch.randint(1, vocab, (6,), generator=gen)
    target[-1] = pad
    loss = loss_fn(logits, target, pad, smoothing)
    finite(loss, "the loss")
    loss.backward()
    grad = finite(logits.grad, "the loss's gradient")
    logp = torch.log_softmax(logits.detach().double(), -1)[:-1]
    q = logp.exp() - grad[:-1].double()
    off_target = (1 - q.gather(1, target[:-1, None])).mean().item()
    implied = -(q * logp).sum().item()
    # KL(q || p) = H(q, p) - H(q), tensor2tensor's and the Annotated Transformer's form (KLDivLoss):
    # the same gradient, the same target, a value lower by the target's own entropy
    kl = implied + torch.special.xlogy(q.clamp(min=0), q.clamp(min=0)).sum().item()
    return off_target, grad[-1].abs().max().item(), min(abs(implied - loss.item()) / max(abs(implied), 1e-12),
                                                        abs(kl - loss.item()) / max(abs(kl), 1e-12))


@checker("recipe.value", evidence="setting")
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
    land on update ``warmup_steps``, not one later), against Eq. 3 with the paper's d_model and
    warm-up (params). repro: the loop runs the job's own settings (params.experiment and .job: its
    warm-up, rate scale and model width; :func:`repro.train.probes.job_rates`); another implementation:
    its ``update_rates`` with the claim's d_model and warm-up. Measured: the worst relative error."""
    d_model, warmup = claim.params.get("d_model", 512), claim.params.get("warmup", 4000)
    steps = claim.params.get("steps", [1, 2, warmup - 1, warmup, warmup + 1, 2 * warmup])
    if watches_jobs(ctx, "update_rates"):
        experiment, job = claim.params.get("experiment", "table2-base-ende"), claim.params.get("job")
        rates, where = applied_rates(experiment, list(steps), job), f"job {job or experiment}'s settings in the loop: "
    else:
        rates, where = ctx.target.update_rates(steps, d_model, warmup), ""
    finite(list(rates), "the loop's rates")
    worst = Worst()
    for s, r in zip(steps, rates):
        worst.add(abs(r / eq3(s, d_model, warmup) - 1), f"update {s}")
    shown = ", ".join(f"update {s}: {r:.3e}" for s, r in zip(steps, rates))
    return Measurement(worst.value, None if rates[0] > 0 else False,
                       f"{where}{shown}; worst relative error {worst.value:.1e} against Eq. 3 (d_model {d_model}, "
                       f"warmup {warmup})")


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
    value = gaps[0] if len(gaps) == 1 else gaps   # intervals that differ cannot all be the paper's one
    return Measurement(value, False if len(gaps) > 1 else None, detail=(f"{updates} updates of {seconds} s: checkpoints after updates {steps}; "
                                      f"minutes at the paper's {paper_seconds} s per update"))


@checker("training.checkpoint_clock", audits=False)
def checkpoint_clock(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 6.1's "10-minute intervals" as the loop's wall-clock trigger: the recipe's
    ``checkpoint_every_minutes`` (the local recipe sets 10, beside its update count), observed on
    the training loop with the update count off and a fake clock of ``seconds_per_update`` per
    update. Measured: the minutes of the clock between consecutive checkpoints (the last, written at
    the end of the run, left out); one update's length is the resolution."""
    name = claim.params.get("recipe", "local")
    seconds, updates = claim.params.get("seconds_per_update", 6.0), claim.params.get("updates", 300)
    train = get_recipe(name).train
    if not train.checkpoint_every_minutes:
        return Measurement(0.0, False, f"recipe {name} sets no wall-clock checkpoint interval (checkpoint_every_minutes)")
    steps = checkpoint_steps(train.replace(checkpoint_every_steps=0), seconds, updates)
    gaps = sorted({round((b - a) * seconds / 60, 6) for a, b in zip([0, *steps[:-2]], steps[:-1])})
    if not gaps:
        return Measurement(None, False, f"checkpoints after updates {steps}: no interval to measure")
    return Measurement(gaps[0] if len(gaps) == 1 else gaps, False if len(gaps) > 1 else None,
                       detail=(f"recipe {name}, checkpoint_every_minutes {train.checkpoint_every_minutes}, update count "
                               f"off; {updates} updates of {seconds} s: checkpoints after updates {steps}"))


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
    worst = Worst()
    for name in shapes:
        want = torch.stack([s[name] for s in states[-k:]]).double().mean(0)
        worst.add(max_abs_diff(got[name].double(), want, f"the average's '{name}'"), name)
    return Measurement(worst.value, detail=f"average of the last {k} of {total} checkpoints: max |difference| "
                                           f"{worst.value:.1e}")


class AdapterValueError(ValueError):
    """An adapter gave a value of the wrong kind for the claim that reads it."""


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
