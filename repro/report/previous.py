"""What the previous report in an output directory wrote, so a new report neither loses nor leaves it.

A report is regenerated on machines that do not hold every run: the parser's run directory, say,
lives on another machine, so its figures cannot be drawn again here. Such a figure, written by the
previous report and still on disk, is kept and shown with a note saying so. A report deletes only
figures the previous report itself listed (``report.json`` ``figures``) and that it no longer
draws; any other file under ``figures/`` (put there by hand, or by another tool) is left alone.
"""

from __future__ import annotations

from pathlib import Path

from repro.files import reader
from repro.errors import ReproError
from repro.report.figures import Figure


def previous_figures(out_dir: Path) -> list[dict]:
    """The figure entries of ``out_dir/report.json`` (name, title, caption, file); none when unreadable."""
    path = Path(out_dir) / "report.json"
    try:
        data = reader.read_json(path, "previous report", allow_nan=True) if path.is_file() else None
    except ReproError:  # unreadable or not strict JSON: no figures are kept from it
        return []
    figures = data.get("figures") if isinstance(data, dict) else None
    if not isinstance(figures, list):
        return []
    return [f for f in figures if isinstance(f, dict) and isinstance(f.get("name"), str) and "/" not in f["name"]]


def kept_figures(out_dir: Path, drawn: set[str]) -> list[Figure]:
    """The previous report's figures that this one could not draw and whose files still exist."""
    kept = []
    for entry in previous_figures(out_dir):
        name = entry["name"]
        path = Path(out_dir) / "figures" / f"{name}.png"
        if name in drawn or not path.is_file():
            continue
        caption = str(entry.get("caption") or "")
        note = "kept from the previous report: its run is not on this machine, so it was not redrawn"
        if note not in caption:
            caption = f"{caption} [{note}]" if caption else f"[{note}]"
        try:
            content = reader.read_bytes(path, "figure of the previous report")
        except ReproError:   # a figure file that is not a regular file is not kept
            continue
        kept.append(Figure(name, str(entry.get("title") or name), caption, content))
    return kept


def prunable(out_dir: Path) -> set[str]:
    """Files (relative to ``out_dir``) the previous report wrote under figures/: the only ones it may delete."""
    return {f"figures/{entry['name']}.png" for entry in previous_figures(out_dir)}
