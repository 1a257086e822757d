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


def render(records: Sequence[CheckRecord]) -> str:
    """A fixed-width table: id, source, paper, measured, status."""
    header = ("id", "source", "paper", "measured", "status")
    rows = [
        (r.claim.id, r.claim.source, format_value(r.claim.expected), format_value(r.measured), r.status.value)
        for r in records
    ]
    widths = [min(max(len(str(row[i])) for row in [header, *rows]), 40) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(str(cell)[: widths[i]].ljust(widths[i]) for i, cell in enumerate(row)).rstrip()

    summary = ", ".join(f"{n} {status}" for status, n in sorted(count(records).items()))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), "", summary])
