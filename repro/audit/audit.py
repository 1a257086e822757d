"""An audit: every local claim that measures the implementation, run against one adapter.

Claims about the paper's own arithmetic and claims that read stored runs are left out (their
checkers declare ``audits=False``, or need a cluster). Each record says *why* it has its
status: measured against expected for a pass or a fail, the part the implementation does not
have for a fail "absent", the missing adapter method for "not applicable", what the outputs
compared lacked for "inconclusive", the method that raised (or returned a wrongly shaped
value) for an error.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.audit.adapter import Adapter
from repro.audit.contract import CheckedAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Claim, Outcome
from repro.claims.runner import ABSENT, CheckRecord, count, run_claim
from repro.claims.table import format_value


def auditable_claims(claims_dir: Path | str | None = None, only: Sequence[str] = ()) -> list[Claim]:
    """The local claims whose checker measures the implementation under audit."""
    return select_claims("local", only, claims_dir, auditing=True)


def tolerance_text(claim: Claim) -> str:
    """How the claim compares: ' (tolerance abs 1e-05)', ' (at least)', ... or ''."""
    if claim.bound == "at_least":
        return " (at least)"
    if claim.bound == "at_most":
        return " (at most)"
    if claim.rounding is not None:
        return f" (rounded to {claim.rounding:g})"
    parts = [f"{k} {v:g}" for k, v in claim.tolerance.items()]
    return f" (tolerance {', '.join(parts)})" if parts else ""


def why(record: CheckRecord) -> str:
    """One sentence on the record's status, for the table and the test report."""
    claim = record.claim
    if ABSENT in record.extra:
        return f"absent: {record.extra[ABSENT]} (the paper: {format_value(claim.expected, 60)})"
    if record.status.measured:
        unit = record.unit or claim.unit
        text = f"{unit}: " if unit else ""
        text += f"measured {format_value(record.measured, 60)} vs paper {format_value(claim.expected, 60)}{tolerance_text(claim)}"
        if record.detail:
            text += f"; {record.detail}"
        if record.status == Outcome.INCONSISTENT:
            text += f". The paper disagrees with itself here: {claim.inconsistency}"
        return text
    return record.detail or record.status


@dataclass
class AuditRecord:
    """A claim's record in an audit, with its reason."""

    check: CheckRecord
    target: str

    @property
    def claim(self) -> Claim:
        return self.check.claim

    @property
    def status(self) -> Outcome:
        return self.check.status

    @property
    def why(self) -> str:
        return why(self.check)

    def to_dict(self) -> dict[str, Any]:
        return {**self.check.to_dict(), "why": self.why, "target": self.target}


def audit_claim(claim: Claim, adapter: Adapter, seed: int = 0) -> AuditRecord:
    """One claim against ``adapter``, its return values checked against the protocol."""
    return AuditRecord(run_claim(claim, CHECKERS[claim.checker], CheckedAdapter(adapter), {}, seed), adapter.name)


def run_audit(
    adapter: Adapter,
    claims: Iterable[Claim] | None = None,
    seed: int = 0,
    on_record: Callable[[AuditRecord], None] | None = None,
) -> list[AuditRecord]:
    """Every auditable claim (default: :func:`auditable_claims`) against ``adapter``; one claim's
    error never stops the others."""
    records = []
    for claim in auditable_claims() if claims is None else claims:
        record = audit_claim(claim, adapter, seed)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def broken(records: Sequence[AuditRecord]) -> list[AuditRecord]:
    """The applicable claims the implementation fails, on which it errs, or that were inconclusive."""
    return [r for r in records if r.status.broken]


def summary(records: Sequence[AuditRecord]) -> str:
    counts = count(r.check for r in records)
    order = (Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.INCONCLUSIVE, Outcome.INCONSISTENT,
             Outcome.NOT_APPLICABLE, Outcome.NOT_RUN)
    return ", ".join(f"{counts[s.value]} {s.value}" for s in order if s.value in counts)


def render_audit(records: Sequence[AuditRecord], why_width: int = 72) -> str:
    """A fixed-width table: claim id, source, status, why (wrapped to ``why_width``)."""
    header = ("claim", "source", "status", "why")
    rows = [(r.claim.id, r.claim.source, r.status.value, r.why) for r in records]
    widths = [min(max(len(row[i]) for row in [header, *rows]), limit) for i, limit in enumerate((34, 24, 18))]
    indent = sum(widths) + 2 * len(widths)

    def cell(text: str, width: int) -> str:
        return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)

    def line(cells: Sequence[str]) -> str:
        fixed = "  ".join(cell(c, w) for c, w in zip(cells, widths))
        wrapped = textwrap.wrap(cells[-1], why_width) or [""]
        return "\n".join([f"{fixed}  {wrapped[0]}".rstrip(), *(" " * indent + w for w in wrapped[1:])])

    target = records[0].target if records else ""
    lines = [line(header), line(["-" * w for w in widths] + ["-" * 3]), *map(line, rows), ""]
    lines.append(f"{target}: {summary(records)}")
    return "\n".join(lines)
