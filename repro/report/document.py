"""The report as one in-memory document: the sections every renderer prints, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from repro.claims.claim import Claim
from repro.report import normalised_step_time, run_section, scaled, tables
from repro.report.build import ReportData
from repro.report.figures import Figures, draw
from repro.report.runs import Run
from repro.report.verdict import MEANINGS
from repro.report.values import show
from repro.scaled.rows import collect, is_scaled_id
from repro.scaled.verdicts import evaluate_all, paper_values

CLAIM_COLUMNS = ("id", "source", "basis", "paper", "measured", "ci95", "unit", "tolerance", "status", "run scale",
                 "note")
PROVENANCE_COLUMNS = ("id", "commit", "config hash", "hardware", "dataset", "bleu signature", "date")


@dataclass(frozen=True)
class Section:
    title: str
    table: pd.DataFrame
    note: str = ""


@dataclass
class Document:
    data: ReportData
    sections: list[Section]
    figures: Figures
    notes: list[str] = field(default_factory=list)
    legend: dict[str, str] = field(default_factory=lambda: dict(MEANINGS))


def claim_value(claim: Claim) -> str:
    """The claim's value for a table cell: the paper's figure, or ``target: 30`` for the project's own."""
    return f"target: {show(claim.expected)}" if claim.target else show(claim.expected)


def claims_frame(data: ReportData) -> pd.DataFrame:
    rows = []
    for r in data.rows:
        cells = {k: show(v) for k, v in r.to_dict().items() if k in CLAIM_COLUMNS}
        cells["paper"] = claim_value(r.claim)
        rows.append(cells)
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def provenance_frame(data: ReportData) -> pd.DataFrame:
    return pd.DataFrame([{k: show(v) for k, v in r.to_dict().items() if k in PROVENANCE_COLUMNS}
                         for r in data.rows if r.result is not None], columns=list(PROVENANCE_COLUMNS))


def unclaimed_frame(data: ReportData) -> pd.DataFrame:
    """Measurements stored under ids no claim names (e.g. the local run's perplexity and parsing F1)."""
    rows = []
    for claim_id in data.unmatched:
        res = data.results[claim_id]
        if is_scaled_id(claim_id) or res.extra.get("scaled"):
            continue   # Table 3 at a scale has its own section
        rows.append({"id": claim_id, "measured": show(res.measured), "unit": show(res.unit),
                     "run scale": res.provenance.scale, "detail": res.detail, "dataset": res.provenance.dataset,
                     "commit": res.provenance.commit, "date": res.provenance.date})
    return pd.DataFrame(rows, columns=["id", "measured", "unit", "run scale", "detail", "dataset", "commit", "date"])


#: The learning curve of the local parser (:mod:`repro.pipeline.parsing_curve`), beside the results it comes with.
PARSING_CURVE_FILE = "parsing_curve.json"
#: What the section reads of each point (the rest, such as ``probe``, is optional).
CURVE_POINT_FIELDS = ("trees", "steps", "test_f1", "test_greedy_f1", "test_exact_leaf_count",
                      "test_greedy_exact_leaf_count")
CURVE_COLUMNS = ("training trees", "updates", "epochs", "train NLL", "dev NLL", "dev F1 (greedy)",
                 "test F1 (beam 21, α 0.3)", "test F1 (greedy)", "one leaf per word (beam / greedy)")


def parsing_curve_section(curve: dict) -> Section:
    """The local parser's F1 against its number of training trees, each at the same number of updates."""
    rows = []
    for p in curve.get("points", []):
        rows.append({"training trees": p["trees"], "updates": p["steps"], "epochs": show(p.get("epochs")),
                     "train NLL": show(p.get("train_nll")), "dev NLL": show(p.get("dev_nll")),
                     "dev F1 (greedy)": show(p.get("dev_greedy_f1")), "test F1 (beam 21, α 0.3)": show(p["test_f1"]),
                     "test F1 (greedy)": show(p["test_greedy_f1"]),
                     "one leaf per word (beam / greedy)": f"{p['test_exact_leaf_count']} / "
                                                          f"{p['test_greedy_exact_leaf_count']}"})
    return Section("Local parser: learning curve (PTB sample)", pd.DataFrame(rows, columns=list(CURVE_COLUMNS)),
                   f"The local-parsing recipe trained from scratch on the first K training trees of the NLTK Penn "
                   f"Treebank sample, the same number of updates for every K; NLL per target token (no smoothing) on "
                   f"{TRAIN_PROBE_NOTE}; test: {curve.get('test', 'the 245 test trees')}. Not Table 4's data or "
                   f"scale: python -m repro.pipeline.parsing_curve.")


TRAIN_PROBE_NOTE = "the first 273 training trees and on the 273 dev trees at the last checkpoint"


def make_document(data: ReportData, claims: list[Claim], runs: list[Run],
                  attention_sentence: str | None = None, parsing_curve: dict | None = None, *,
                  skip_invalid: bool = False) -> Document:
    """Every table and figure of the report, built in memory (``skip_invalid``: as ``repro report
    --skip-invalid``, a malformed record of Table 3 at a scale is left out and named)."""
    by_id = {c.id: c for c in claims}
    step_times = normalised_step_time.collect(data.results, runs)
    step_table = normalised_step_time.table(step_times, by_id)
    cost: dict[str, float | None] = {}
    for st in step_times:  # Table 2 takes the step-time results only; runs' logs are listed below it
        steps_claim = normalised_step_time.PAPER_CLAIMS.get(st.configuration, ("", "", ""))[1]
        if st.source.startswith("result") and steps_claim in by_id:
            cost[st.configuration] = st.cost(int(by_id[steps_claim].expected))
    sections = [
        Section("Claims", claims_frame(data),
                "One row per claim of claims/*.toml; 'run scale' is the scale of the run that measured it."),
        Section("Provenance of each measured claim", provenance_frame(data)),
        Section("Table 1: complexity per layer type", tables.table1(data),
                "Fitted exponents of measured cost against n (and d) beside the paper's O(·)."),
        Section("Table 2: newstest2014 BLEU and training cost (FLOPs)", tables.table2(data, cost),
                "Other systems' rows are the paper's figures, not reproduced here. 'Section 5.2 × footnote 5' "
                "recomputes the paper's cost from its own time and hardware; the last column uses our measured step time."),
        Section("Table 3: variations on the base model (EN-DE newstest2013)", tables.table3(data)),
        Section("Table 4: English constituency parsing (WSJ 23 F1)", tables.table4(data),
                "Other parsers' rows are the paper's figures, not reproduced here."),
        Section("Step time and training cost, normalised to 8×P100", step_table,
                normalised_step_time.ASSUMPTION + ("" if step_times else " No step time has been measured yet.")),
    ]
    scaled_tables = collect(data.result_dirs, skip_invalid=skip_invalid)
    if scaled_tables:
        sections += [
            Section("Table 3 at other scales: the rows", scaled.table(scaled_tables, claims),
                    scaled.table_note(scaled_tables)),
            Section("Table 3 at other scales: Section 6.2's conclusions",
                    scaled.verdicts_table(evaluate_all(claims, scaled_tables)), scaled.VERDICTS_NOTE),
        ]
    unclaimed = unclaimed_frame(data)
    if not unclaimed.empty:
        sections.append(Section("Measurements without a claim", unclaimed,
                                "Stored results that no claim names: shown with their scale, never given a status."))
    if parsing_curve and parsing_curve.get("points"):
        sections.append(parsing_curve_section(parsing_curve))
    for check in run_section.checked_runs(runs, claims):
        sections.append(Section(f"This run against the paper: {check.files.path}", run_section.table(check),
                                run_section.note(check)))
    figures = draw(data.results, runs, attention_sentence)
    for table in scaled_tables.values():
        drawn = scaled.difference_figure(table, paper_values(claims))
        (figures.figures if not isinstance(drawn, str) else figures.missing).append(drawn)
    notes = list(figures.missing)
    return Document(data, sections, figures, notes)


def inputs_line(data: ReportData) -> str:
    dirs = ", ".join(str(Path(d)) for d in data.result_dirs) or "(none)"
    return f"generated {data.generated} from the results in {dirs}"
