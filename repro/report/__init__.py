"""The reproduction report: claims beside measured results, as Markdown, HTML, JSON and CSV.

:func:`generate` is what ``repro report`` runs: read claims and results, build every table and
figure in memory, then write ``report.md``, ``report.html``, ``report.json``, ``report.csv`` and
``figures/*.png`` all or nothing (:mod:`repro.report.publish`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from repro.files import reader
from repro.checks import select_claims
from repro.claims.loader import known_values
from repro.errors import ResultError
from repro.report import render_html, render_json, render_md
from repro.report.build import ReportData, build_report, load_results
from repro.report.document import CURVE_POINT_FIELDS, PARSING_CURVE_FILE, Document, make_document
from repro.report.figures import FIGURE3_SENTENCE
from repro.report.previous import kept_figures, prunable
from repro.report.publish import publish
from repro.report.runs import find_runs

OUTPUTS = ("report.md", "report.html", "report.json", "report.csv")


def render_files(doc: Document) -> dict[str, bytes]:
    """Every output file of the report, rendered in memory."""
    files = {
        "report.md": render_md.render(doc).encode("utf-8"),
        "report.html": render_html.render(doc).encode("utf-8"),
        "report.json": render_json.render(doc).encode("utf-8"),
        "report.csv": render_json.render_csv(doc).encode("utf-8"),
    }
    files.update({f"figures/{f.name}.png": f.png for f in doc.figures.figures})
    return files


def _parsing_curve(result_dirs: Sequence[Path]) -> dict | None:
    """The local parser's learning curve kept beside a results folder (``reports/local/parsing_curve.json``)."""
    for d in result_dirs:
        path = d.parent / PARSING_CURVE_FILE
        if path.is_file():
            curve = reader.read_json(path, "learning curve", error=ResultError, allow_nan=True)
            points = curve.get("points") if isinstance(curve, dict) else None
            if not isinstance(points, list):
                raise ResultError(f"{path}: no list 'points'")
            for i, point in enumerate(points):
                missing = [k for k in CURVE_POINT_FIELDS if not isinstance(point, dict) or k not in point]
                if missing:
                    raise ResultError(f"{path}: points[{i}] lacks field '{missing[0]}'")
            return curve
    return None


def generate(
    result_dirs: Sequence[Path],
    out_dir: Path,
    *,
    claims_dir: Path | None = None,
    run_dirs: Sequence[Path] = (),
    attention_sentence: str | None = None,
    skip_invalid: bool = False,
) -> Document:
    """Build the report from ``result_dirs`` and write it to ``out_dir``; returns the document.
    A malformed record raises ResultError naming it; ``skip_invalid`` leaves such records out
    (the caller, ``repro report --skip-invalid``, lists every one)."""
    claims = select_claims(claims_dir=claims_dir)
    results = load_results([Path(d) for d in result_dirs], skip_invalid=skip_invalid, expected=known_values(claims_dir))
    data = build_report(claims, results, result_dirs)
    base = Path(result_dirs[0]).parent if result_dirs else None
    runs = find_runs(results, [Path(r) for r in run_dirs], base)
    curve = _parsing_curve([Path(d) for d in result_dirs])
    doc = make_document(data, claims, runs, attention_sentence, curve, skip_invalid=skip_invalid)
    # A figure of a run not on this machine stays, shown with a note; only the previous report's own
    # figures are ever deleted (repro.report.previous).
    owned = prunable(Path(out_dir))
    doc.figures.figures.extend(kept_figures(Path(out_dir), {f.name for f in doc.figures.figures}))
    publish(Path(out_dir), render_files(doc), owned=owned)
    return doc


__all__ = ["FIGURE3_SENTENCE", "OUTPUTS", "Document", "ReportData", "build_report", "generate", "load_results", "make_document",
           "render_files"]
