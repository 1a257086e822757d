"""The run's own record, ``OUT_DIR/run.json``: what a training run did, for ``repro check --run``.

A checkpoint holds the resolved recipe and the model as built; the metrics log holds the rate and the
tokens of the logged updates. What neither says is written here by the training loop (rank 0), at the
end of every session of the run (the first, and each resumed one):

- ``recipe``: the resolved recipe the run trained (training, decoding, targets), as its checkpoints hold it;
- ``steps`` and ``max_steps``: the updates made and the updates the recipe asked for;
- ``parameters``: the trainable parameters of the model as built (shared tensors once);
- ``vocabulary``: the vocabulary the run learned (``vocab.json``): its entries, SHA-256, how words were
  split (Section 5.1: byte-pair encoding; the paper's EN-FR uses word-pieces) and the size asked for;
- ``corpus``: the training corpus as counted: the pairs read, those filtered by length, those trained
  on, and the files (size and SHA-256, from the encoded corpus's manifest);
- ``update_plan``: devices x accumulated passes x tokens per pass (:mod:`repro.train.update_plan`);
- ``sessions``: one entry per session: the step it resumed from and the step it ended at, the training
  config it ran (``train``: a resume may change it, :mod:`repro.observed.history`), the hardware
  (devices, their name, precision), the split of its wall time and its steady-state step time
  (:mod:`repro.train.step_clock`), the commit and the date; ``stopped_by``, the signal, for a session
  stopped before ``max_steps`` by SIGINT or SIGTERM (:mod:`repro.train.stop`).

It is written atomically; a run record that cannot be read is replaced, with a warning, by one that
lists only this session (the run's checkpoints and log still say what they say).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from repro.files import reader
from repro.files.writer import atomic_write_text
from repro.content_hash import file_sha256
from repro.errors import ReproError
from repro.results.provenance import git_commit, hardware_description
from repro.train.config import TrainConfig
from repro.train.data import TrainingData

RUN_RECORD = "run.json"
FORMAT = "repro-run"
VERSION = 1


def _corpus(out_dir: Path, dataset: str, trained: int, filtered: int) -> dict[str, Any]:
    """The corpus as counted: pairs read = pairs trained on + pairs filtered; its files as the encoded
    corpus's manifest records them (by content), when there is one."""
    corpus: dict[str, Any] = {"dataset": dataset, "pairs": trained + filtered, "filtered": filtered,
                              "trained": trained, "files": []}
    manifest = out_dir / "encoded" / "manifest.json"
    if manifest.is_file():
        files = reader.read_json(manifest, "encoded corpus manifest", error=ReproError).get("files") or {}
        corpus["files"] = [{"path": path, **entry} for path, entry in files.items()]
    return corpus


def _vocabulary(out_dir: Path, size: int, asked: int, split: str) -> dict[str, Any] | None:
    path = out_dir / "vocab.json"
    if not path.is_file():
        return None
    return {"file": path.name, "size": size, "sha256": file_sha256(path), "split": split, "asked": asked}


def _previous_sessions(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        sessions = reader.read_json(path, "run record", error=ReproError).get("sessions")
    except (ReproError, AttributeError) as err:
        print(f"repro train: WARNING: {path}: not a readable run record ({err}); writing a new one", file=sys.stderr)
        return []
    return list(sessions) if isinstance(sessions, list) else []


def write_run_record(cfg: TrainConfig, recipe: dict[str, Any], summary: dict[str, Any], data: TrainingData) -> Path:
    """Write (or extend, after a resume) ``OUT_DIR/run.json`` for the session of ``cfg`` that just ended, which
    trained ``recipe`` on ``data`` (module docstring)."""
    out_dir = Path(cfg.out_dir)
    path = out_dir / RUN_RECORD
    session = {
        "resumed_from": summary.get("resumed_from", 0), "ended_at": summary.get("steps"),
        **({"stopped_by": summary["stopped_by"]} if summary.get("stopped_by") else {}),   # repro.train.stop
        "train": recipe.get("train"),
        "hardware": hardware_description(), "device": summary.get("device"),
        "devices": summary.get("world_size", 1), "precision": summary.get("precision"),
        "step_time": summary.get("step_time"), "tokens_per_s": summary.get("tokens_per_s"),
        "commit": git_commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    record = {
        "format": FORMAT, "version": VERSION, "recipe": recipe,
        "steps": summary.get("steps"), "max_steps": recipe.get("train", {}).get("max_steps"),
        "parameters": summary.get("parameters"),
        "vocabulary": _vocabulary(out_dir, data.vocab_size, cfg.vocab_size, cfg.bpe_split),
        "corpus": _corpus(out_dir, cfg.dataset, len(data.examples), data.filtered),
        "update_plan": summary.get("update_plan"),
        "sessions": [*_previous_sessions(path), session],
    }
    atomic_write_text(path, json.dumps(record, indent=2, default=str) + "\n")
    return path
