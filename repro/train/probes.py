"""The training loop observed from outside, for the claims of Sections 5.2, 5.3 and 6.1.

Each probe runs the loop's own code (:func:`repro.train.loop.run`, or its :func:`build` and
:func:`repro.train.update_step.update`), on a tiny model and a synthetic corpus, and records what it does:
the learning rate the optimizer holds when it steps (Eq. 3, with the loop's own numbering of
updates), the updates after which the loop writes checkpoints when updates take a given wall time
(a fake clock), the last update a job's loop makes, the checkpoints a run leaves for its
evaluation, and what Adam does to a parameter over two updates whose gradients are chosen
(:func:`loop_adam_updates`). Nothing here restates the loop's rules.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from repro.data.batching import collate
from repro.data.synthetic import SyntheticCorpus
from repro.files.writer import remove
from repro.train.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint, save_checkpoint, step_of
from repro.train.config import TrainConfig
from repro.train.loop import build, run
from repro.train.update_step import update

#: The smallest model the loop trains: the probes watch the loop, not the model.
_TINY = {"n_layers": 1, "d_ff": 8, "n_heads": 1, "dropout": 0.0}


def _tiny(cfg: TrainConfig, out_dir: str, d_model: int = 8, **changes: object) -> TrainConfig:
    """``cfg`` on the smallest model (of width ``d_model``) and batches the loop takes."""
    # fp32, the paper's arithmetic (Section 5.2's P100s have no bf16), whatever ``auto`` would pick here
    fields = dict(out_dir=out_dir, vocab_size=8, tokens_per_batch=16, max_tokens_per_device=16, log_every=10**6,
                  precision="fp32",
                  keep_checkpoints=max(cfg.keep_checkpoints, cfg.average_last), threads=1, device="cpu",
                  model_overrides={**cfg.model_overrides, **_TINY, "d_model": d_model})
    return cfg.replace(**{**fields, **changes})


@contextmanager
def _threads_kept() -> Iterator[None]:
    """The tiny probes run on one thread (more only add synchronisation); the caller's count is restored."""
    before = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def optimizer_steps() -> Iterator[list[float]]:
    """The learning rate of the first parameter group at every optimizer step taken in the block."""
    rates: list[float] = []
    handle = register_optimizer_step_pre_hook(lambda opt, args, kwargs: rates.append(float(opt.param_groups[0]["lr"])))
    try:
        yield rates
    finally:
        handle.remove()


def _quiet(_msg: str) -> None:
    pass


def update_rates(steps: Sequence[int], d_model: int, warmup_steps: int, base: TrainConfig | None = None) -> list[float]:
    """The rate the optimizer holds in each of the updates ``steps`` (the loop's numbering).

    The loop runs from scratch for the first update asked; for a later update s it resumes from a
    checkpoint relabelled as update s - 1 (the loop's own resume path) and makes one update, so
    that update 4001 costs one update, not 4001.
    """
    cfg = base or TrainConfig()
    examples = SyntheticCorpus().examples(8, cfg.seed)
    rates = {}
    with tempfile.TemporaryDirectory(prefix="repro-rates-") as tmp:
        run_cfg = _tiny(cfg, tmp, d_model, warmup_steps=warmup_steps, checkpoint_every_steps=1,
                        checkpoint_every_minutes=0)
        for step in sorted(set(steps)):
            if step > 1 and not list_checkpoints(tmp):  # a first update, to have a checkpoint to relabel
                with _threads_kept():
                    run(run_cfg.replace(max_steps=1), examples, 8, log=_quiet)
            existing = list_checkpoints(tmp)
            if existing and step > 1:
                state = load_checkpoint(existing[-1])
                for path in existing:
                    remove(path, within=tmp)
                save_checkpoint(checkpoint_path(tmp, step - 1), {**_without_marker(state), "step": step - 1},
                                within=tmp)
            with optimizer_steps() as seen, _threads_kept():
                run(run_cfg.replace(max_steps=step), examples, 8, log=_quiet)
            rates[step] = seen[-1]
    return [rates[s] for s in steps]


def _without_marker(state: dict) -> dict:
    return {k: v for k, v in state.items() if k not in ("format", "version")}


def checkpoint_steps(cfg: TrainConfig, seconds_per_update: float, updates: int) -> list[int]:
    """The updates after which the loop, run with ``cfg``'s checkpoint settings, writes a checkpoint
    when every update takes ``seconds_per_update`` (a clock that advances at each optimizer step)."""
    examples = SyntheticCorpus().examples(8, cfg.seed)
    updates_done = [0]
    with tempfile.TemporaryDirectory(prefix="repro-cadence-") as tmp:
        run_cfg = _tiny(cfg, tmp, max_steps=updates, keep_checkpoints=updates)
        handle = register_optimizer_step_pre_hook(lambda *_: updates_done.__setitem__(0, updates_done[0] + 1))
        try:
            with _threads_kept():
                run(run_cfg, examples, 8, log=_quiet, clock=lambda: updates_done[0] * seconds_per_update)
        finally:
            handle.remove()
        return [step_of(p) for p in list_checkpoints(tmp)]


def files_dated_against_steps(out_dir: str | Path) -> None:
    """Date the checkpoints in ``out_dir`` against their steps (the newest step the oldest file, a
    day apart): which checkpoint is newest is the step's, never the file system's time, and a loop
    that went by the files' times (which tie within a clock tick when a tiny run writes them)
    would then fail every time, not only on a fast machine."""
    paths = list_checkpoints(out_dir)
    base = 1_600_000_000
    for age, path in enumerate(reversed(paths)):
        os.utime(path, (base + age * 86_400, base + age * 86_400))


def pruned_run(cfg: TrainConfig, out_dir: str | Path, updates: int, examples: list, vocab_size: int,
               clock: Callable[[], float]) -> list[int]:
    """The updates whose checkpoints are left in ``out_dir`` after the loop, run with ``cfg``
    (a checkpoint after every update), has written checkpoints after updates 1 .. ``updates`` - 1
    and makes update ``updates``: the first update's checkpoint is relabelled as updates 2 ..
    ``updates`` - 1 (the loop resumes from the newest), so that a run of a job keeping 20 costs two
    updates, not 23."""
    run_cfg = cfg.replace(out_dir=str(out_dir), checkpoint_every_steps=1, checkpoint_every_minutes=0.0)
    with _threads_kept():
        run(run_cfg.replace(max_steps=1), examples, vocab_size, log=_quiet, clock=clock)
        first = _without_marker(load_checkpoint(list_checkpoints(out_dir)[0]))
        for step in range(2, updates):
            save_checkpoint(checkpoint_path(out_dir, step), {**first, "step": step}, within=out_dir)
        files_dated_against_steps(out_dir)
        run(run_cfg.replace(max_steps=updates), examples, vocab_size, log=_quiet, clock=clock)
    return [step_of(p) for p in list_checkpoints(out_dir)]


def job_rates(cfg: TrainConfig, steps: Sequence[int]) -> list[float]:
    """The rate the loop applies in each of the updates ``steps`` when it runs ``cfg`` (a job's
    training settings: its warm-up, its rate scale, the width of its model), on a one-layer model
    of the job's d_model (Eq. 3's rate depends on the model's width, not on its depth)."""
    return update_rates(steps, cfg.model_config().d_model, cfg.warmup_steps, base=cfg)


class _StopAfterOneUpdate(Exception):
    pass


def last_update(cfg: TrainConfig, guess: int | None = None, limit: int = 1 << 24) -> int:
    """The number of the last update the loop makes when it runs ``cfg`` (a job's settings, on a
    tiny model): resumed from a checkpoint relabelled as update s, the loop either makes update
    s + 1 or stops. With a ``guess`` S, two probes test it (an update after S - 1, none after S);
    otherwise, or when they refute it, a bisection over s finds where the loop stops. Each probe
    makes at most one update."""
    examples = SyntheticCorpus().examples(8, cfg.seed)
    with tempfile.TemporaryDirectory(prefix="repro-last-update-") as tmp:
        run_cfg = _tiny(cfg, tmp, checkpoint_every_steps=1, checkpoint_every_minutes=0)
        with _threads_kept():
            run(run_cfg.replace(max_steps=1), examples, 8, log=_quiet)
        first = load_checkpoint(list_checkpoints(tmp)[-1])

        def updates_after(done: int) -> bool:
            for path in list_checkpoints(tmp):
                remove(path, within=tmp)
            if done:
                save_checkpoint(checkpoint_path(tmp, done), {**_without_marker(first), "step": done}, within=tmp)
            made = []

            def stop(step: int) -> None:
                made.append(step)
                raise _StopAfterOneUpdate

            try:
                with _threads_kept():
                    run(run_cfg, examples, 8, log=_quiet, on_step=stop)
            except _StopAfterOneUpdate:
                pass
            return bool(made)

        if guess is not None and guess > 0 and updates_after(guess - 1) and not updates_after(guess):
            return guess
        if not updates_after(0):
            return 0
        low, high = 0, limit  # an update follows `low`; none follows `high`
        if updates_after(high):
            return limit
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if updates_after(mid) else (low, mid)
        return high


def run_for_evaluation(cfg: TrainConfig, out_dir: str | Path, examples: list[tuple[list[int], list[int]]],
                       vocab_size: int, updates: int, seconds_per_update: float) -> list[Path]:
    """Train ``cfg`` (a job's settings: its checkpoint cadence, how many checkpoints it keeps, on a
    tiny model) for ``updates`` updates of ``seconds_per_update`` each (a fake clock) into
    ``out_dir``; returns the checkpoints it left there for the evaluation, oldest first."""
    updates_done = [0]
    run_cfg = _tiny(cfg, str(out_dir), max_steps=updates, keep_checkpoints=cfg.keep_checkpoints)
    handle = register_optimizer_step_pre_hook(lambda *_: updates_done.__setitem__(0, updates_done[0] + 1))
    try:
        with _threads_kept():
            run(run_cfg, examples, vocab_size, log=_quiet, clock=lambda: updates_done[0] * seconds_per_update)
    finally:
        handle.remove()
    return list_checkpoints(out_dir)


@dataclass
class ObservedSteps:
    """Two optimizer steps watched on one parameter: its values (float64) before and after each
    step, the gradient each step was given, the learning rate each step applied, and the largest
    change of a parameter whose gradient was zero in both (weight decay would move it)."""

    before: Tensor
    after: list[Tensor]
    gradients: list[Tensor]
    rates: list[float]
    untouched: float


class _ChosenGradients(nn.Module):
    """A training objective whose gradient is chosen: ``probe`` gets ``gradients[k]`` at the k-th
    call, ``still`` gets zeros. Called as the loop calls its objective; returns (loss, nll, None)."""

    def __init__(self, probe: Tensor, still: Tensor, gradients: Sequence[Tensor]) -> None:
        super().__init__()
        self.probe, self.still, self.gradients, self.calls = probe, still, list(gradients), 0

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, scale: float) -> tuple[Tensor, Tensor, None]:
        g = self.gradients[self.calls].to(self.probe.dtype)
        self.calls += 1
        loss = (self.probe * g).sum() + (self.still * 0.0).sum()
        return loss, torch.zeros(()), None


def loop_adam_updates(cfg: TrainConfig, gradients: Sequence[Tensor], steps: tuple[int, int] = (1, 2)) -> ObservedSteps:
    """Two updates as the loop makes them (:func:`repro.train.update_step.update` with the optimizer
    :func:`repro.train.loop.build` builds for ``cfg``, at Eq. 3's rate of the loop's updates
    ``steps``; they are the optimizer's first two steps), with the gradient of the model's first
    feed-forward bias (zero at initialisation) set to ``gradients[0]`` and ``gradients[1]`` and
    every other gradient zero."""
    trainer = build(cfg, [([5, 6], [7, 8])], 40)
    layer = trainer.model.encoder_layers[0].feed_forward
    probe, still = layer.w_1.bias, layer.w_1.weight
    if probe.numel() < len(gradients[0]):
        raise ValueError(f"the probed bias has {probe.numel()} entries, fewer than the {len(gradients[0])} gradients")
    padded = [torch.cat([g, torch.zeros(probe.numel() - len(g), dtype=g.dtype)]) for g in gradients]
    objective = _ChosenGradients(probe, still, padded)
    micro = [collate([([5, 6], [7, 8])])]
    before, still_before = probe.detach().double().clone(), still.detach().double().clone()
    after, rates = [], []
    for step in steps:
        update(objective, trainer.optimizer, micro, trainer.device, step=step, d_model=trainer.model_cfg.d_model,
               warmup_steps=cfg.warmup_steps, lr_scale=cfg.lr_scale, precision=trainer.precision)
        after.append(probe.detach().double().clone()[: len(gradients[0])])
        rates.append(float(trainer.optimizer.param_groups[0]["lr"]))
    untouched = float((still.detach().double() - still_before).abs().max())
    return ObservedSteps(before[: len(gradients[0])], after, [g.double() for g in gradients], rates, untouched)


def optimizer_updates(make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
                      gradients: Sequence[Tensor], rate: float = 1e-3) -> ObservedSteps:
    """Two steps of the optimizer ``make_optimizer`` builds (an implementation's, through the audit
    protocol), at learning rate ``rate``, on a parameter starting at zero with the given gradients;
    a second parameter (ones) gets zero gradients."""
    probe = nn.Parameter(torch.zeros(len(gradients[0])))
    still = nn.Parameter(torch.ones(4))
    optimizer = make_optimizer([probe, still])
    after, rates = [], []
    for g in gradients:
        for group in optimizer.param_groups:
            group["lr"] = rate
        probe.grad, still.grad = g.to(probe.dtype).clone(), torch.zeros_like(still)
        optimizer.step()
        after.append(probe.detach().double().clone())
        rates.append(float(optimizer.param_groups[0]["lr"]))
    untouched = float((still.detach().double() - 1.0).abs().max())
    return ObservedSteps(torch.zeros(len(gradients[0]), dtype=torch.float64), after,
                         [g.double() for g in gradients], rates, untouched)


__all__ = ["ObservedSteps", "checkpoint_steps", "job_rates", "last_update", "loop_adam_updates", "optimizer_steps",
           "optimizer_updates", "files_dated_against_steps", "pruned_run", "run_for_evaluation", "update_rates"]
