"""Writing the zoo's side-by-side audit (:mod:`repro.audit.side_by_side`) as Markdown, HTML and JSON.

Rows are claims, columns implementations; a cell shows the category (pass, **departure**,
inconclusive, not applicable, adapter error, paper inconsistent) and a one-line reason. The three files are
written atomically into one folder (``reports/audit/`` by default).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from repro.files.writer import publish_all
from repro.audit.side_by_side import CATEGORY, ZooAudit
from repro.claims.table import format_value

FILES = ("zoo.md", "zoo.html", "zoo.json")
ORDER = ("pass", "departure", "paper inconsistent", "inconclusive", "not applicable", "adapter error", "not run")
MARK = {"pass": "pass", "departure": "**DEPARTURE**", "paper inconsistent": "paper inconsistent",
        "inconclusive": "*inconclusive*", "not applicable": "n/a", "adapter error": "**ADAPTER ERROR**",
        "not run": "not run"}
COLOUR = {"pass": "#d9f2d9", "departure": "#f8c9c4", "paper inconsistent": "#fde9b6", "inconclusive": "#cfe3f5",
          "not applicable": "#eeeeee", "adapter error": "#d9c8f0", "not run": "#ffffff"}


def to_json(zoo: ZooAudit) -> dict[str, Any]:
    return {
        "provenance": zoo.provenance,
        "categories": {o.value: c for o, c in CATEGORY.items()},
        "columns": [
            {"key": c.entry.key, "target": c.entry.target, "name": c.name, "package": c.entry.distribution,
             "version": c.version, "note": c.entry.note, "error": c.error or None, "seconds": round(c.seconds, 1),
             "counts": _counts(c)}
            for c in zoo.columns
        ],
        "claims": [
            {"id": claim.id, "source": claim.source, "statement": claim.statement, "expected": claim.expected,
             "cells": {c.entry.key: vars(c.cells[claim.id]) for c in zoo.columns if claim.id in c.cells}}
            for claim in zoo.claims
        ],
        "not_installed": [{"key": e.key, "target": e.target, "package": e.distribution} for e in zoo.missing],
        "not_installable": zoo.not_installable,
    }


def _counts(column: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for cell in column.cells.values():
        counts[cell.category] = counts.get(cell.category, 0) + 1
    return {k: counts[k] for k in ORDER if k in counts}


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(zoo: ZooAudit) -> str:
    p = zoo.provenance
    lines = [
        "# The audit zoo: Transformer implementations against the paper's claims",
        "",
        f"`repro audit --zoo`, commit {p['commit'] or '-'}, {p['date']}; {p['hardware']}, Python {p['python']}, "
        f"torch {p['torch']}. Scale: {p['scale']}.",
        "",
        "Each cell: **DEPARTURE** (measured, and the implementation departs from the paper; \"absent\": the "
        "implementation has no such part at all), pass, n/a (the adapter does not expose the part), *inconclusive* "
        "(the outputs compared were empty, constant or end-of-sentence only: they could show nothing), "
        "**ADAPTER ERROR** (the adapter or the library broke while measured), paper inconsistent (the paper "
        "contradicts itself there), with a one-line reason. `zoo.json` has the full reasons.",
        "",
        "| implementation | adapter | version | " + " | ".join(ORDER) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in ORDER) + " |",
    ]
    for c in zoo.columns:
        counts = _counts(c)
        name = _md(c.name or c.entry.key)
        detail = f"load error: {_md(c.error)}" if c.error else " | ".join(str(counts.get(k, 0)) for k in ORDER)
        lines.append(f"| {c.entry.key}: {name} | `{c.entry.target}` | {c.entry.distribution} {c.version} | {detail} |")
    lines += ["", "| claim | " + " | ".join(c.entry.key for c in zoo.columns) + " |",
              "| --- | " + " | ".join("---" for _ in zoo.columns) + " |"]
    for claim in zoo.claims:
        cells = []
        for c in zoo.columns:
            cell = c.cells.get(claim.id)
            cells.append("-" if cell is None else f"{MARK[cell.category]}: {_md(cell.reason)}")
        lines.append(f"| `{claim.id}` ({_md(claim.source)}) | " + " | ".join(cells) + " |")
    lines += ["", "## Not in the zoo", ""]
    for e in zoo.missing:
        lines.append(f"- `{e.key}` (`{e.target}`): not installed here (`pip install -e .[zoo]` installs {e.distribution}).")
    for name, reason in zoo.not_installable.items():
        lines.append(f"- {name}: {_md(reason)}")
    return "\n".join(lines) + "\n"


def to_html(zoo: ZooAudit) -> str:
    p = zoo.provenance
    e = html.escape
    head = "".join(
        f"<th title='{e(c.entry.note)}'>{e(c.entry.key)}<br><small>{e(c.entry.distribution)} {e(c.version)}</small></th>"
        for c in zoo.columns
    )
    rows = []
    for claim in zoo.claims:
        cells = []
        for c in zoo.columns:
            cell = c.cells.get(claim.id)
            if cell is None:
                cells.append(f"<td>{e(c.error[:120]) if c.error else '-'}</td>")
                continue
            cells.append(
                f"<td class='{e(cell.category.replace(' ', '-'))}' style='background:{COLOUR[cell.category]}' "
                f"title='{e(cell.why)}'><b>{e(cell.category)}</b><br>{e(cell.reason)}</td>"
            )
        rows.append(f"<tr><th title='{e(claim.statement)}'>{e(claim.id)}<br><small>{e(claim.source)}</small></th>"
                    + "".join(cells) + "</tr>")
    legend = " ".join(f"<span style='background:{COLOUR[k]};padding:2px 6px'>{e(k)}</span>" for k in ORDER)
    absent = "".join(f"<li>{e(n)}: {e(r)}</li>" for n, r in zoo.not_installable.items())
    absent += "".join(f"<li>{e(m.key)}: not installed here</li>" for m in zoo.missing)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>repro audit --zoo</title>
<style>body{{font-family:sans-serif;font-size:13px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #bbb;padding:4px;vertical-align:top;max-width:260px}} th{{text-align:left}}</style></head>
<body><h1>The audit zoo: Transformer implementations against the paper's claims</h1>
<p>commit {e(p['commit'] or '-')}, {e(p['date'])}; {e(p['hardware'])}, Python {e(p['python'])}, torch {e(p['torch'])}.
Scale: {e(p['scale'])}.</p>
<p>{legend} &mdash; a departure is a claim measured and failed; hover a cell for the full reason.</p>
<table><thead><tr><th>claim</th>{head}</tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table>
<h2>Not in the zoo</h2><ul>{absent}</ul>
</body></html>
"""


def write_zoo(zoo: ZooAudit, out_dir: Path | str) -> list[Path]:
    """Write zoo.md, zoo.html and zoo.json into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    texts = (to_markdown(zoo), to_html(zoo), json.dumps(to_json(zoo), indent=2, default=_plain) + "\n")
    return publish_all({out / name: text.encode("utf-8") for name, text in zip(FILES, texts)}, within=out)


def _plain(value: Any) -> Any:
    return format_value(value, 200)
