"""The report's sections for Table 3 at a named scale: the rows beside the paper's, the verdicts with the
paper's figure, the figure of differences; none of it counts as a measurement of the paper's claims."""

from __future__ import annotations

import json
from pathlib import Path

from repro.report import generate
from tests.scaled.conftest import write_row


def test_the_report_shows_the_scaled_rows_and_verdicts(tmp_path: Path):
    results = tmp_path / "results"
    near = lambda x: [x - 0.1, x, x + 0.1]  # noqa: E731
    for row, bleu, ppl in (("base", 20.0, 10.0), ("A-h1", 15.0, 12.0), ("A-h4", 19.5, 10.2), ("A-h16", 19.8, 10.1),
                           ("A-h32", 19.0, 10.4), ("D-drop0.0", 21.0, 9.0)):
        write_row(results, row, "bleu", near(bleu), half_width=0.2)
        write_row(results, row, "ppl", near(ppl), half_width=0.1)
    out = tmp_path / "report"
    generate([results], out)
    report = json.loads((out / "report.json").read_text())
    rows = report["tables"]["Table 3 at other scales: the rows"]
    assert [r["row"] for r in rows] == ["base", "A-h1", "A-h4", "A-h16", "A-h32", "D-drop0.0"]
    assert rows[1]["BLEU dev (small)"].startswith("15.00 [") and rows[1]["PPL dev (small)"].startswith("12.00 [")
    assert rows[1]["BLEU dev (paper)"] == "24.9" and rows[1]["params ×10^6 (small)"] == "2.40"
    assert rows[1]["seeds (small)"] == "1, 2, 3"
    verdicts = {r["conclusion"]: r for r in report["tables"]["Table 3 at other scales: Section 6.2's conclusions"]}
    assert verdicts["sec6.2.single-head-gap"]["verdict (small)"] == "holds"
    assert verdicts["sec6.2.single-head-gap"]["paper (Table 3)"] == "0.9"
    # dropout: no dropout trains *better* here, so the conclusion is reversed at this scale
    assert verdicts["sec6.2.dropout-helps"]["verdict (small)"] == "reversed"
    assert verdicts["sec6.2.learned-positions"]["verdict (small)"] == "not run"
    # the paper's own Table 3 claims are untouched: the scale's numbers are not theirs
    claims = {c["id"]: c for c in report["claims"]}
    assert claims["table3.bleu.A-h1"]["measured"] is None and claims["table3.bleu.A-h1"]["status"] == "needs cluster"
    assert claims["sec6.2.single-head-gap"]["measured"] is None
    assert "Measurements without a claim" not in report["tables"]
    [figure] = [f for f in report["figures"] if f["name"] == "table3-small-differences"]
    assert "scale: small" in figure["caption"] and (out / figure["file"]).stat().st_size > 0
    md = (out / "report.md").read_text()
    assert "## Table 3 at other scales: the rows" in md and "never the paper's" in md
