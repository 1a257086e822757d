"""Assembling the report: one row per claim, from ``claims/*.toml`` and the newest results.

Results come from one or more results stores (local checks, local runs, cluster jobs). When
several stores hold a record for the same claim, the newest by ``provenance.date`` (an instant,
:mod:`repro.instants`) wins. A
result that cannot say where it came from is refused (:class:`~repro.errors.ResultError`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.checks import DERIVED_OVER_STORED, derived_result
from repro.claims.claim import BASES, Claim
from repro.errors import ResultError
from repro.observed.gate import set_aside
from repro.report.newest import latest
from repro.report.verdict import STATUSES, verdict
from repro.results.provenance import REQUIRED_FIELDS, Provenance
from repro.results.store import Result, ResultStore, disagree

#: Columns of the claims table, in the order every renderer prints them.
#: ``paper`` is the paper's value; a claim that holds the project's own target (``target = true``)
#: leaves it empty and fills ``target`` instead. ``basis`` is the kind of evidence (setting, behaviour,
#: result); ``ci95`` the measurement's 95% interval where the result carries one.
ROW_COLUMNS = (
    "id", "source", "paper", "measured", "unit", "tolerance", "status", "note", "claim scale",
    "run scale", "commit", "config hash", "hardware", "dataset", "bleu signature", "date",
    "basis", "target", "ci95",
)


#: The kinds of evidence of the claims table's rows: the claims observed on a run have each run's section.
ROW_BASES = tuple(b for b in BASES if b != "run")


@dataclass(frozen=True)
class ReportRow:
    """One claim of the paper beside what was measured for it."""

    claim: Claim
    status: str
    note: str = ""
    result: Result | None = None

    @property
    def provenance(self) -> Provenance | None:
        return self.result.provenance if self.result is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON-serialisable), keyed by :data:`ROW_COLUMNS`."""
        c, r, p = self.claim, self.result, self.provenance
        return {
            "id": c.id,
            "source": c.source,
            "paper": None if c.target else c.expected,
            "measured": r.measured if r is not None else None,
            "unit": (r.unit if r is not None and r.unit else None) or c.unit,
            "tolerance": tolerance_text(c),
            "status": self.status,
            "note": self.note,
            "claim scale": c.scale,
            "run scale": p.scale if p else None,
            "commit": p.commit if p else None,
            "config hash": p.config_hash if p else None,
            "hardware": p.hardware if p else None,
            "dataset": p.dataset if p else None,
            "bleu signature": p.bleu_signature if p else None,
            "date": p.date if p else None,
            "basis": c.basis,
            "target": c.expected if c.target else None,
            "ci95": list(r.ci95) if r is not None and r.ci95 is not None else None,
        }


@dataclass
class ReportData:
    """Everything a renderer needs; built in memory before any file is written."""

    rows: list[ReportRow]
    results: dict[str, Result]
    result_dirs: list[Path]
    generated: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    unmatched: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in STATUSES}
        for row in self.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    def counts_by_basis(self) -> dict[str, dict[str, int]]:
        """Per status, how many of its claims are settings, behaviour and results (:data:`ROW_BASES`)."""
        counts = {s.value: {b: 0 for b in ROW_BASES} for s in STATUSES}
        for row in self.rows:
            counts.setdefault(str(row.status), {b: 0 for b in ROW_BASES})[row.claim.basis] += 1
        return counts

    def summary_text(self) -> str:
        """``54 reproduced (20 setting, 34 behaviour, 0 result), 3 deviates (...)``."""
        by_basis = self.counts_by_basis()
        parts = []
        for status, n in self.counts().items():
            if n:
                split = ", ".join(f"{k} {b}" for b, k in by_basis[str(status)].items())
                parts.append(f"{n} {status} ({split})")
        return ", ".join(parts)

    def row(self, claim_id: str) -> ReportRow | None:
        return next((r for r in self.rows if r.claim.id == claim_id), None)


def tolerance_text(claim: Claim) -> str:
    """The claim's acceptance rule in words, e.g. ``±0.5``, ``±25%``, ``rounds to 1e+17``, ``≥ 30``."""
    if claim.bound == "at_least":
        return f"≥ {claim.expected}"
    if claim.bound == "at_most":
        return f"≤ {claim.expected}"
    if claim.rounding is not None:
        return f"rounds to the paper's {claim.rounding:g}"
    parts = []
    if "abs" in claim.tolerance:
        parts.append(f"±{claim.tolerance['abs']:g}")
    if "rel" in claim.tolerance:
        parts.append(f"±{claim.tolerance['rel'] * 100:g}%")
    return " or ".join(parts) if parts else "exact"


def check_provenance(result: Any, source: str = "<result>") -> Result:
    """Refuse a result that cannot say where it came from."""
    if not isinstance(result, Result):
        raise ResultError(f"{source}: not a result record ({type(result).__name__})")
    prov = result.provenance
    if not isinstance(prov, Provenance):
        raise ResultError(f"{source}: result for '{result.claim_id}' has no provenance; the report refuses it")
    missing = [k for k in REQUIRED_FIELDS if not getattr(prov, k, None)]
    if missing:
        raise ResultError(f"{source}: result for '{result.claim_id}': provenance lacks {', '.join(missing)}")
    return result


def load_results(dirs: Sequence[Path], *, skip_invalid: bool = False,
                 expected: dict[str, Any] | None = None) -> dict[str, Result]:
    """The newest result of each claim across ``dirs``; a malformed record (with ``expected``, claim id
    -> paper value: also one naming no claim, or measuring another kind of value than its claim's)
    raises ResultError naming it (with ``skip_invalid`` it is left out: the caller lists them)."""
    newest: dict[str, Result] = {}
    found: dict[str, Path] = {}
    for directory in dirs:
        for claim_id, res in latest(ResultStore(directory, skip_invalid=skip_invalid, expected=expected)).items():
            check_provenance(res, str(directory / claim_id))
            cur = newest.get(claim_id)
            if cur is not None and res.provenance.instant == cur.provenance.instant and disagree(cur, res):
                raise ResultError(f"{claim_id}: two records dated {res.provenance.date} disagree across the results "
                                  f"folders ({cur.measured!r} in {found[claim_id]}, {res.measured!r} in {directory}); "
                                  "remove the wrong one")
            if cur is None or res.provenance.instant >= cur.provenance.instant:
                newest[claim_id] = res
                found[claim_id] = directory
    return newest


def build_rows(claims: Iterable[Claim], results: dict[str, Result]) -> list[ReportRow]:
    """One row per claim of the paper (the claims observed on a run have each run's own section). A
    result that did not come from the paper's job (:mod:`repro.observed.gate`) is shown beside its
    claim with what differs, and the claim reads as if no run had been made; the values derived from
    stored results (relations, costs, step times) read only the results that count."""
    claims = [c for c in claims if c.basis != "run"]
    aside = set_aside(claims, results)
    counted = {k: v for k, v in results.items() if k not in aside}
    rows = []
    for claim in claims:
        if claim.id in aside:
            res = check_provenance(results[claim.id], claim.id)
            rows.append(ReportRow(claim, verdict(claim, None).status, f"not counted for the paper: {aside[claim.id]}",
                                  res))
            continue
        if claim.checker in DERIVED_OVER_STORED:  # a step time is compared only normalised to 8 P100
            res = derived_result(claim, counted)
        else:
            res = counted.get(claim.id) or derived_result(claim, counted)
        if res is not None:
            check_provenance(res, claim.id)
        v = verdict(claim, res)
        rows.append(ReportRow(claim, v.status, v.note, res))
    return rows


def build_report(claims: Sequence[Claim], results: dict[str, Result], result_dirs: Sequence[Path] = ()) -> ReportData:
    """Rows for every claim; results for ids no claim names are listed, not dropped silently."""
    rows = build_rows(claims, results)
    known = {c.id for c in claims}
    return ReportData(
        rows=rows, results=dict(results), result_dirs=[Path(d) for d in result_dirs],
        unmatched=sorted(k for k in results if k not in known),
    )


__all__ = ["ROW_COLUMNS", "ReportData", "ReportRow", "build_report", "check_provenance", "load_results"]
