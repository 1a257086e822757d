"""A run directory's records, read strictly: what ``repro check --run DIR`` checks the paper against.

A run directory (``repro train``'s ``--out-dir``, a ``repro submit`` job's ``out_dir``, the main job's
``runs/local``) holds:

- ``run.json``: the run's own record (:mod:`repro.train.run_record`);
- ``checkpoints/step_*.pt``: the resolved recipe, the model as built and Adam's state (each kept one is read:
  its step, config and shapes; the newest is the run's model);
- ``metrics.csv``: the rate and tokens of every logged update, the dev evaluations;
- ``vocab.json``: the vocabulary the run learned; ``encoded/manifest.json``: the corpus it encoded;
- ``evaluations/<id>.json``: each evaluation taken of the run (:func:`repro.measures.keep_in_run`), with
  the files it scored and the checkpoints it averaged (whose ``average_last*.pt`` is read too).

Every record is read here, before any claim is checked: one that is not what it should be (not JSON,
a field of the wrong type, a row whose ``lr`` is not a number, a checkpoint that does not load) is
refused with a one-line error naming the file, the line or the field (exit 2), never a traceback and
never a verdict on a half-read run. A record that is missing is not an error: the claims that need it
read "needs another run", saying which file is missing.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from repro import numerals
from repro.files import reader
from repro.content_hash import file_sha256
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.errors import CheckpointError, ResultError
from repro.limits import TEXT_BYTES
from repro.measures.recording import EVALUATIONS
from repro.data.encoded import EncodedPairs
from repro.observed.counterpart import PaperJob, counterpart
from repro.observed.interruption import Interruption, interruption
from repro.observed.replay import encoded_corpus
from repro.results.provenance import config_hash
from repro.results.record_schema import record_problem
from repro.results.store import Result
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.config import TrainConfig, recipe_identity
from repro.train.metrics_log import checked_header, whole_rows
from repro.train.run_record import RUN_RECORD
from repro.validation import problem

_COUNT = {"type": "integer", "minimum": 0}
_OBJECT_OR_NULL = {"type": ["object", "null"]}
_SECONDS = {"type": ["number", "null"], "exclusiveMinimum": 0}
#: A session's step time (:mod:`repro.train.step_clock`): what the step-time claims read of it.
_STEP_TIME = {"type": ["object", "null"], "properties": {
    "updates": _COUNT, "steady_updates": _COUNT, "steady_s_per_update": _SECONDS, "total_s": _SECONDS,
    "ci95_s": {"type": "array", "items": _SECONDS}, "quartiles_s": {"type": "array", "items": _SECONDS}}}
RUN_SCHEMA: dict = {
    "type": "object",
    "required": ["format", "version", "recipe", "steps", "sessions"],
    "properties": {
        "format": {"const": "repro-run"},
        "version": {"type": "integer", "const": 1},
        "recipe": {"type": "object", "required": ["train"], "properties": {"train": {"type": "object"},
                                                                            "decode": {"type": "object"},
                                                                            "name": {"type": "string"}}},
        "steps": _COUNT, "max_steps": _COUNT, "parameters": {"type": ["integer", "null"], "minimum": 0},
        "vocabulary": {"type": ["object", "null"], "required": ["size", "sha256"],
                       "properties": {"size": _COUNT, "asked": _COUNT, "sha256": {"type": "string"},
                                      "split": {"type": "string"}, "file": {"type": "string"}}},
        "corpus": {"type": "object", "required": ["pairs", "filtered", "trained"],
                   "properties": {"pairs": _COUNT, "filtered": _COUNT, "trained": _COUNT,
                                  "dataset": {"type": "string"}, "files": {"type": "array"}}},
        "update_plan": _OBJECT_OR_NULL,
        "sessions": {"type": "array", "items": {
            "type": "object", "required": ["resumed_from", "ended_at"],
            "properties": {"resumed_from": _COUNT, "ended_at": _COUNT, "devices": {"type": "integer", "minimum": 1},
                           "hardware": {"type": "string"}, "device": {"type": ["string", "null"]},
                           "train": {"type": "object"}, "stopped_by": {"enum": ["SIGINT", "SIGTERM"]},
                           "step_time": _STEP_TIME}}},
    },
}
_IDENTITY = {"type": "object", "properties": {"file": {"type": "string"}, "path": {"type": "string"},
                                              "lines": _COUNT, "sha256": {"type": "string"},
                                              "content_sha256": {"type": "string"}}}
#: The identities of the checkpoints an average was made from (:func:`repro.train.average.checkpoint_identity`).
_IDENTITIES = {"type": "array", "items": {"type": "object", "required": ["name", "step", "sha256"], "properties": {
    "name": {"type": "string"}, "step": _COUNT, "sha256": {"type": "string"}, "written": {"type": "string"}}}}
#: What a run's evaluation records of how it was taken (``provenance.extra``; each field optional: a
#: record of an older repro lacks them, and the claims that need one read "needs another run").
EVALUATION_EXTRA: dict = {
    "type": "object",
    "properties": {
        "measure": {"type": "string"}, "split": {"type": "string"},
        "decode": {"type": "object"}, "recipe_identity": {"type": "object"},
        "averaged_from": {"type": "array", "items": {"type": "string"}},
        "averaged": _IDENTITIES,
        "checkpoints_averaged": {"type": ["integer", "null"], "minimum": 0},
        "evaluated_checkpoint": {"type": ["string", "null"]},
        "evaluated_sha256": {"type": "string"},
        "replaces": {"type": "string"},
        "test_set": {"type": "object", "properties": {"sentences": {"type": ["integer", "null"], "minimum": 0},
                                                      "source": _IDENTITY, "reference": _IDENTITY,
                                                      "hypotheses": _IDENTITY}},
    },
}
#: The columns of the metrics log a check reads, and whether a row may leave them empty.
_COLUMNS = {"step": False, "lr": False, "src_tokens": False, "tgt_tokens": False, "dev_ppl": True,
            "dev_accuracy": True, "loss": True, "nll": True}


@dataclass(frozen=True)
class LoggedRow:
    """One row of ``metrics.csv`` (``line``: its line in the file, the header being line 1)."""

    line: int
    step: int
    lr: float
    src_tokens: int
    tgt_tokens: int
    dev_ppl: float | None = None
    dev_accuracy: float | None = None
    #: the update's label-smoothed loss and NLL per target token (logs written before they were kept lack them)
    loss: float | None = None
    nll: float | None = None


@dataclass(frozen=True)
class Checkpoint:
    """What a check reads of a checkpoint: no tensors, their shapes."""

    path: Path
    step: int
    model_config: dict[str, Any]
    train_config: dict[str, Any]
    recipe: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]
    optimizer: list[dict[str, Any]]
    lineage: dict[str, Any]
    averaged_from: list[str] | None = None
    #: an averaged checkpoint's record of each checkpoint it was made from (name, step, SHA-256), as it read them
    averaged_checkpoints: tuple[dict[str, Any], ...] = ()
    #: the weights stored as one tensor under several names (tied weights: Section 3.4), each group sorted
    tied: tuple[tuple[str, ...], ...] = ()
    #: the updates Adam's state counts (its per-parameter ``step``), each count once, sorted
    adam_steps: tuple[float, ...] = ()


@dataclass
class RunFiles:
    """The records of one run directory (module docstring); the engine's target for the claims of basis ``run``."""

    path: Path
    record: dict[str, Any] | None = None
    metrics: list[LoggedRow] | None = None
    checkpoints: list[Path] = field(default_factory=list)
    kept: list[Checkpoint] = field(default_factory=list)
    newest: Checkpoint | None = None
    evaluations: dict[str, tuple[Path, Result]] = field(default_factory=dict)
    averaged: dict[str, Checkpoint] = field(default_factory=dict)
    vocab_size: int | None = None
    vocab_sha256: str | None = None
    encoded: dict[str, Any] | None = None
    #: the line of the metrics log's last row when a kill cut it as it was written (left out of ``metrics``)
    cut_row: int | None = None

    @property
    def name(self) -> str:
        return f"the run in {self.path}"

    @property
    def record_path(self) -> Path:
        return self.path / RUN_RECORD

    @property
    def recipe(self) -> dict[str, Any]:
        """The resolved recipe the run trained: its newest checkpoint's, else its record's."""
        if self.newest is not None and self.newest.recipe:
            return self.newest.recipe
        return dict((self.record or {}).get("recipe") or {})

    @property
    def train(self) -> dict[str, Any]:
        return dict(self.recipe.get("train") or (self.newest.train_config if self.newest else {}))

    @property
    def paper(self) -> PaperJob | None:
        return counterpart(self.recipe.get("name"))

    @property
    def recipe_hash(self) -> str:
        """The hash of the run's recipe identity: what a result of it records as ``config_hash``."""
        return config_hash(recipe_identity(self.train, dict(self.recipe.get("decode") or {})))

    @cached_property
    def encoded_pairs(self) -> tuple[EncodedPairs | None, str]:
        """The run's encoded corpus, its arrays checked against its manifest; or None and why not."""
        return encoded_corpus(self.path / "encoded")

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.csv"

    @cached_property
    def interrupted(self) -> Interruption | None:
        """Where the run's records stop when its last session was interrupted (:mod:`repro.observed.interruption`)."""
        return interruption(self)

    def check_recipe(self) -> None:
        """The recipe the run trained, and the one its record states, must be ones repro can build
        (ConfigError naming where it was read, exit 2): a value no recipe takes is bad input, not a
        departure from the paper."""
        if self.train:
            where = (f"{self.newest.path}: field 'recipe'" if self.newest is not None and self.newest.recipe
                     else f"{self.record_path}: field 'recipe'")
            TrainConfig.from_dict(self.train, source=f"{where}.train")
            if self.recipe.get("decode") is not None:
                DecodeSettings.from_dict(self.recipe["decode"], source=f"{where}.decode")
        stated = dict((self.record or {}).get("recipe") or {})   # the record's, where the checkpoint's was read above
        if stated.get("train"):
            TrainConfig.from_dict(stated["train"], source=f"{self.record_path}: field 'recipe'.train")
        if stated.get("decode") is not None:
            DecodeSettings.from_dict(stated["decode"], source=f"{self.record_path}: field 'recipe'.decode")
        for i, session in enumerate((self.record or {}).get("sessions") or []):   # what each part of the run ran
            if session.get("train"):
                TrainConfig.from_dict(session["train"], source=f"{self.record_path}: field 'sessions[{i}].train'")
        for ckpt in self.kept[:-1]:
            if ckpt.train_config:
                TrainConfig.from_dict(ckpt.train_config, source=f"{ckpt.path}: field 'train_config'")

    @classmethod
    def load(cls, path: str | Path) -> "RunFiles":
        """Read every record of the run in ``path`` (module docstring); ResultError (exit 2) when it is
        not a directory, or when a record is malformed."""
        path = Path(path)
        if not path.is_dir():
            raise ResultError(f"{path}: not a run directory (repro check --run takes the folder a training run wrote: "
                              "its checkpoints/, metrics.csv, run.json)")
        files = cls(path)
        if reader.present(files.record_path, "run record", error=ResultError):
            files.record = _read_json(files.record_path, "run record", RUN_SCHEMA)
        if reader.present(files.metrics_path, "metrics log", error=ResultError):
            files.metrics, files.cut_row = read_log_rows(files.metrics_path)
        files.checkpoints = list_checkpoints(path)
        files.kept = [read_checkpoint(p) for p in files.checkpoints]   # each refused here when it does not load
        files.newest = files.kept[-1] if files.kept else None
        vocab = path / "vocab.json"
        if reader.present(vocab, "vocabulary", error=ResultError):
            files.vocab_size, files.vocab_sha256 = len(SharedVocab.load(vocab)), file_sha256(vocab)
        manifest = path / "encoded" / "manifest.json"
        if reader.present(manifest, "encoded corpus manifest", error=ResultError):
            files.encoded = _read_json(manifest, "encoded corpus manifest", {"type": "object"})
        evaluations = path / EVALUATIONS
        if reader.folder_present(evaluations, "evaluations folder", error=ResultError):
            for record_path in sorted(evaluations.glob("*.json")):
                files.evaluations[record_path.stem] = (record_path, read_evaluation(record_path))
        for _, result in files.evaluations.values():
            name = result.provenance.extra.get("evaluated_checkpoint")
            if isinstance(name, str) and name not in files.averaged and name.startswith("average_") \
                    and reader.present(path / name, "averaged checkpoint", error=ResultError):
                files.averaged[name] = read_checkpoint(path / name)
        files.check_recipe()
        if files.record is None and files.newest is None and files.metrics is not None:
            raise ResultError(f"{path}: a training run interrupted before its first checkpoint ({files.metrics_path.name} "
                              f"logs {len(files.metrics or [])} update(s); no checkpoints/step_*.pt, no {RUN_RECORD}): "
                              f"nothing of it can be checked; rerun its repro train with --out-dir {path}")
        if files.record is None and files.newest is None:
            inside = sorted(p.name for p in path.iterdir() if (p / RUN_RECORD).is_file() or (p / "checkpoints").is_dir())
            hint = f"; it holds the runs {', '.join(inside)}: check each (repro check --run {path / inside[0]})" \
                if inside else ""
            raise ResultError(f"{path}: holds neither a run record ({RUN_RECORD}) nor a checkpoint "
                              f"(checkpoints/step_*.pt): not the folder of a training run{hint}")
        return files


def _read_json(path: Path, what: str, schema: dict) -> dict[str, Any]:
    data = reader.read_json(path, what, error=ResultError)
    why = problem(data, schema)
    if why is not None:
        raise ResultError(f"{path}: {why}")
    return data


def read_evaluation(path: Path) -> Result:
    """One evaluation record of a run (``evaluations/<id>.json``): a result record whose id is its name."""
    data = reader.read_json(path, "evaluation record", error=ResultError, allow_nan=True)
    why = record_problem(data)
    if why is None and data["claim_id"] != path.stem:
        why = f"field 'claim_id': '{data['claim_id']}', but the file is named for '{path.stem}'"
    measured = data.get("measured") if isinstance(data, dict) else None
    if why is None and (isinstance(measured, bool) or not isinstance(measured, (int, float, type(None)))):
        why = f"field 'measured' must be the number the evaluation measured (got {measured!r})"
    if why is None and (extra := problem(data["provenance"].get("extra") or {}, EVALUATION_EXTRA)) is not None:
        why = extra.replace("field '", "field 'provenance.extra.", 1)
    if why is not None:
        raise ResultError(f"{path}: {why}")
    return Result.from_dict(data, source=str(path))


def read_log(path: Path) -> list[LoggedRow]:
    """The whole rows of a metrics log (:func:`read_log_rows`)."""
    return read_log_rows(path)[0]


def read_log_rows(path: Path) -> tuple[list[LoggedRow], int | None]:
    """The rows of a metrics log, and the line of its last row when that row was cut as it was written
    (no line end: a kill, :mod:`repro.observed.interruption`), left out. A whole row whose step, rate or
    token counts are not numbers is refused, naming the file, the line and the field. A NaN rate is read
    as NaN (a check fails on it)."""
    text = reader.read_text(path, "metrics log", limit=TEXT_BYTES.hard, error=ResultError)
    text, cut = whole_rows(text)
    try:
        table = csv.DictReader(io.StringIO(text, newline=""))
        header = checked_header(table.fieldnames, path)
        missing = [c for c, optional in _COLUMNS.items() if not optional and c not in header]
        if missing:
            raise ResultError(f"{path}: the metrics log lacks the column(s) {', '.join(missing)} "
                              f"(columns: {', '.join(header) or 'none'})")
        rows = []
        for line, row in enumerate(table, start=2):
            value = {c: _number(path, line, c, row.get(c), optional) for c, optional in _COLUMNS.items()}
            whole = {c: _integer(path, line, c, value[c]) for c in ("step", "src_tokens", "tgt_tokens")}
            rows.append(LoggedRow(line, whole["step"], value["lr"], whole["src_tokens"], whole["tgt_tokens"],
                                  value["dev_ppl"], value["dev_accuracy"], value["loss"], value["nll"]))
    except csv.Error as err:
        raise ResultError(f"{path}: not a CSV file ({err})") from None
    return rows, cut


def _number(path: Path, line: int, column: str, raw: str | None, optional: bool) -> float | None:
    if raw is None or raw.strip() == "":
        if optional:
            return None
        raise ResultError(f"{path}:{line}: field '{column}' is empty")
    value = numerals.real(raw)   # float() would take 1_0, other scripts' digits and 1e400 (as infinity)
    if value is None:
        raise ResultError(f"{path}:{line}: field '{column}' is not a number ({raw!r}); a number is written in "
                          "ASCII digits")
    return value


def _integer(path: Path, line: int, column: str, value: float | None) -> int:
    if value is None or not math.isfinite(value) or value != int(value) or math.copysign(1.0, value) < 0:
        raise ResultError(f"{path}:{line}: field '{column}' must be a non-negative whole number (got {value!r})")
    return int(value)


def read_checkpoint(path: Path) -> Checkpoint:
    """What a check reads of one checkpoint; a checkpoint that does not load, or lacks the model's
    configuration, is refused naming the file (CheckpointError, exit 2)."""
    state = load_checkpoint(path)
    fields = {"train_config": dict, "recipe": dict, "lineage": dict, "model_config": dict}
    for key, kind in fields.items():
        if key in state and not isinstance(state[key], kind):
            raise CheckpointError(f"{path}: field '{key}' must be an object, got {type(state[key]).__name__}")
    groups = (state.get("optimizer") or {}).get("param_groups") if isinstance(state.get("optimizer"), dict) else None
    step = state.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: field 'step' must be a non-negative whole number, got {step!r}")
    averaged = state.get("averaged_from")
    if averaged is not None and (not isinstance(averaged, list) or not all(isinstance(a, str) for a in averaged)):
        raise CheckpointError(f"{path}: field 'averaged_from' must be a list of checkpoint names, got {averaged!r}")
    identities = state.get("averaged_checkpoints") or []
    if not isinstance(identities, (list, tuple)) or problem(list(identities), _IDENTITIES) is not None:
        raise CheckpointError(f"{path}: field 'averaged_checkpoints' must be a list of checkpoint identities (name, "
                              f"step, sha256), got {identities!r}"[:300])
    return Checkpoint(path, step, state["model_config"], dict(state.get("train_config") or {}),
                      dict(state.get("recipe") or {}),
                      {k: tuple(v.shape) for k, v in state["model"].items() if hasattr(v, "shape")},
                      [{k: v for k, v in g.items() if k != "params"} for g in groups or [] if isinstance(g, dict)],
                      dict(state.get("lineage") or {}), averaged, tuple(identities), _tied(state["model"]),
                      _adam_steps(state.get("optimizer")))


def _adam_steps(optimizer: Any) -> tuple[float, ...]:
    """The distinct update counts of an optimizer state's parameters (Adam's ``step``, a tensor or a number)."""
    state = optimizer.get("state") if isinstance(optimizer, dict) else None
    found = {float(v["step"]) for v in (state or {}).values() if isinstance(v, dict) and "step" in v}
    return tuple(sorted(found))


def _tied(weights: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The names under which one tensor is stored (torch.save keeps a tensor shared by several modules once)."""
    groups: dict[tuple[int, int, tuple[int, ...]], list[str]] = {}
    for name, tensor in weights.items():
        if hasattr(tensor, "untyped_storage"):
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
            groups.setdefault(key, []).append(name)
    return tuple(tuple(sorted(names)) for names in groups.values() if len(names) > 1)


def missing(what: str, path: Path) -> str:
    """The reason a claim reads "needs another run" for want of a record."""
    return f"needs another run: {path} not found ({what})"


__all__ = ["Checkpoint", "LoggedRow", "RunFiles", "missing", "read_checkpoint", "read_evaluation",
           "read_log", "read_log_rows"]
