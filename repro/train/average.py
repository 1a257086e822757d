"""Section 6.1: a model obtained by averaging the last checkpoints (5 for base, 20 for big).

Each floating-point parameter and buffer of the averaged model is the arithmetic mean of the
same tensor over the checkpoints; the checkpoints must share one model configuration and come from
one run (one vocabulary, one training data, one seed: :mod:`repro.train.lineage`). The averaged file
names the checkpoints it was made from (``averaged_from``) and keeps each one's identity as it was
read (``averaged_checkpoints``: :func:`checkpoint_identity`), which every evaluation of it records.
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from repro.content_hash import file_sha256
from repro.errors import CheckpointError
from repro.train.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint, save_checkpoint
from repro.train.lineage import FIELDS as LINEAGE_FIELDS, KEY as LINEAGE, check_same_run, lineage_of, require_lineage


def average_state_dicts(states: list[dict[str, torch.Tensor]], names: list[str]) -> dict[str, torch.Tensor]:
    """Mean of each floating-point tensor (accumulated in float64); other tensors must agree."""
    first, first_name = states[0], names[0]
    total = {k: v.double() if v.is_floating_point() else v for k, v in first.items()}
    for state, name in zip(states[1:], names[1:]):
        if state.keys() != first.keys():
            diff = sorted(set(state) ^ set(first))[:3]
            raise CheckpointError(f"{name}: parameters differ from {first_name} ({', '.join(diff)} ...)")
        for key, value in state.items():
            if value.shape != first[key].shape:
                raise CheckpointError(
                    f"{name}: parameter '{key}' has shape {tuple(value.shape)}, {first_name} has {tuple(first[key].shape)}"
                )
            if value.is_floating_point():
                total[key] = total[key] + value.double()
            elif not torch.equal(value, first[key]):
                raise CheckpointError(f"{name}: non-float tensor '{key}' differs from {first_name}")
    return {k: (v / len(states)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in total.items()}


def checkpoint_identity(path: str | os.PathLike[str], state: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint file is, for the record of an evaluation made of it: its name, the update it
    holds (``state``: the checkpoint as loaded), the SHA-256 of its bytes and when it was written (the
    file's modification time, UTC)."""
    written = _dt.datetime.fromtimestamp(os.stat(path).st_mtime, _dt.timezone.utc).isoformat(timespec="seconds")
    return {"name": Path(path).name, "step": state.get("step", 0), "sha256": file_sha256(path), "written": written}


def averaged_identities(state: dict[str, Any], path: str | os.PathLike[str]) -> tuple[dict[str, Any], ...]:
    """The identities of the checkpoints a model to evaluate (``state``, loaded from ``path``) was made
    from: an averaged file's ``averaged_checkpoints``; a training checkpoint's own (it is its only one);
    none for an averaged file written before averages kept them."""
    if "averaged_checkpoints" in state:
        return tuple(state["averaged_checkpoints"])
    return () if "averaged_from" in state else (checkpoint_identity(path, state),)


def average_checkpoints(paths: list[str | os.PathLike[str]], device: str | torch.device = "cpu", *,
                        allow_no_lineage: bool = False) -> dict[str, Any]:
    """A checkpoint (model weights and configs only) holding the average of ``paths``, computed on
    ``device`` and returned on the CPU. A checkpoint without a readable lineage is refused unless
    ``allow_no_lineage``; then the average has no lineage either and lists them in ``lineage_unchecked``."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    for i, path in enumerate(paths):   # one file twice (by any name) would weigh it twice in the mean
        twin = next((q for q in paths[:i] if os.path.samefile(q, path)), None)
        if twin is not None:
            raise CheckpointError(f"{path}: the same checkpoint as {twin}, given twice; each is averaged once")
    states = [load_checkpoint(p) for p in paths]
    names = [str(p) for p in paths]
    unchecked = [name for state, name in zip(states, names)
                 if not require_lineage(state, name, allow=allow_no_lineage, doing="averaging it")]
    for state, name in zip(states[1:], names[1:]):
        if state["model_config"] != states[0]["model_config"]:
            raise CheckpointError(f"{name}: model configuration differs from {names[0]}")
    check_same_run(states, names)
    on_device = [{k: v.to(device) for k, v in s["model"].items()} for s in states]
    averaged = {k: v.cpu() for k, v in average_state_dicts(on_device, names).items()}
    return {
        "model": averaged,
        "model_config": states[0]["model_config"],
        "train_config": states[-1].get("train_config", {}),
        **({"recipe": states[-1]["recipe"]} if "recipe" in states[-1] else {}),
        "step": states[-1].get("step", 0),
        "averaged_from": [str(Path(p).name) for p in paths],
        "averaged_checkpoints": [checkpoint_identity(p, state) for p, state in zip(paths, states)],
        **({"lineage_unchecked": unchecked} if unchecked else {LINEAGE: lineage_of(states[-1])}),
    }


def write_average(paths: list[str | os.PathLike[str]], output: str | os.PathLike[str],
                  device: str | torch.device = "cpu", *, allow_no_lineage: bool = False) -> Path:
    """Average the checkpoints ``paths`` (on ``device``) into the checkpoint file ``output``."""
    return save_checkpoint(Path(output), average_checkpoints(paths, device, allow_no_lineage=allow_no_lineage))


def average_last(out_dir: str | os.PathLike[str], k: int, output: str | os.PathLike[str] | None = None,
                 device: str | torch.device = "cpu", *, allow_no_lineage: bool = False) -> Path:
    """Average the newest ``k`` checkpoints of a run into ``output`` (default OUT_DIR/average_last{k}.pt)."""
    paths = list_checkpoints(out_dir)
    if not paths:
        raise CheckpointError(f"{Path(out_dir) / 'checkpoints'}: no training checkpoints to average")
    if len(paths) < k:
        raise CheckpointError(f"{Path(out_dir) / 'checkpoints'}: asked to average the last {k} checkpoints, found {len(paths)}")
    output = Path(output) if output else Path(out_dir) / f"average_last{k}.pt"
    return write_average(paths[-k:], output, device, allow_no_lineage=allow_no_lineage)


def average_of_run(states: Sequence[dict[str, torch.Tensor]], k: int, model_config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """What ``repro average --last k`` makes of a run whose checkpoints hold ``states`` (oldest
    first, one every 10 updates): the run is written to a temporary directory and averaged there
    by :func:`average_last`, the evaluation's own path (for the audit of Section 6.1)."""
    with tempfile.TemporaryDirectory(prefix="repro-average-") as tmp:
        for i, state in enumerate(states, start=1):   # a run of no vocabulary or data file: a lineage of None
            save_checkpoint(checkpoint_path(tmp, 10 * i), {"model": state, "model_config": model_config, "step": 10 * i,
                                                           LINEAGE: dict.fromkeys(LINEAGE_FIELDS)})
        return load_checkpoint(average_last(tmp, k))["model"]
