"""``report.md``: the report as Markdown that renders on a code host (tables via pandas/tabulate).

Cell text is escaped: ``|`` would end a cell, and ``<``/``>`` would let a value inject HTML.
"""

from __future__ import annotations

import pandas as pd

from repro.report.document import Document, inputs_line
from repro.report.values import cell


def escape(text: object) -> str:
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def anchor(title: str) -> str:
    """The anchor a code host gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_(nothing to show)_"
    safe = frame.astype(object).map(cell).map(escape)
    safe.columns = [escape(c) for c in frame.columns]
    return safe.to_markdown(index=False)


def render(doc: Document, figure_dir: str = "figures") -> str:
    counts = doc.data.summary_text()
    out = [
        '# Reproduction report: "Attention Is All You Need"',
        "",
        f"_{escape(inputs_line(doc.data))}. Written by `repro report`; do not edit by hand._",
        "",
        f"**Summary:** {escape(counts)}.",
        "",
        "| status | meaning |",
        "| --- | --- |",
        *(f"| {escape(s)} | {escape(m)} |" for s, m in doc.legend.items()),
        "",
    ]
    titles = [s.title for s in doc.sections] + ["Figures"] + (["Missing or not drawn"] if doc.notes else [])
    out += ["**Contents:** " + " · ".join(f"[{escape(t)}](#{anchor(t)})" for t in titles), ""]
    for section in doc.sections:
        out += [f"## {escape(section.title)}", ""]
        if section.note:
            out += [escape(section.note), ""]
        out += [table(section.table), ""]
    out += ["## Figures", ""]
    for fig in doc.figures.figures:
        out += [f"### {escape(fig.title)}", "", f"![{escape(fig.title)}]({figure_dir}/{fig.name}.png)", "",
                f"_{escape(fig.caption)}_", ""]
    if not doc.figures.figures:
        out += ["_(no figure could be drawn; see below)_", ""]
    if doc.notes:
        out += ["## Missing or not drawn", "", *(f"- {escape(n)}" for n in doc.notes), ""]
    return "\n".join(out)
