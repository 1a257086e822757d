"""Tables 1-4 rebuilt beside the paper's, and the step-time normalisation of Section 5.2."""

from __future__ import annotations

import dataclasses
import json

import pytest

from repro.claims import load_claims
from repro.errors import ResultError
from repro.report import make_document
from repro.report.build import build_report
from repro.report.normalised_step_time import P100_FLOPS, StepTime, collect, table
from repro.report.tables import table1, table2, table3, table4
from repro.observed.counterpart import claim_job
from repro.results import Result
from repro.results.provenance import config_hash
from repro.train.config import recipe_identity


@pytest.fixture(scope="module")
def claims():
    return load_claims()  # the project's claims/: the tables key on their ids


def test_table3_has_every_row_with_measured_columns(claims, make_paper_provenance):
    results = {
        "table3.ppl.C-N2": Result("table3.ppl.C-N2", 6.05, make_paper_provenance("table3.ppl.C-N2", "cluster: 8x A100")),
        "table3.bleu.C-N2": Result("table3.bleu.C-N2", 23.1, make_paper_provenance("table3.bleu.C-N2", "local: CPU")),
    }
    frame = table3(build_report(claims, results))
    assert len(frame) == 20  # base, (A) x4, (B) x2, (C) x7, (D) x4, (E), big
    row = frame.set_index("row").loc["C-N2"]
    assert row["PPL dev (paper)"] == "6.11" and row["PPL dev (measured)"] == "6.05 (within tolerance; cluster)"
    assert row["BLEU dev (measured)"] == "23.1 (needs cluster; local)"
    assert frame.set_index("row").loc["big", "params ×10^6 (paper)"] == "213"
    assert frame.set_index("row").loc["A-h1", "PPL dev (measured)"] == "— (needs cluster)"


def test_table2_and_table4_keep_others_as_paper_figures(claims, make_paper_provenance):
    results = {"table2.bleu.base-ende": Result("table2.bleu.base-ende", 27.31,
                                               make_paper_provenance("table2.bleu.base-ende", "cluster: 8 GPUs"),
                                               ci95=(26.6, 28.0))}
    t2 = table2(build_report(claims, results), {"base": 3.1e18}).set_index("Model")
    assert t2.loc["Transformer (base model)", "BLEU EN-DE (measured)"] == "27.31 (reproduced; cluster)"
    assert t2.loc["Transformer (base model)", "Cost from measured step time"] == "3.1e+18"
    assert t2.loc["ConvS2S", "BLEU EN-DE (measured)"] == ""
    t4 = table4(build_report(claims, {}))
    assert list(t4[t4["Parser"] == "Transformer (4 layers)"]["WSJ 23 F1 (paper)"]) == ["91.3", "92.7"]


def test_table1_shows_fitted_exponents(claims, make_provenance):
    results = {"table1.self-attention.complexity": Result(
        "table1.self-attention.complexity", {"n": 2.02, "d": 0.98}, make_provenance(), status="pass")}
    t1 = table1(build_report(claims, results)).set_index("Layer type")
    assert t1.loc["Self-Attention", "Complexity per layer (paper)"] == "O(n²·d)"
    assert t1.loc["Self-Attention", "Complexity per layer (fitted)"] == "n^2.02 · d^0.98 (within tolerance; local)"
    assert t1.loc["Recurrent", "Complexity per layer (fitted)"] == "— (not run)"
    failed = {"table1.self-attention.complexity": Result(
        "table1.self-attention.complexity", {"n": 1.0, "d": 1.0}, make_provenance(), status="fail")}
    t1 = table1(build_report(claims, failed)).set_index("Layer type")
    assert t1.loc["Self-Attention", "Complexity per layer (fitted)"] == "n^1.00 · d^1.00 (deviates; local)"


def test_a_result_of_another_recipe_or_test_set_is_shown_beside_the_claim_never_counted(claims, make_provenance,
                                                                                        make_paper_provenance):
    """Issue 44: a Table 2/3 record counts only when its run is the claim's experiment as the paper specifies
    it (the recorded config hash) and it scored the paper's test set; any other is shown with what differs."""
    paper = make_paper_provenance("table2.bleu.base-ende", "cluster: 8 GPUs")
    job = claim_job("table2.bleu.base-ende").spec
    reduced = recipe_identity({**job.train, "max_steps": 600}, job.decode)
    other_recipe = dataclasses.replace(paper, config_hash=config_hash(reduced), extra={**paper.extra,
                                                                                      "recipe_identity": reduced})
    filtered = dict(paper.extra["test_set"], reference={"lines": 2737, "content_sha256": "f" * 64})
    other_set = dataclasses.replace(paper, extra={**paper.extra, "test_set": filtered})
    unsaid = dataclasses.replace(paper, extra={k: v for k, v in paper.extra.items() if k != "test_set"})
    for prov, says in ((other_recipe, "max_steps 600 (the paper's job: 100000)"),
                       (other_set, "the reference file None has 2737 lines, newstest2014 EN-DE (full, 3003 sentences) 3003"),
                       (unsaid, "does not record which files it scored")):
        result = Result("table2.bleu.base-ende", 27.31, prov, ci95=(26.6, 28.0))
        row = build_report(claims, {result.claim_id: result}).row("table2.bleu.base-ende")
        assert row.status == "needs cluster" and row.result is result, row.note
        assert row.note.startswith("not counted for the paper: ") and says in row.note
    counted = build_report(claims, {"table2.bleu.base-ende": Result("table2.bleu.base-ende", 27.31, paper,
                                                                    ci95=(26.6, 28.0))})
    assert counted.row("table2.bleu.base-ende").status == "reproduced"


def test_step_time_is_normalised_by_peak_flops(claims, make_provenance):
    # 0.1 s/step on one device of 312 TFLOPS is 0.1 * 312 / 76 = 0.41 s on 8 P100 at 9.5 TFLOPS.
    res = Result("sec5.step-time.base", 0.1, make_provenance("cluster: 1x A100", peak_flops=312e12, devices=1, steps=1000))
    [st] = collect({"sec5.step-time.base": res}, [])
    assert st.p100x8_equivalent() == pytest.approx(0.1 * 312e12 / (8 * 9.5e12))
    assert P100_FLOPS == 9.5e12
    frame = table([st], {c.id: c for c in claims}).iloc[0]
    assert frame["paper s/step (8×P100)"] == 0.4
    assert frame["equivalent / paper"] == pytest.approx(0.1 * 312 / 76 / 0.4)
    # Table 2's method: time x devices x peak; at the paper's 100,000 steps.
    assert frame["cost at the paper's steps (FLOP)"] == pytest.approx(0.1 * 100_000 * 312e12)
    assert frame["cost of this run (FLOP)"] == pytest.approx(0.1 * 1000 * 312e12)


def test_step_time_without_peak_is_not_normalised(make_provenance):
    st = StepTime("base", 0.5, "x", "local", "cpu", "abc")
    assert st.p100x8_equivalent() is None and st.cost(100) is None


def test_document_has_all_sections(claims):
    doc = make_document(build_report(claims, {}), claims, [])
    titles = [s.title for s in doc.sections]
    assert any(t.startswith("Table 1") for t in titles) and any(t.startswith("Step time") for t in titles)
    assert "footnote 5" in doc.sections[-1].note and "No step time" in doc.sections[-1].note


def test_step_time_cells_are_formatted_with_their_spread():
    from repro.report import render_html, render_md

    st = StepTime("local", 0.6109999999999, "metrics.csv of runs/local", "local: x", "cpu", "abc",
                  steps=300, spread=(0.5912345, 0.7))
    frame = table([st], {})
    md, html = render_md.table(frame), render_html.table(frame)
    for text in (md, html):
        assert "None" not in text and "nan" not in text and "0.6109999" not in text
        assert "0.611" in text and "0.5912–0.7" in text


def test_parsing_curve_section_lists_each_size(claims):
    curve = {"test": "all 245 trees", "points": [
        {"trees": 400, "steps": 1600, "epochs": 120.3, "train_nll": 0.21, "dev_nll": 1.3, "dev_greedy_f1": 8.0,
         "test_f1": 7.5, "test_greedy_f1": 9.0, "test_exact_leaf_count": 3, "test_greedy_exact_leaf_count": 11},
        {"trees": 3396, "steps": 1600, "epochs": 15.2, "train_nll": 0.7, "dev_nll": 0.71, "dev_greedy_f1": 12.0,
         "test_f1": 10.0, "test_greedy_f1": 12.0, "test_exact_leaf_count": 2, "test_greedy_exact_leaf_count": 21}]}
    doc = make_document(build_report(claims, {}), claims, [], parsing_curve=curve)
    [section] = [s for s in doc.sections if s.title.startswith("Local parser: learning curve")]
    assert section.table["training trees"].tolist() == [400, 3396]
    assert section.table["one leaf per word (beam / greedy)"].tolist() == ["3 / 11", "2 / 21"]
    assert "same number of updates" in section.note and "all 245 trees" in section.note
    # without a curve there is no such section
    assert not any(s.title.startswith("Local parser") for s in make_document(build_report(claims, {}), claims, []).sections)


def test_report_reads_the_curve_beside_its_results(tmp_path, claims):
    from repro.report import generate
    results = tmp_path / "local" / "results"
    results.mkdir(parents=True)
    (tmp_path / "local" / "parsing_curve.json").write_text(json.dumps({"points": [
        {"trees": 400, "steps": 4, "epochs": 1.0, "train_nll": 1.0, "dev_nll": 1.1, "dev_greedy_f1": 0.0,
         "test_f1": 0.0, "test_greedy_f1": 0.0, "test_exact_leaf_count": 0, "test_greedy_exact_leaf_count": 0}]}))
    generate([results], tmp_path / "out")
    assert "Local parser: learning curve" in (tmp_path / "out" / "report.md").read_text()
    (tmp_path / "local" / "parsing_curve.json").write_text("{")
    with pytest.raises(ResultError, match=r"parsing_curve.json:\d+: not valid JSON"):
        generate([results], tmp_path / "out2")
    (tmp_path / "local" / "parsing_curve.json").write_text(json.dumps({"points": [{"trees": 400}]}))
    with pytest.raises(ResultError, match=r"parsing_curve.json: points\[0\] lacks field 'steps'"):
        generate([results], tmp_path / "out2")
    assert not (tmp_path / "out2" / "report.md").exists()
