"""Relation claims: the paper's comparisons hold on the paper's own figures (or the claim says where
they do not), they are evaluated on stored results at those results' scale, and read "not run"
until every result they name exists."""

from __future__ import annotations

import pytest

from repro.checks import CHECKERS, select_claims
from repro.checks.relations import RelationError, evaluate, operands, relation_result
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.report.verdict import NEEDS_CLUSTER, verdict
from repro.results import Result, collect_provenance

CLAIMS = {c.id: c for c in select_claims()}
RELATIONS = [c for c in CLAIMS.values() if c.kind == "relation"]


def paper_values(claim) -> dict:
    return {cid: CLAIMS[cid].expected for cid in operands(claim)}


def stored(values: dict, scale: str) -> dict[str, Result]:
    return {cid: Result(cid, v, collect_provenance(config={}, dataset="newstest", scale=scale)) for cid, v in values.items()}


def test_there_are_relations_and_their_operands_are_claims():
    assert len(RELATIONS) >= 15
    for claim in RELATIONS:
        assert operands(claim), claim.id
        assert set(operands(claim)) <= set(CLAIMS), claim.id


@pytest.mark.parametrize("claim", RELATIONS, ids=[c.id for c in RELATIONS])
def test_the_papers_own_figures_satisfy_each_relation_or_the_claim_says_not(claim):
    value = evaluate(claim, paper_values(claim))
    assert claim.within(value) == (not claim.inconsistency), f"{claim.id}: {value}"


def test_the_known_inconsistencies_are_recorded():
    inconsistent = {c.id for c in RELATIONS if c.inconsistency}
    assert inconsistent == {"sec6.2.bigger-better-bleu", "sec6.3.better-than-all-but-rnng"}


def test_not_run_until_every_operand_is_stored():
    claim = CLAIMS["sec6.2.single-head-gap"]
    values = paper_values(claim)
    partial = stored({k: v for k, v in list(values.items())[:-1]}, "cluster: 8 GPUs")
    record = run_claim(claim, CHECKERS[claim.checker], object(), partial)
    assert record.status == Outcome.NOT_RUN and "table3.bleu" in record.detail


def test_evaluated_on_stored_results_at_their_scale():
    claim = CLAIMS["sec6.2.single-head-gap"]
    values = paper_values(claim)
    cluster = stored(values, "cluster: 8 GPUs")
    record = run_claim(claim, CHECKERS[claim.checker], object(), cluster)
    assert record.status == Outcome.PASS and record.measured == pytest.approx(0.9)
    result = relation_result(claim, cluster)
    assert result.provenance.scale.startswith("cluster")
    # one operand from a laptop run: the relation is local-scale, and the report will not count it
    mixed = {**cluster, "table3.bleu.A-h1": stored({"table3.bleu.A-h1": 24.9}, "local: 2-core CPU")["table3.bleu.A-h1"]}
    assert relation_result(claim, mixed).provenance.scale.startswith("local")
    assert verdict(claim, relation_result(claim, mixed)).status == NEEDS_CLUSTER


def test_a_relation_that_does_not_hold_fails():
    claim = CLAIMS["sec6.2.dropout-helps"]
    values = {**paper_values(claim), "table3.bleu.D-drop0.0": 26.5}  # no dropout, better BLEU
    assert run_claim(claim, CHECKERS[claim.checker], object(), stored(values, "cluster: x")).status == Outcome.FAIL


def test_expressions_allow_arithmetic_and_comparisons_only():
    claim = CLAIMS["sec6.1.big-ende-margin"]
    bad = type(claim)(**{**claim.__dict__, "params": {"expression": "__import__('os').getcwd()"}})
    with pytest.raises(RelationError):
        evaluate(bad, {})


def test_table2_cost_from_a_run_uses_footnote_5_for_listed_gpus_and_the_measured_peak_otherwise():
    claim = CLAIMS["table2.cost.base-run"]
    check = CHECKERS[claim.checker]
    assert run_claim(claim, check, object(), {}).status == Outcome.NOT_RUN
    p100 = {"sec5.step-time.base": Result("sec5.step-time.base", 0.4, collect_provenance(
        config={}, dataset="wmt14", scale="cluster: paper-p100", devices=8))}
    p100["sec5.step-time.base"] = Result("sec5.step-time.base", 0.4, p100["sec5.step-time.base"].provenance.__class__(
        **{**p100["sec5.step-time.base"].provenance.__dict__, "hardware": "8x Tesla P100-SXM2-16GB (CUDA 12)"}))
    record = run_claim(claim, check, object(), p100)
    assert record.status == Outcome.PASS and record.measured == pytest.approx(3.04e18, rel=1e-2)  # 0.4 x 1e5 x 8 x 9.5e12
    slow = {k: Result(k, 0.8, r.provenance) for k, r in p100.items()}
    assert run_claim(claim, check, object(), slow).status == Outcome.FAIL  # twice the paper's cost
