"""What a checkpoint was trained on: the SHA-256 of its run's vocabulary and of its training data.

Two runs of one model size have checkpoints of one shape; only their lineage tells them apart.
Every training checkpoint carries ``lineage = {"vocab_sha256", "data_sha256", "vocab_file"}``
(None where the run had no such file: the synthetic corpus), and a reader compares it before use:
decoding with another run's vocabulary of the same size (``translate``, ``evaluate``), averaging
checkpoints of different runs (``average``, Section 6.1) and resuming over a replaced vocabulary or
corpus are refused, naming both files.

A checkpoint without a readable lineage (the field removed, or not an object of those three
fields) cannot be told from another run's, so ``translate``, ``evaluate``, ``average`` and a resume
refuse it by name (:func:`require_lineage`) unless the user says ``--allow-no-lineage``; then it is
used with a warning, and what it produced says so (the report of ``evaluate``, the averaged
checkpoint's ``lineage_unchecked``, the resumed run's checkpoints' ``lineage.unchecked_from``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from repro.content_hash import file_sha256, text_sha256
from repro.errors import CheckpointError, ReproError
from repro.files.reader import read_json
from repro.files.text_decoding import warn

KEY = "lineage"
#: The training fields that make a run what it is: checkpoints that differ in one are of different runs
#: (a resume may change the others: steps, where it runs, how often it checkpoints).
RUN_FIELDS = ("seed", "dataset", "train_src", "train_tgt", "vocab_size", "bpe_split", "preset", "model_overrides",
              "lr_scale", "warmup_steps", "label_smoothing", "adam_beta1", "adam_beta2", "adam_eps", "max_len",
              "tokens_per_batch")


def run_lineage(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The lineage of the run in ``out_dir``: its ``vocab.json`` and the sources its ``encoded/``
    corpus was encoded from (by their SHA-256, recorded in the corpus's manifest)."""
    out_dir = Path(out_dir)
    vocab_file = out_dir / "vocab.json"
    vocab = file_sha256(vocab_file) if vocab_file.is_file() else None
    data = None
    try:
        manifest = read_json(out_dir / "encoded" / "manifest.json", "encoded corpus's manifest")
        files = manifest["files"]
        data = text_sha256(json.dumps({"sources": sorted(v["sha256"] for v in files.values()),
                                       "max_len": manifest.get("max_len")}, sort_keys=True))
    except (ReproError, KeyError, TypeError, AttributeError):
        pass
    return {"vocab_sha256": vocab, "data_sha256": data, "vocab_file": str(vocab_file.resolve()) if vocab else None}


#: The fields every lineage holds (each a string, or None where the run had no such file).
FIELDS = ("vocab_sha256", "data_sha256", "vocab_file")
#: The flag that lets a checkpoint without a readable lineage be used.
ALLOW_FLAG = "--allow-no-lineage"


def lineage_of(state: dict[str, Any]) -> dict[str, Any]:
    value = state.get(KEY)
    return value if isinstance(value, dict) else {}


def readable_lineage(state: dict[str, Any]) -> dict[str, Any] | None:
    """The checkpoint's lineage if it holds :data:`FIELDS`, each a string or None; else None."""
    value = state.get(KEY)
    if not isinstance(value, dict) or any(k not in value or not isinstance(value[k], (str, type(None))) for k in FIELDS):
        return None
    return value


def require_lineage(state: dict[str, Any], checkpoint: str | os.PathLike[str], *, allow: bool, doing: str) -> bool:
    """Whether the checkpoint's lineage is readable; without one, CheckpointError naming the file, or
    (``allow``: the user's ``--allow-no-lineage``) a warning and False, for the caller to record."""
    if readable_lineage(state) is not None:
        return True
    value = state.get(KEY, _MISSING)
    why = (f"has no field '{KEY}'" if value is _MISSING else
           f"field '{KEY}' is {type(value).__name__} {str(value)[:60]!r}, not an object of {', '.join(FIELDS)}")
    if not allow:
        raise CheckpointError(f"{checkpoint}: {why}, so the vocabulary and data it was trained on cannot be checked: "
                              f"{doing} refused (another run's checkpoint would be used without a word); pass "
                              f"{ALLOW_FLAG} to use it anyway")
    warn(f"{checkpoint}: {why}; {doing} anyway ({ALLOW_FLAG}): its vocabulary and training data are not checked")
    return False


_MISSING = object()


def check_vocab_file(state: dict[str, Any], checkpoint: str | os.PathLike[str], vocab_file: str | os.PathLike[str]) -> None:
    """Refuse ``vocab_file`` unless it is the vocabulary the checkpoint was trained with (when the
    checkpoint says)."""
    wanted = lineage_of(state).get("vocab_sha256")
    if wanted and file_sha256(vocab_file) != wanted:
        trained = lineage_of(state).get("vocab_file") or "its run's vocab.json"
        raise CheckpointError(f"{vocab_file}: not the vocabulary {checkpoint} was trained with (its SHA-256 differs "
                              f"from the one the checkpoint records, of {trained}); give that run's vocab.json (--vocab)")


def check_resume(state: dict[str, Any], checkpoint: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> None:
    """Refuse to resume from ``checkpoint`` when the run's vocabulary or training data changed since."""
    theirs, mine = lineage_of(state), run_lineage(out_dir)
    if theirs.get("vocab_sha256") and mine["vocab_sha256"] and theirs["vocab_sha256"] != mine["vocab_sha256"]:
        raise CheckpointError(f"{Path(out_dir) / 'vocab.json'}: not the vocabulary {checkpoint} was trained with "
                              "(SHA-256 differs); restore it, or train into another out_dir")
    if theirs.get("data_sha256") and mine["data_sha256"] and theirs["data_sha256"] != mine["data_sha256"]:
        raise CheckpointError(f"{Path(out_dir) / 'encoded' / 'manifest.json'}: the training data changed since "
                              f"{checkpoint} was written (its sources' SHA-256 differ); restore them, or train into "
                              "another out_dir")


def check_same_run(states: list[dict[str, Any]], names: list[str]) -> None:
    """Refuse to average checkpoints of different runs: another vocabulary, other training data, or
    another seed or recipe (:data:`RUN_FIELDS`) than the first's."""
    first, first_name = states[0], names[0]
    for state, name in zip(states[1:], names[1:]):
        for key, what in (("vocab_sha256", "vocabulary"), ("data_sha256", "training data")):
            a, b = lineage_of(first).get(key), lineage_of(state).get(key)
            if a and b and a != b:
                raise CheckpointError(f"{name}: trained with another {what} than {first_name} (SHA-256 differs); "
                                      "average checkpoints of one run")
        mine, theirs = first.get("train_config") or {}, state.get("train_config") or {}
        differ = [k for k in RUN_FIELDS if k in mine and k in theirs and mine[k] != theirs[k]]
        if differ:
            key = differ[0]
            raise CheckpointError(f"{name}: of a run with {key}={theirs[key]!r}, {first_name} of one with "
                                  f"{key}={mine[key]!r}; average checkpoints of one run")
