"""A directory of result records, safe for many concurrent writers.

Layout: ``ROOT/<claim id>/<timestamp>-<random>.json``, one record per file. Each record is
written atomically (:mod:`repro.files.writer`), so a reader never sees half a record and concurrent
writers (SLURM array tasks) never overwrite each other. A writer that owns a record (the local main job) names it instead,
``ROOT/<claim id>/<name>.json`` (e.g. ``reproduce-local.json``), and replaces it in place on every
run, so a regenerated store changes files rather than deleting and adding them.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.files import reader
from repro.files.writer import atomic_write_text
from repro.errors import ResultError
from repro.results.provenance import Provenance
from repro.results.record_schema import record_problem, unit_problem

#: Where results go and are read from by default (``repro check``, ``report``, ``submit``, ``reproduce``).
DEFAULT_RESULTS = Path("reports/local/results")


@dataclass(frozen=True)
class Result:
    """One measurement of one claim.

    ``measured`` is a number, a string, or a mapping for structured results (e.g. the
    fitted exponents of Table 1). ``status`` is the checker's verdict when it made one
    (``pass``/``fail``), else ``None`` and the reporter compares against the claim.
    ``ci95`` is the measurement's 95% interval ``(low, high)`` where one was estimated (a BLEU
    or F1 bootstrap, a step time's spread, the spread over seeds); the report needs it before it
    calls a metric "reproduced" (:mod:`repro.report.verdict`).
    """

    claim_id: str
    measured: Any
    provenance: Provenance
    unit: str | None = None
    status: str | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    ci95: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.ci95 is not None:
            object.__setattr__(self, "ci95", parse_interval(self.ci95, f"result for '{self.claim_id}'"))

    def to_dict(self) -> dict[str, Any]:
        data = {
            "claim_id": self.claim_id,
            "measured": self.measured,
            "unit": self.unit,
            "status": self.status,
            "detail": self.detail,
            "provenance": self.provenance.to_dict(),
            "extra": self.extra,
        }
        if self.ci95 is not None:
            data["ci95"] = list(self.ci95)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<record>") -> "Result":
        for key in ("claim_id", "measured", "provenance"):
            if key not in data:
                raise ResultError(f"{source}: result record lacks field '{key}'")
        if not isinstance(data["provenance"], dict):
            raise ResultError(f"{source}: field 'provenance' must be an object")
        try:
            prov = Provenance.from_dict(data["provenance"])
        except (TypeError, ValueError) as err:
            raise ResultError(f"{source}: field 'provenance': {err}") from None
        return cls(
            claim_id=str(data["claim_id"]),
            measured=data["measured"],
            provenance=prov,
            unit=data.get("unit"),
            status=data.get("status"),
            detail=data.get("detail") or "",
            extra=dict(data.get("extra") or {}),
            ci95=parse_interval(data["ci95"], f"{source}: field 'ci95'") if data.get("ci95") is not None else None,
        )


def parse_interval(value: Any, where: str) -> tuple[float, float]:
    """``[low, high]`` as a pair of floats with low <= high; anything else raises ResultError naming ``where``."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ResultError(f"{where}: ci95 must be [low, high], two numbers (got {value!r})")
    low, high = float(value[0]), float(value[1])
    if not low <= high:
        raise ResultError(f"{where}: ci95 must be [low, high] with low <= high (got {value!r})")
    return (low, high)


class ResultStore:
    """Result records under one root directory.

    Every record read is validated (:mod:`repro.results.record_schema`); with ``expected`` (claim id ->
    the paper's value, e.g. ``{c.id: c.expected for c in claims}``) also against its claim. A file
    that is not ``<claim id>/<name>.json`` is a stray and named, never passed over (the hidden
    temporary files of writes in progress, :mod:`repro.files.writer`, excepted)."""

    def __init__(self, root: str | os.PathLike[str], *, skip_invalid: bool = False,
                 expected: Mapping[str, Any] | None = None) -> None:
        self.root = Path(root)
        #: With ``skip_invalid``, a malformed record is left out and listed in ``skipped`` (path, why)
        #: for the caller to report; without it (the default) it raises ResultError naming its file.
        self.skip_invalid = skip_invalid
        self.expected = expected
        self.skipped: list[tuple[Path, str]] = []

    def write(self, result: Result, name: str | None = None) -> Path:
        """Store ``result`` under a fresh timestamped name, or as ``<name>.json`` (replaced in place)."""
        if not isinstance(result.provenance, Provenance):
            raise ResultError(f"result for {result.claim_id} has no provenance; refusing to store it")
        if name is None:
            name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
        elif not name or "/" in name or name.startswith("."):
            raise ResultError(f"result record name {name!r} must be a plain file name")
        why = unit_problem(result.to_dict())
        if why is not None:
            raise ResultError(f"result for {result.claim_id}: {why}; refusing to store it")
        path = self.root / result.claim_id / f"{name}.json"
        atomic_write_text(path, json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str) + "\n",
                          within=self.root)
        return path

    def read_all(self) -> list[Result]:
        """Every record under the root; a malformed one raises an error naming its file."""
        return [result for _, result in self.read_records()]

    def read_records(self) -> list[tuple[Path, Result]]:
        """Every record under the root with its file; a malformed one raises an error naming its file."""
        if not self.root.exists():
            raise ResultError(f"{self.root}: results directory does not exist")
        if not self.root.is_dir():
            raise ResultError(f"{self.root}: results directory is not a directory")
        results = []
        self.skipped = []
        for path in sorted(p for p in self.root.rglob("*")
                           if p.is_symlink() or not p.is_dir() or len(p.relative_to(self.root).parts) > 1):
            try:
                if path.is_symlink() and path.is_dir():   # rglob does not descend into it: its records would go unread
                    raise ResultError(f"{path}: a symbolic link to a folder ({os.path.realpath(path)}); a results "
                                      "folder holds its claims' folders itself (copy the records in, or give that "
                                      "folder as another --results)")
                if path.is_dir():   # a folder in a claim's folder (even one named like a record): never read
                    raise ResultError(f"{path}: a folder inside a claim's folder, not a result record (a results "
                                      "folder holds <claim id>/<name>.json files only)")
                if not _in_progress(path):
                    results.append((path, self._read(path)))
            except ResultError as err:
                if not self.skip_invalid:
                    raise
                self.skipped.append((path, str(err)))
        return results

    def _read(self, path: Path) -> Result:
        relative = path.relative_to(self.root)
        if len(relative.parts) != 2 or path.suffix != ".json":
            raise ResultError(f"{path}: not a result record (a results folder holds <claim id>/<name>.json files "
                              "only)")
        data = reader.read_json(path, "result record", error=ResultError, allow_nan=True)
        why = record_problem(data, relative.parts[0], self.expected)
        if why is not None:
            raise ResultError(f"{path}: {why}")
        return Result.from_dict(data, source=str(path))


def disagree(a: Result, b: Result) -> bool:
    """Whether two records of one claim, at one scale and seed, say different things (NaN equals NaN:
    both diverged). Records of different seeds or scales are different measurements, not a conflict."""
    def same(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            return True
        return x == y
    if a.provenance.scale != b.provenance.scale or a.extra.get("seed") != b.extra.get("seed"):
        return False
    return not same(a.measured, b.measured) or a.status != b.status


def _in_progress(path: Path) -> bool:
    """A hidden temporary file of an atomic write of a record (``.<name>.json.<writer>.tmp``,
    :mod:`repro.files.writer`): a write in progress, or a killed one the next writer removes."""
    return path.name.startswith(".") and path.name.endswith(".tmp") and ".json." in path.name
