"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``.

A checkpoint is a dict of tensors and plain Python values with a ``format`` marker, so that
a file written by anything else is refused by name. Training checkpoints live at
``OUT_DIR/checkpoints/step_{step:08d}.pt`` and hold everything an exact resume needs: the
model, Adam's moments, the step (the schedule of Eq. 3 is a function of it), the torch and
Python RNG states, the data position of the batcher, and the run's lineage (the SHA-256 of its
vocabulary and training data, :mod:`repro.train.lineage`). Weights that are NaN or infinite are
refused where a checkpoint is loaded, and so is an optimizer state that is (Adam's moments holding
NaN would make the next update NaN however finite the weights are). A checkpoint is read by the one
reader (:func:`repro.files.reader.load_torch`: a regular file, no pickle) and refused before it is
read when it is larger than the memory this machine has free; it is written by the one writer, in
its run's folder (``within``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import torch

from repro.errors import CheckpointError, ConfigError
from repro.files.reader import folder_present, inspect, load_torch
from repro.files.writer import atomic_open, remove
from repro.files.strict_json import nesting_depth
from repro.limits import NESTING
from repro.machine_memory import too_large
from repro.model.transformer_config import TransformerConfig
from repro.validation import problem

FORMAT = "repro-checkpoint"
VERSION = 1
_STEP_FILE = re.compile(r"^step_([0-9]{8})\.pt$")   # ASCII digits: \d takes other scripts' too


def checkpoint_path(out_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(out_dir) / "checkpoints" / f"step_{step:08d}.pt"


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any], *,
                    within: str | os.PathLike[str] | None = None) -> Path:
    """Write ``state`` to ``path`` so that a reader (or a crash) sees the old file or the whole new one;
    ``within``: the run's folder the file belongs to (default: the file's own folder)."""
    path = Path(path)
    state = {"format": FORMAT, "version": VERSION, **state}
    with atomic_open(path, "wb", within=within) as fh:
        sink = _Sink(fh)
        try:
            torch.save(state, sink)
        except RuntimeError:
            if sink.error is not None:   # a full disk: the writer names it and removes the partial file
                raise sink.error from None
            raise
    return path


class _Sink:
    """The file ``torch.save`` writes to, keeping the OSError a write raised (a full disk, a quota):
    torch's zip writer, failing to close its archive after it, raises a RuntimeError of its own
    ("unexpected pos 64 vs 0") in its place, which named neither the file nor the fault."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh, self.error = fh, None

    def write(self, data: bytes) -> int:
        try:
            return self._fh.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self._fh.flush()


def _tensors(value: Any, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    """(where, tensor) for every tensor in ``value`` (nested dicts and lists), without recursion."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, torch.Tensor):
            yield at, item
        elif isinstance(item, dict):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))


def _non_finite(value: Any, where: str) -> tuple[str, str] | None:
    """(where, "NaN"/"infinite") of the first floating tensor in ``value`` holding a value that is not
    finite, or None."""
    for at, item in _tensors(value, where):
        if item.is_floating_point() and not bool(torch.isfinite(item).all()):
            return at, "NaN" if bool(torch.isnan(item).any()) else "infinite"
    return None


def _not_plain(value: Any, where: str, *, weights: bool = False) -> tuple[str, str] | None:
    """(where, what is wrong) of the first tensor in ``value`` that is not of the kind repro writes: a
    dense tensor of real numbers that holds its data (not sparse, not on the ``meta`` device, not
    complex); with ``weights``, one of floating point (a weight of integers or booleans would be cast
    into the model without a word). Neither the NaN check nor the model can read such a file."""
    for at, t in _tensors(value, where):
        dtype = str(t.dtype).removeprefix("torch.")
        if t.layout != torch.strided:
            return at, f"a {str(t.layout).removeprefix('torch.')} tensor, not a dense one"
        if t.device.type == "meta":
            return at, "a meta tensor (a shape without data)"
        if t.is_complex():
            return at, f"of dtype {dtype}, not of real numbers"
        if weights and not t.is_floating_point():
            return at, f"of dtype {dtype}, not floating point"
    return None


def _beyond_its_data(value: Any, where: str) -> tuple[str, tuple[int, ...]] | None:
    """(where, shape) of the first tensor in ``value`` that declares more elements than its storage
    holds (a stride-0 view of a few bytes as 10^12 elements): reading it whole, as the NaN check
    does, would ask for memory the file never held."""
    return next(((at, tuple(t.shape)) for at, t in _tensors(value, where)
                 if t.layout == torch.strided and t.numel() * t.element_size() > t.untyped_storage().nbytes()), None)


#: What a checkpoint holds besides its tensors, by type: each part's owner checks its fields (the model's
#: configuration :class:`~repro.model.TransformerConfig`, the recipe's decoding settings, the lineage).
METADATA_SCHEMA: dict = {
    "type": "object",
    "required": ["model", "model_config"],
    "properties": {
        "step": {"type": "integer", "minimum": 0},
        "model": {"type": "object"},
        "model_config": {"type": "object"},
        "train_config": {"type": "object"},
        "recipe": {"type": "object", "properties": {"name": {"type": "string"}, "decode": {"type": ["object", "null"]}}},
        "optimizer": {"type": "object"},
        "rng": {"type": "object"},
        "data": {"type": "object"},
        "averaged_from": {"type": "array", "items": {"type": "string"}},
        "averaged_checkpoints": {"type": "array", "items": {"type": "object"}},
        "lineage_unchecked": {"type": "array", "items": {"type": "string"}},
    },
}


def _check_metadata(state: dict[str, Any], path: Path) -> None:
    """Refuse a checkpoint whose parts are not of their types, nested past the bound, or whose
    weights are not tensors named by text (a crafted file), naming the file and the part."""
    plain = {k: v for k, v in state.items() if k not in ("model", "optimizer", "rng")}
    if nesting_depth(plain) > NESTING.hard:
        raise CheckpointError(f"{path}: its metadata nest deeper than {NESTING.hard} levels ({NESTING.why})")
    why = problem({**plain, **{k: state[k] for k in ("model", "optimizer", "rng") if k in state}}, METADATA_SCHEMA,
                  nan_allowed_in=("model", "optimizer", "rng"))
    if why is not None:
        raise CheckpointError(f"{path}: checkpoint {why}")
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state["model"].items()):
        raise CheckpointError(f"{path}: the model weights are not a dict of tensors named by text")
    try:   # every reader takes the model's shape from here: one that builds no model is no checkpoint's
        TransformerConfig.from_dict(state["model_config"])
    except (ConfigError, TypeError) as err:
        raise CheckpointError(f"{path}: checkpoint field 'model_config': {err}") from None


def load_checkpoint(path: str | os.PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`; anything else raises CheckpointError naming the file."""
    path = Path(path)
    size = inspect(path, "checkpoint file", error=CheckpointError).st_size
    if (why := too_large(2 * size, f"{path}: the checkpoint")) is not None:   # the file read, then its tensors
        raise CheckpointError(why)
    try:
        state = load_torch(path, "checkpoint", map_location=map_location, error=CheckpointError)
    except (CheckpointError, MemoryError):
        raise
    except Exception as err:  # torch raises many types here (UnpicklingError, RuntimeError, KeyError, EOFError...)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated, corrupt or not a torch file: {first[:200]})"
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("format"), str) or state["format"] != FORMAT:
        raise CheckpointError(f"{path}: foreign checkpoint (not written by repro: no '{FORMAT}' marker)")
    if not isinstance(state.get("version"), int) or state["version"] != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {str(state.get('version'))[:40]!r}, this repro reads {VERSION}")
    if "model" not in state or "model_config" not in state:
        raise CheckpointError(f"{path}: checkpoint lacks the model weights or the model configuration")
    _check_metadata(state, path)
    odd = _not_plain(state["model"], "model", weights=True) or _not_plain(state.get("optimizer"), "optimizer") \
        or _not_plain(state.get("rng"), "rng")
    if odd is not None:
        raise CheckpointError(f"{path}: '{odd[0]}' is {odd[1]} (repro writes none such: a crafted or corrupt file)")
    crafted = _beyond_its_data(state["model"], "model") or _beyond_its_data(state.get("optimizer"), "optimizer")
    if crafted is not None:
        raise CheckpointError(f"{path}: {crafted[0]} declares shape {crafted[1]}, more elements than the file holds "
                              "for it (a crafted file; repro writes every tensor whole)")
    for name, value in state["model"].items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            kind = "NaN" if bool(torch.isnan(value).any()) else "infinite"
            raise CheckpointError(f"{path}: weight '{name}' holds {kind} values (a diverged or corrupt run); "
                                  "use an earlier checkpoint")
    found = _non_finite(state.get("optimizer"), "optimizer")
    if found is not None:
        raise CheckpointError(f"{path}: the optimizer state '{found[0]}' holds {found[1]} values (a diverged or "
                              "corrupt run: the next update would make every weight NaN); use an earlier checkpoint")
    return state


def list_checkpoints(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Training checkpoints under ``out_dir/checkpoints``, oldest step first."""
    folder = Path(out_dir) / "checkpoints"
    if not folder_present(folder, "checkpoint folder", error=CheckpointError):
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _STEP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def step_of(path: str | os.PathLike[str]) -> int:
    match = _STEP_FILE.match(Path(path).name)
    if not match:
        raise CheckpointError(f"{path}: not named like a training checkpoint (step_NNNNNNNN.pt)")
    return int(match.group(1))


def prune_checkpoints(out_dir: str | os.PathLike[str], keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` training checkpoints; returns the deleted paths."""
    paths = list_checkpoints(out_dir)
    doomed = paths[:-keep] if keep > 0 else []
    for path in doomed:
        remove(path, within=out_dir)
    return doomed
