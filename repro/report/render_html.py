"""``report.html``: one self-contained page (inline CSS, figures as base64 PNG, no script).

Readable at any width: a table of contents, one collapsible ``<details>`` per section (the
provenance table and the attention maps start folded), every table inside its own scrolling
box so the page itself is never wider than the window, numbers formatted (no ``None``).

Every value from claims and results passes through :func:`html.escape`, so a value such as
``<script>`` is shown, never run.
"""

from __future__ import annotations

import base64
from html import escape

import pandas as pd

from repro.report.document import Document, inputs_line
from repro.report.values import cell

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222;
       overflow-wrap: anywhere; }
h1 { font-size: 1.6em; } h2 { display: inline; font-size: 1.3em; }
details.section { margin-top: 1.6em; border-bottom: 1px solid #ccc; padding-bottom: 0.4em; }
summary { cursor: pointer; } nav.toc { margin: 1em 0; } nav.toc li { margin: 0.1em 0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; max-width: 32em;
         overflow-wrap: anywhere; }
th { background: #f3f3f3; position: sticky; top: 0; }
.note { color: #555; max-width: 70em; }
.status { white-space: nowrap; font-weight: 600; }
.s-reproduced { background: #d6f5d6; } .s-within-tolerance { background: #eaf7d0; }
.s-deviates { background: #f9d2d2; } .s-paper-inconsistent { background: #f8e3c4; }
.s-needs-cluster { background: #dde7f7; } .s-not-run { background: #eee; }
.s-error { background: #f5b5b5; } .s-not-applicable { background: #eee; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 12px; }
"""


def _cls(status: str) -> str:
    return "status s-" + "".join(ch if ch.isalnum() else "-" for ch in status)


def slug(title: str) -> str:
    return "s-" + "".join(ch if ch.isalnum() else "-" for ch in title.lower()).strip("-")


def table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "<p class='note'>(nothing to show)</p>"
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        cells = []
        for column, value in row.items():
            text = escape(cell(value))
            cells.append(f"<td class='{_cls(str(value))}'>{text}</td>" if column == "status" else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


#: Sections that start folded: long, and read only when a row needs checking.
FOLDED = ("Provenance of each measured claim", "Measurements without a claim")


def section(title: str, body: str, *, folded: bool = False) -> str:
    return (f"<details class='section' id='{slug(title)}'{'' if folded else ' open'}><summary><h2>{escape(title)}</h2>"
            f"</summary>{body}</details>")


def figure(fig) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (f"<figure><img alt='{escape(fig.title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption><strong>{escape(fig.title)}</strong><br>{escape(fig.caption)}</figcaption></figure>")


def render(doc: Document) -> str:
    counts = doc.data.summary_text()
    legend = "".join(f"<tr><td class='{_cls(s)}'>{escape(s)}</td><td>{escape(m)}</td></tr>" for s, m in doc.legend.items())
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>Reproduction report: Attention Is All You Need</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Reproduction report: “Attention Is All You Need”</h1>",
        f"<p class='note'>{escape(inputs_line(doc.data))}. Written by <code>repro report</code>; do not edit by hand.</p>",
        f"<p id='summary'><strong>Summary:</strong> {escape(counts)}.</p>",
        f"<div class='scroll'><table><thead><tr><th>status</th><th>meaning</th></tr></thead><tbody>{legend}</tbody>"
        "</table></div>",
    ]
    titles = [x.title for x in doc.sections] + ["Figures", "Attention maps"] + (["Missing or not drawn"] if doc.notes else [])
    parts.append("<nav class='toc'><strong>Contents</strong><ul>"
                 + "".join(f"<li><a href='#{slug(t)}'>{escape(t)}</a></li>" for t in titles) + "</ul></nav>")
    for sec in doc.sections:
        body = (f"<p class='note'>{escape(sec.note)}</p>" if sec.note else "") + table(sec.table)
        parts.append(section(sec.title, body, folded=sec.title in FOLDED))
    attention = [f for f in doc.figures.figures if f.name.startswith("attention")]
    others = [f for f in doc.figures.figures if not f.name.startswith("attention")]
    parts.append(section("Figures", "".join(figure(f) for f in others)
                         or "<p class='note'>(no figure could be drawn; see below)</p>"))
    parts.append(section("Attention maps", "".join(figure(f) for f in attention)
                         or "<p class='note'>(no attention map was drawn)</p>", folded=True))
    if doc.notes:
        parts.append(section("Missing or not drawn", "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in doc.notes)
                             + "</ul>"))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
