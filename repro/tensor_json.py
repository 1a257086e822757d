"""What a spawned rank hands back to the process that spawned it, as JSON: tensors as nested lists
with their dtype (fp32 and fp64 values exact), never pickled objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from repro.errors import ConfigError
from repro.files.reader import read_text
from repro.files.writer import atomic_write_text


def plain(value: Any) -> Any:
    """``value`` with every tensor as ``{"tensor": values, "dtype": name}``."""
    if isinstance(value, torch.Tensor):
        return {"tensor": value.detach().cpu().tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def tensors(value: Any) -> Any:
    """The inverse of :func:`plain`."""
    if isinstance(value, dict) and set(value) == {"tensor", "dtype"}:
        return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
    if isinstance(value, dict):
        return {k: tensors(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tensors(v) for v in value]
    return value


def write(path: str | Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(plain(value)))


def read(path: str | Path) -> Any:
    """What :func:`write` wrote (large: a rank's gradients, as lists; no nesting or size bound beyond
    the text limit, as it is repro's own file of its own run)."""
    return tensors(json.loads(read_text(path, "a rank's tensors", error=ConfigError)))
