"""Exact resume: a run restarted from its newest checkpoint continues as if it had never stopped.

The checkpoint must be this run's (its lineage, :mod:`repro.train.lineage`: the same vocabulary and
training data; a checkpoint without a readable lineage only with ``--allow-no-lineage``), of this
model and vocabulary size, and a training checkpoint (Adam's moments, the RNG states, the data
position, the step: the schedule of Eq. 3 is a function of it).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from repro.data.synthetic import SYNTHETIC
from repro.errors import CheckpointError, ConfigError
from repro.model import TransformerConfig
from repro.train.checkpoint import load_checkpoint, step_of
from repro.train.lineage import check_resume, lineage_of, require_lineage

if TYPE_CHECKING:
    from repro.train.loop import Trainer


def restore(path: Path, trainer: Trainer, allow_no_lineage: bool = False) -> tuple[int, dict[str, str]]:
    """The step ``path`` was written at, its state restored into ``trainer``; and the lineage note the
    run's later checkpoints carry (``unchecked_from``: resumed from one without a readable lineage)."""
    state = load_checkpoint(path)
    if require_lineage(state, path, allow=allow_no_lineage, doing="resuming from it"):
        unchecked = {k: v for k, v in lineage_of(state).items() if k == "unchecked_from"}
    else:
        unchecked = {"unchecked_from": str(path)}
    check_resume(state, path, trainer.cfg.out_dir)
    written_with = (state.get("train_config") or {}).get("vocab_size")
    if trainer.cfg.dataset != SYNTHETIC and written_with is not None and written_with != trainer.cfg.vocab_size:
        raise CheckpointError(f"{path}: written by a run with vocab_size={written_with} (its vocabulary has "
                              f"{trainer.model_cfg.src_vocab_size} entries); resuming with vocab_size="
                              f"{trainer.cfg.vocab_size} would record a vocabulary the model does not have: "
                              "give the run's vocab_size, or train into another out_dir")
    mine = trainer.model_cfg.to_dict()
    theirs = TransformerConfig.from_dict(state["model_config"]).to_dict()
    if theirs != mine:
        diff = sorted(k for k in mine if theirs.get(k) != mine[k])
        raise CheckpointError(f"{path}: written for another model (fields {', '.join(diff)} differ); "
                              "use another out_dir or the same configuration")
    for key in ("optimizer", "rng", "data", "step"):
        if key not in state:
            raise CheckpointError(f"{path}: not a training checkpoint (no '{key}'); cannot resume from it")
    if state["step"] != step_of(path):   # the run would go on from another update than the one it picked
        raise CheckpointError(f"{path}: field 'step' is {state['step']}, but the file is named for update "
                              f"{step_of(path)} (renamed or copied over); cannot resume from it: restore the run's "
                              "own file, or train into another out_dir")
    try:
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: does not fit this model/optimizer ({str(err).splitlines()[0][:200]})") from None
    _check_moments(trainer, path)
    # Adam's settings are the run's, not the checkpoint's: load_state_dict brings back the betas and
    # epsilon it was written with, and a run resumed with others would otherwise keep them silently
    # (its records say which applied from which update: repro.observed.history)
    cfg = trainer.cfg
    for group in trainer.optimizer.param_groups:
        group["betas"], group["eps"] = (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps
    try:
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(_as_random_state(state["rng"]["python"]))
        if torch.cuda.is_available() and state["rng"].get("cuda"):
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as err:
        raise CheckpointError(f"{path}: field 'rng' is not the random generators' state a training checkpoint holds "
                              f"({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else 'no detail'})") from None
    # rank 0 wrote the checkpoint; every rank has taken the same number of batches (the shards are
    # padded to equal length), so rank 0's (epoch, offset) is every rank's, in its own shard
    data = state["data"]
    if isinstance(data, dict) and "shard" in data and data.get("num_shards") == trainer.world_size:
        data = {**data, "shard": trainer.rank}
    try:
        trainer.batcher.load_state_dict(data)
    except ConfigError as err:
        raise CheckpointError(f"{path}: field 'data': {err}") from None
    return int(state["step"]), unchecked


def _check_moments(trainer: Trainer, path: Path) -> None:
    """Refuse optimizer state whose per-weight tensors (Adam's moments) are not of their weight's shape
    and a floating type: loaded as they are, the first update would fail (or broadcast) mid-run."""
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    for group in trainer.optimizer.param_groups:
        for param in group["params"]:
            for key, value in trainer.optimizer.state.get(param, {}).items():
                if not isinstance(value, torch.Tensor) or value.dim() == 0:
                    continue   # the step count
                if value.shape != param.shape or not value.is_floating_point():
                    raise CheckpointError(
                        f"{path}: optimizer state '{key}' of weight '{names.get(id(param), '?')}' is a "
                        f"{value.dtype} tensor of shape {tuple(value.shape)}, not {param.dtype} of the weight's "
                        f"{tuple(param.shape)}: not this model's training state")


def _as_random_state(value: Iterable) -> tuple:
    version, internal, gauss = value
    return (version, tuple(internal), gauss)
