"""The rows of Table 3 measured at a named scale, read from the results store.

Each job of Table 3 at a scale stores one record per seed and metric,
``<results>/table3-<scale>.<ppl|bleu>.<row>/seed-<S>-<signature>.json``
(:mod:`repro.cluster.job_evaluation`), with the seed, the row, the scale's signature and the model's
parameter count in ``extra`` and the seed's bootstrap interval in ``ci95``. A row's metric is the
mean over its seeds with :func:`repro.eval.seeds.over_seeds`'s interval (Student's t over the seeds
combined with the seeds' bootstraps). Only records of one signature (the same base recipe and
``--set`` changes: seeds of one experiment) are combined: per scale, the signature of the newest
record; records of other signatures are left out and named in ``notes``. Two records of one seed
with one date that disagree are refused naming both (no date says which counts), and so is a record
of a row Table 3 does not have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from repro.files import reader
from repro.errors import ResultError
from repro.eval.seeds import SeedSummary, over_seeds
from repro.model import TABLE3_ROWS
from repro.results.record_schema import SCALED_TABLE3, record_problem
from repro.results.store import Result, disagree

#: Table 3's two measured columns, as the result ids name them.
METRICS = ("ppl", "bleu")


def parse_id(claim_id: str) -> tuple[str, str, str] | None:
    """``table3-small.bleu.A-h1`` -> ``("small", "bleu", "A-h1")``; None for any other id."""
    match = SCALED_TABLE3.match(claim_id)
    if match is None or match["row"] not in TABLE3_ROWS:
        return None
    return match["scale"], match["metric"], match["row"]


def is_scaled_id(claim_id: str) -> bool:
    return parse_id(claim_id) is not None


@dataclass(frozen=True)
class Measured:
    """One metric of one row: its seeds' values, each seed's bootstrap half width, and their summary."""

    summary: SeedSummary
    half_widths: dict[int, float]
    unit: str | None = None

    @property
    def mean(self) -> float:
        return self.summary.mean

    @property
    def ci95(self) -> tuple[float, float]:
        return self.summary.ci95

    @property
    def seeds(self) -> list[int]:
        return sorted(self.summary.values)


@dataclass
class ScaledRow:
    row: str
    metrics: dict[str, Measured] = field(default_factory=dict)
    parameters: int | None = None


@dataclass
class ScaledTable:
    """Table 3 at one scale: the rows measured so far (in the paper's order) and where they came from."""

    scale: str
    signature: str
    rows: dict[str, ScaledRow]
    scale_texts: list[str]          # the provenance scale of every record (the same apart from row and seed)
    hardware: list[str]
    commits: list[str]
    notes: list[str] = field(default_factory=list)

    def measured(self, metric: str, row: str) -> Measured | None:
        entry = self.rows.get(row)
        return entry.metrics.get(metric) if entry is not None else None


def _records(result_dirs: Iterable[Path], skipped: list[str], skip_invalid: bool) -> list[tuple[Path, Result]]:
    """Every per-seed record of a scaled row under ``result_dirs``, validated as the results store validates
    a record (:mod:`repro.results.record_schema`) and for its seed, signature and row; a malformed one raises naming
    its file (with ``skip_invalid`` it is left out and named in ``skipped``)."""
    found = []
    for root in result_dirs:
        root = Path(root)
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and SCALED_TABLE3.match(p.name)):
            for path in sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")):
                try:
                    if not is_scaled_id(folder.name):
                        raise ResultError(f"{path}: a record of Table 3 row '{SCALED_TABLE3.match(folder.name)['row']}', "
                                          f"which Table 3 does not have (rows: {', '.join(TABLE3_ROWS)})")
                    found.append((path, _read(path, folder.name)))
                except ResultError as err:
                    if not skip_invalid:
                        raise
                    skipped.append(f"{err} (left out)")
    return found


def _read(path: Path, folder: str) -> Result:
    data = reader.read_json(path, "result record", error=ResultError, allow_nan=True)
    why = record_problem(data, folder)
    if why is not None:
        raise ResultError(f"{path}: {why}")
    result = Result.from_dict(data, source=str(path))
    for key in ("seed", "signature", "row"):
        if key not in result.extra:
            raise ResultError(f"{path}: a record of Table 3 at a scale lacks extra.{key}")
    if result.extra["row"] != parse_id(result.claim_id)[2]:
        raise ResultError(f"{path}: a record of row {result.extra['row']} filed under {folder}")
    _value(path, result)
    return result


def _value(path: Path, result: Result) -> float:
    value = result.measured
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ResultError(f"{path}: measured must be a number, got {value!r}")
    return float(value)


def collect(result_dirs: Iterable[Path], *, skip_invalid: bool = False) -> dict[str, ScaledTable]:
    """Table 3 at every scale that has records under ``result_dirs``, by scale name (``skip_invalid``:
    a malformed record is left out and named in its scale's notes instead of refused)."""
    by_scale: dict[str, list[tuple[Path, Result]]] = {}
    skipped: list[str] = []
    for path, result in _records(result_dirs, skipped, skip_invalid):
        by_scale.setdefault(parse_id(result.claim_id)[0], []).append((path, result))
    tables = {}
    for scale, records in sorted(by_scale.items()):
        newest = max(records, key=lambda pr: pr[1].provenance.instant)[1]
        signature = str(newest.extra["signature"])
        kept = [(p, r) for p, r in records if str(r.extra["signature"]) == signature]
        others = sorted({str(r.extra["signature"]) for _, r in records} - {signature})
        notes = [f"scale {scale}: {len(records) - len(kept)} record(s) of other signature(s) "
                 f"({', '.join(others)}: another base recipe or other --set changes) left out"] if others else []
        tables[scale] = _table(scale, signature, kept, notes + skipped)
    return tables


def _table(scale: str, signature: str, records: list[tuple[Path, Result]], notes: list[str]) -> ScaledTable:
    every: dict[tuple[str, str, int], list[tuple[Path, Result]]] = {}
    for path, result in records:
        _, metric, row = parse_id(result.claim_id)
        seed = result.extra["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ResultError(f"{path}: extra.seed must be an integer, got {seed!r}")
        every.setdefault((metric, row, seed), []).append((path, result))
    grouped: dict[tuple[str, str], dict[int, tuple[Path, Result]]] = {}
    for (metric, row, seed), found in every.items():
        date = max(r.provenance.instant for _, r in found)
        tied = [(p, r) for p, r in found if r.provenance.instant == date]   # two records of one seed: the newer counts
        for path, result in tied[1:]:
            if disagree(tied[0][1], result):
                raise ResultError(f"{tied[0][0]} and {path}: two records of {metric} of row {row}, seed {seed}, dated "
                                  f"{date}, disagree ({tied[0][1].measured!r} vs {result.measured!r}); remove the "
                                  "wrong one")
        grouped.setdefault((metric, row), {})[seed] = tied[-1]
    rows: dict[str, ScaledRow] = {}
    for row in TABLE3_ROWS:
        for metric in METRICS:
            seeds = grouped.get((metric, row))
            if not seeds:
                continue
            values = {s: _value(p, r) for s, (p, r) in sorted(seeds.items())}
            widths = {s: (r.ci95[1] - r.ci95[0]) / 2 for s, (_, r) in seeds.items() if r.ci95 is not None}
            complete = len(widths) == len(values)
            if not complete and widths:
                notes.append(f"scale {scale}: {metric} of row {row}: {len(values) - len(widths)} seed(s) without a "
                             "bootstrap interval; the row's interval counts the seeds only")
            summary = _summary(values, [widths[s] for s in values] if complete else [])
            entry = rows.setdefault(row, ScaledRow(row))
            entry.metrics[metric] = Measured(summary, widths, next(iter(seeds.values()))[1].unit)
            params = {r.extra.get("parameters") for _, r in seeds.values()} - {None}
            if len(params) > 1:
                raise ResultError(f"scale {scale}, row {row}: its seeds record different parameter counts "
                                  f"({', '.join(map(str, sorted(params)))})")
            if params:
                entry.parameters = int(params.pop())
    results = [r for _, r in records]
    return ScaledTable(scale, signature, rows, sorted({r.provenance.scale for r in results}),
                       sorted({r.provenance.hardware for r in results}),
                       sorted({r.provenance.commit for r in results}), notes)


def _summary(values: dict[int, float], half_widths: list[float]) -> SeedSummary:
    """:func:`over_seeds`, or a summary that is not a number when a seed's value is not (a diverged run)."""
    if any(not math.isfinite(v) for v in values.values()):
        nan = float("nan")
        return SeedSummary(dict(values), nan, nan, nan, nan)
    return over_seeds(values, half_widths)
