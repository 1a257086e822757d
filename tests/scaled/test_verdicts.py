"""Section 6.2's conclusions on synthetic rows: holds, reversed and inconclusive are each reachable,
a NaN is never a verdict that holds, and a missing row reads "not run"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from repro.checks import select_claims
from repro.cli import main as repro_main
from repro.errors import ResultError
from repro.eval.seeds import combination, over_seeds, t975
from repro.scaled.rows import collect
from repro.scaled.verdicts import HOLDS, INCONCLUSIVE, NOT_RUN, REVERSED, conclusions, evaluate_all, paper_values
from tests.scaled.conftest import write_row

CLAIMS = select_claims()
BY_ID = {c.id: c for c in CLAIMS}


def verdict(results: Path, claim_id: str):
    [v] = [v for v in evaluate_all(CLAIMS, collect([results])) if v.claim.id == claim_id]
    return v


def heads(h1: list[float], spread: float = 0.1) -> dict:
    """Rows (A) and the base: BLEU around 20 (h1 given), PPL around 10."""
    near = lambda x: [x - spread, x, x + spread]  # noqa: E731
    return {"base": {"bleu": near(20.0), "ppl": near(10.0)}, "A-h1": {"bleu": h1, "ppl": near(10.0)},
            "A-h4": {"bleu": near(19.5), "ppl": near(10.0)}, "A-h16": {"bleu": near(19.8), "ppl": near(10.0)},
            "A-h32": {"bleu": near(19.0), "ppl": near(10.0)}}


def test_the_conclusions_are_section_6_2s_relations_with_the_papers_figures():
    ids = [c.id for c in conclusions(CLAIMS)]
    assert ids == ["sec6.2.single-head-gap", "sec6.2.too-many-heads", "sec6.2.smaller-dk-hurts",
                   "sec6.2.bigger-better-ppl", "sec6.2.bigger-better-bleu", "sec6.2.dropout-helps",
                   "sec6.2.label-smoothing-tradeoff", "sec6.2.learned-positions"]
    paper = paper_values(CLAIMS)
    assert paper[("bleu", "A-h1")] == 24.9 and paper[("ppl", "base")] == 4.92 and len(paper) == 40


def test_holds_reversed_and_inconclusive_are_each_reachable(scaled_results):
    holds = verdict(scaled_results(heads([15.0, 15.1, 14.9]), half_width=0.2), "sec6.2.single-head-gap")
    assert holds.verdict == HOLDS and holds.paper_figure == pytest.approx(0.9)
    [part] = holds.parts
    assert part.text == "BLEU base − BLEU A-h1 > 0" and part.paper == pytest.approx(0.9)
    assert part.estimate == pytest.approx(5.0) and part.ci95[0] > 0


def test_reversed(scaled_results):
    v = verdict(scaled_results(heads([25.0, 25.1, 24.9]), half_width=0.2), "sec6.2.single-head-gap")
    assert v.verdict == REVERSED
    # the paper's sign is positive: the measured gap is negative, its whole interval below zero
    assert v.parts[0].estimate == pytest.approx(-5.0) and v.parts[0].ci95[1] < 0


def test_inconclusive_when_the_interval_crosses_zero(scaled_results):
    v = verdict(scaled_results(heads([14.0, 26.0, 17.0]), half_width=0.2), "sec6.2.single-head-gap")
    low, high = v.parts[0].ci95
    assert v.verdict == INCONCLUSIVE and low < 0 < high and v.parts[0].estimate > 0


def test_the_bootstrap_alone_can_make_a_gap_inconclusive(scaled_results):
    """Seeds that agree to the digit, but a dev set whose bootstrap is wide: the interval counts it."""
    v = verdict(scaled_results(heads([19.0, 19.0, 19.0], spread=0.0), half_width=3.0), "sec6.2.single-head-gap")
    assert v.verdict == INCONCLUSIVE


def test_the_difference_interval_is_welchs_with_the_bootstraps():
    a = over_seeds({1: 20.0, 2: 21.0, 3: 22.0}, [0.6, 0.6, 0.6])
    b = over_seeds({1: 18.0, 2: 18.5, 3: 18.0}, [0.3, 0.3, 0.3])
    c = combination([(1.0, a), (-1.0, b)])
    va, vb = 1.0 / 3, (1 / 12) / 3                       # s² / n of each
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = math.hypot(t975(math.floor(df)) * math.sqrt(va + vb), math.sqrt(0.6**2 / 3 + 0.3**2 / 3))
    assert c.estimate == pytest.approx(21.0 - 54.5 / 3)
    assert c.half_width == pytest.approx(half) and c.degrees_of_freedom == pytest.approx(df)
    assert combination([(1.0, a)]).ci95 == pytest.approx(a.ci95)      # one mean: over_seeds's interval


def test_a_nan_never_holds(scaled_results):
    v = verdict(scaled_results(heads([15.0, float("nan"), 14.9]), half_width=0.2), "sec6.2.single-head-gap")
    assert v.verdict == INCONCLUSIVE and "not a number" in v.note


def test_a_missing_row_reads_not_run(scaled_results):
    rows = heads([15.0, 15.1, 14.9])
    del rows["A-h32"]
    results = scaled_results(rows)
    assert verdict(results, "sec6.2.single-head-gap").verdict == NOT_RUN
    v = verdict(results, "sec6.2.too-many-heads")
    assert v.verdict == NOT_RUN and "BLEU A-h32" in v.note
    assert verdict(results, "sec6.2.dropout-helps").verdict == NOT_RUN


def test_a_chain_is_one_part_per_pair_and_one_reversed_part_reverses_the_conclusion(scaled_results):
    near = lambda x: [x - 0.05, x, x + 0.05]  # noqa: E731
    rows = {"base": {"bleu": near(20.0), "ppl": near(10.0)}, "B-dk32": {"bleu": near(19.0), "ppl": near(11.0)},
            "B-dk16": {"bleu": near(18.0), "ppl": near(12.0)}}
    v = verdict(scaled_results(rows, half_width=0.1), "sec6.2.smaller-dk-hurts")
    assert [p.text for p in v.parts] == ["BLEU B-dk32 − BLEU B-dk16 > 0", "BLEU base − BLEU B-dk32 > 0",
                                         "PPL B-dk16 − PPL B-dk32 > 0", "PPL B-dk32 − PPL base > 0"]
    assert [p.paper for p in v.parts] == pytest.approx([0.3, 0.4, 0.15, 0.09])
    assert v.verdict == HOLDS
    rows["B-dk16"]["ppl"] = near(10.5)      # smaller d_k, *lower* perplexity than d_k = 32: one part reversed
    reversed_ = verdict(scaled_results(rows, half_width=0.1), "sec6.2.smaller-dk-hurts")
    assert [p.verdict for p in reversed_.parts] == [HOLDS, HOLDS, REVERSED, HOLDS] and reversed_.verdict == REVERSED


def test_nearly_identical_is_an_equivalence_within_the_claims_margin(scaled_results):
    near = lambda x, s=0.02: [x - s, x, x + s]  # noqa: E731

    def learned(bleu: float, spread: float = 0.02) -> str:
        rows = {"base": {"bleu": near(20.0), "ppl": near(10.0)},
                "E-learned": {"bleu": near(bleu, spread), "ppl": near(10.02)}}
        return verdict(scaled_results(rows, half_width=0.05), "sec6.2.learned-positions").verdict

    assert learned(20.1) == HOLDS                   # within 0.3 BLEU, and so is its interval
    assert learned(21.5) == REVERSED                # wholly outside ±0.3
    assert learned(20.25, spread=0.3) == INCONCLUSIVE    # its interval straddles the margin


def test_only_the_newest_signature_is_combined(tmp_path: Path):
    root = tmp_path / "results"
    write_row(root, "base", "bleu", [5.0, 5.0, 5.0], signature="old", date="2026-01-01T00:00:00+00:00")
    write_row(root, "base", "bleu", [20.0, 21.0], signature="new", date="2026-02-01T00:00:00+00:00")
    table = collect([root])["small"]
    assert table.signature == "new" and table.measured("bleu", "base").summary.values == {1: 20.0, 2: 21.0}
    assert "other signature(s) (old" in table.notes[0]


def test_a_record_without_its_seed_is_refused_by_file(tmp_path: Path):
    root = tmp_path / "results"
    write_row(root, "base", "bleu", [5.0])
    path = root / "table3-small.bleu.base" / "seed-1-sig1.json"
    data = json.loads(path.read_text())
    del data["extra"]["seed"]
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=r"seed-1-sig1\.json: a record of Table 3 at a scale lacks extra\.seed"):
        collect([root])


def test_repro_table3_prints_the_verdicts(scaled_results, capsys: pytest.CaptureFixture):
    results = scaled_results(heads([15.0, 15.1, 14.9]), half_width=0.2)
    assert repro_main(["table3", "--scale", "small", "--results", str(results), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    verdicts = {v["id"]: v for v in data["verdicts"]}
    assert verdicts["sec6.2.single-head-gap"]["verdict"] == HOLDS
    assert verdicts["sec6.2.single-head-gap"]["paper"] == pytest.approx(0.9)
    assert verdicts["sec6.2.dropout-helps"]["verdict"] == NOT_RUN
    assert data["measured"]["rows"]["A-h1"]["bleu"]["mean"] == pytest.approx(15.0)
    assert repro_main(["table3", "--results", str(results)]) == 0
    text = capsys.readouterr().out
    assert "sec6.2.single-head-gap" in text and "holds" in text and "BLEU base − BLEU A-h1 > 0: paper +0.90" in text
