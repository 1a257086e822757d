"""The training loop observed from outside, for the claims of Sections 5.3 and 6.1.

Each probe runs :func:`repro.train.loop.run` itself, on a tiny model and a synthetic corpus, and
records what the loop does: the learning rate the optimizer holds when it steps (Eq. 3, with the
loop's own numbering of updates), and the updates after which the loop writes checkpoints when
updates take a given wall time (a fake clock). Nothing here restates the loop's rules.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from repro.data.synthetic import SyntheticCorpus
from repro.train.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint, save_checkpoint, step_of
from repro.train.config import TrainConfig
from repro.train.loop import run

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
            existing = list_checkpoints(tmp)
            if existing and step > 1:
                state = load_checkpoint(existing[-1])
                for path in existing:
                    path.unlink()
                save_checkpoint(checkpoint_path(tmp, step - 1), {**_without_marker(state), "step": step - 1})
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


__all__ = ["checkpoint_steps", "optimizer_steps", "update_rates"]
