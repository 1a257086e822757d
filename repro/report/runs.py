"""Training runs behind the results: their metrics log (``metrics.csv``) and configuration.

A run directory is found from a result (``provenance.extra["run_dir"]`` or
``result.extra["run_dir"]``) or given on the command line (``repro report --runs DIR``).
What a run lacks is recorded as a note, so the report says what is missing instead of
drawing an empty picture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.files import reader
from repro.errors import ResultError
from repro.results.provenance import Provenance
from repro.results.store import Result
from repro.train.checkpoint import load_checkpoint
from repro.train.config import TrainConfig
from repro.train.metrics_log import read_numbers


@dataclass
class Run:
    """One training run's directory and what the report can draw from it."""

    path: Path
    provenance: Provenance | None = None
    claim_ids: list[str] = field(default_factory=list)
    metrics: pd.DataFrame | None = None
    train_config: dict[str, Any] = field(default_factory=dict)
    model_config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.train_config.get("preset") or self.path.name

    def newest_checkpoint(self) -> Path | None:
        found = sorted((self.path / "checkpoints").glob("step_*.pt"))
        return found[-1] if found else None


def read_metrics(path: Path) -> pd.DataFrame:
    """``metrics.csv`` as a DataFrame sorted by step; a file without ``step``, or a value that is not a
    finite number, raises ResultError naming it (and the line and column)."""
    df = read_numbers(path)
    if "step" not in df.columns:
        raise ResultError(f"{path}: metrics log has no 'step' column (columns: {', '.join(map(str, df.columns))})")
    return df.dropna(subset=["step"]).sort_values("step").reset_index(drop=True)


def _config_from_checkpoint(run: Run) -> None:
    ckpt = run.newest_checkpoint()
    if ckpt is None:
        return
    state = load_checkpoint(ckpt)
    run.train_config = _checked_train_config(state.get("train_config") or {}, f"{ckpt}: field 'train_config'")
    run.model_config = dict(state["model_config"])   # one that builds no model was refused by load_checkpoint


def _checked_train_config(config: Any, source: str) -> dict[str, Any]:
    """``config`` if it is a training config repro can build (the figures read its warmup, scale and
    model); else ConfigError naming ``source`` and the field (exit 2)."""
    if config:
        TrainConfig.from_dict(config, source=source)
    return dict(config)


def load_run(path: Path, provenance: Provenance | None = None, claim_ids: list[str] | None = None) -> Run:
    """Read what exists under ``path``; notes say what does not."""
    run = Run(Path(path), provenance, list(claim_ids or []))
    if not run.path.is_dir():
        named = f", named by {', '.join(run.claim_ids)}" if run.claim_ids else ""
        run.notes.append(f"run directory {run.path} not found{named}: the run is not on this machine, so its "
                         "figures were not drawn here")
        return run
    metrics = run.path / "metrics.csv"
    if reader.present(metrics, "metrics log", error=ResultError):
        run.metrics = read_metrics(metrics)
    else:
        run.notes.append(f"{metrics} missing: no training curves for this run")
    config = run.path / "config.json"
    if reader.present(config, "training config", error=ResultError):
        run.train_config = _checked_train_config(reader.read_json(config, "training config", error=ResultError),
                                                 str(config))
    else:
        _config_from_checkpoint(run)
    if not run.train_config:
        run.notes.append(f"{run.path}: no config.json or checkpoint; Eq. 3 cannot be drawn for this run")
    return run


def run_dir_of(result: Result) -> str | None:
    return result.provenance.extra.get("run_dir") or result.extra.get("run_dir")


def find_runs(results: dict[str, Result], extra_dirs: list[Path], base: Path | None = None) -> list[Run]:
    """Runs named by results (relative paths resolve against ``base``) and those given explicitly."""
    named: dict[Path, tuple[Provenance, list[str]]] = {}
    for claim_id, res in sorted(results.items()):
        where = run_dir_of(res)
        if not where:
            continue
        path = Path(where)
        if not path.is_absolute() and base is not None and not path.exists() and (base / path).exists():
            path = base / path  # otherwise the note names the path the result records, not a guess
        prov, ids = named.setdefault(path if not path.exists() else path.resolve(), (res.provenance, []))
        ids.append(claim_id)
    runs = [load_run(p, prov, ids) for p, (prov, ids) in named.items()]
    for path in extra_dirs:
        if Path(path).resolve() not in named:
            runs.append(load_run(Path(path)))
    return runs
