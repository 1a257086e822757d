"""Plain-text rendering of check records for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repro.claims.runner import CheckRecord, count


def format_value(value: Any, width: int = 28) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={format_value(v, width)}" for k, v in value.items())
    elif isinstance(value, list):
        text = "[" + ", ".join(format_value(v, width) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(records: Sequence[CheckRecord]) -> list[str]:
    header = ("id", "source", "basis", "paper", "measured", "status")
    rows = [
        (r.claim.id, r.claim.source, r.claim.basis, format_value(r.claim.expected), format_value(r.measured),
         r.status.value)
        for r in records
    ]
    widths = [min(max(len(str(row[i])) for row in [header, *rows]), 40) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(str(cell)[: widths[i]].ljust(widths[i]) for i, cell in enumerate(row)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]


def render(records: Sequence[CheckRecord]) -> str:
    """Fixed-width tables: id, source, basis, paper, measured, status. The claims of basis
    ``paper arithmetic`` (computed on the paper's own numbers, no code measured) come apart, after
    the others, so that they are never read as measurements of an implementation."""
    measured = [r for r in records if r.claim.basis != "paper arithmetic"]
    arithmetic = [r for r in records if r.claim.basis == "paper arithmetic"]
    summary = ", ".join(f"{n} {status}" for status, n in sorted(count(measured).items()))
    lines = _table(measured) + ["", summary] if measured else []
    if arithmetic:
        lines += ["", "Paper arithmetic (the paper's own numbers recomputed; no code of the implementation measured):",
                  *_table(arithmetic), "",
                  ", ".join(f"{n} {status}" for status, n in sorted(count(arithmetic).items()))]
    return "\n".join(lines)


def render_run(records: Sequence[CheckRecord]) -> str:
    """A run check (``repro check --run``): id, paper, this run, verdict; then why, for each claim that
    did not pass; then how many of each verdict. A "not run" of a run's claim reads "needs another run"."""
    def said(r: CheckRecord) -> str:
        return "needs another run" if r.status.value == "not run" else r.status.value

    header = ("id", "paper", "this run", "verdict")
    rows = [(r.claim.id, format_value(r.claim.expected), format_value(r.measured), said(r)) for r in records]
    widths = [min(max(len(str(row[i])) for row in [header, *rows]), 40) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(str(cell)[: widths[i]].ljust(widths[i]) for i, cell in enumerate(row)).rstrip()

    lines = [line(header), line(["-" * w for w in widths]), *map(line, rows), ""]
    for r in records:
        if r.status.value != "pass" and r.detail:
            detail = r.detail.removeprefix("needs another run: ")
            lines.append(f"{r.claim.id} ({said(r)}): {detail}")
    counts: dict[str, int] = {}
    for r in records:
        counts[said(r)] = counts.get(said(r), 0) + 1
    return "\n".join([*lines, "", ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))])
