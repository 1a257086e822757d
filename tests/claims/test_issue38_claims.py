"""Issue 38's claims on repro (they pass) and on plausible wrong versions of what they watch (they fail):
EVALB's rules, the linearised trees, BLEU's case rule, Table 3 at a scale."""

from __future__ import annotations

import dataclasses

import pytest

import repro.checks.bleu_case as bleu_case
import repro.checks.evalb_rules as evalb_rules
import repro.checks.linearization as linearization
import repro.checks.verdict_statistics as verdict_statistics
import repro.eval.bleu as bleu
import repro.eval.seeds as seeds
import repro.scaled.verdicts as verdicts
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS
from repro.claims import load_claims
from repro.claims.runner import run_claim
from repro.eval.evalb_params import COLLINS
from repro.model import table3
from repro.parsing.repair import Repaired

CLAIMS = {c.id: c for c in load_claims()}
NEW = ("table4.evalb.rules", "table4.parse.linearization", "table2.bleu.case", "table3.scaled.rows-and-seeds",
       "table3.scaled.verdict-statistics")


def check(claim_id: str):
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter())


@pytest.mark.parametrize("claim_id", NEW)
def test_repro_passes(claim_id: str) -> None:
    record = check(claim_id)
    assert record.status == "pass", record.detail


def test_evalb_rules_fail_on_a_wrong_parameter_file(monkeypatch) -> None:
    for wrong in (COLLINS.replace(eq_labels=()), COLLINS.replace(cutoff_len=39),
                  COLLINS.replace(delete_labels=("TOP", "-NONE-", ",", "."))):
        monkeypatch.setattr(evalb_rules, "COLLINS", wrong)
        record = check("table4.evalb.rules")
        assert record.status == "fail" and "differ" in record.detail, wrong


def test_evalb_rules_compare_evalb_c_output_when_the_sample_is_there(monkeypatch, tmp_path) -> None:
    record = check("table4.evalb.rules")
    assert "lines of evalb.c's reports" in record.detail
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))   # no sample: the rule cases still run, and it says so
    record = check("table4.evalb.rules")
    assert record.status == "pass" and "not compared" in record.detail


def test_linearization_fails_on_a_lenient_inverse_and_a_repair_that_hides_fixes(monkeypatch) -> None:
    monkeypatch.setattr(linearization, "delinearize", lambda target, words, tags=None: None)
    assert check("table4.parse.linearization").status == "fail"
    monkeypatch.undo()
    real = linearization.repair
    monkeypatch.setattr(linearization, "repair", lambda *a, **k: Repaired(real(*a, **k).tree, ()))
    record = check("table4.parse.linearization")
    assert record.status == "fail" and "fixes: 0" in record.detail


def test_bleu_case_fails_when_a_protocol_lowercases(monkeypatch) -> None:
    real = bleu.score

    def lowered(hyps, refs, protocol, **kwargs):
        return real([h.lower() for h in hyps], [r.lower() for r in refs], protocol, **kwargs)

    monkeypatch.setattr(bleu_case, "score", lowered)
    record = check("table2.bleu.case")
    assert record.status == "fail" and record.measured > 10


def test_scaled_rows_fail_when_a_scale_does_not_multiply_the_train_steps(monkeypatch) -> None:
    cells = dict(table3.CELLS)
    cells["train_steps"] = dataclasses.replace(cells["train_steps"], size=False)
    monkeypatch.setattr(table3, "CELLS", cells)
    record = check("table3.scaled.rows-and-seeds")
    assert record.status == "fail" and "train_steps" in record.detail and "big" in record.detail


def test_verdict_statistics_fail_on_wrong_degrees_and_an_estimate_read_as_equivalence(monkeypatch) -> None:
    real_t = seeds.t975
    monkeypatch.setattr(seeds, "t975", lambda df: real_t(df + 1))
    assert check("table3.scaled.verdict-statistics").status == "fail"
    monkeypatch.undo()

    def on_estimate(low, high, within):
        if within is not None:
            return verdicts.HOLDS if abs((low + high) / 2) <= within else verdicts.REVERSED
        return verdicts.HOLDS if low > 0 else verdicts.REVERSED if high < 0 else verdicts.INCONCLUSIVE

    monkeypatch.setattr(verdicts, "_part_verdict", on_estimate)
    record = check("table3.scaled.verdict-statistics")
    assert record.status == "fail" and "inconclusive" in record.detail
    assert verdict_statistics.VERDICT_CASES  # the cases the rule is read on
