"""The verdict on each claim (repro.report.verdict): every status, and the rules that keep it honest."""

from __future__ import annotations

import dataclasses

import pytest

from repro.claims.claim import Claim
from repro.report.verdict import STATUSES, compare, paper_precision, verdict
from repro.results import Provenance, Result


def provenance(scale: str) -> Provenance:
    return Provenance(commit="abc", config_hash="h", hardware="cpu", dataset="d", date="2026-01-01", scale=scale)


def claim(**kw) -> Claim:
    base = dict(id="c", source="s", statement="st", kind="metric", scale="local", checker="metric.result",
                file="f", expected=27.3, tolerance={"abs": 0.5})
    return Claim(**{**base, **kw})


#: A 95% interval that holds the paper's 27.3 (and 41.8 is outside it), for the metric tests.
CI = (26.9, 27.6)


def result(measured, scale="local: x", status=None, ci95=CI) -> Result:
    return Result("c", measured, provenance(scale), status=status, ci95=ci95)


@pytest.mark.parametrize("value, step", [(27.3, 0.1), (4.92, 0.01), (3.3e18, 1e17), (25000, 1), (0.4, 0.1)])
def test_paper_precision(value, step):
    assert paper_precision(value) == pytest.approx(step)


@pytest.mark.parametrize("measured, status", [
    (27.3, "reproduced"), (27.26, "reproduced"), (27.34, "reproduced"),  # rounds to 27.3
    (27.36, "within tolerance"), (26.8, "within tolerance"), (27.8, "within tolerance"),
    (27.81, "deviates"), (20.0, "deviates"), (float("nan"), "deviates"),
])
def test_metric_against_paper_precision(measured, status):
    """A non-metric number (a count, a cost) is reproduced when it equals the paper's value at its precision."""
    assert compare(claim(kind="cost"), measured) == status


@pytest.mark.parametrize("ci95, status", [
    ((25.96, 27.34), "reproduced"),   # 27.34 rounds to 27.3: the paper's value is in the interval
    ((25.96, 27.24), "within tolerance"),  # 27.24 rounds to 27.2: it is not
    ((27.26, 27.9), "reproduced"), ((27.36, 27.9), "within tolerance"),
    (None, "within tolerance"),  # no interval: at best within tolerance, even when the number is 27.3
])
def test_metric_reproduced_only_when_the_paper_value_is_in_the_interval(ci95, status):
    assert compare(claim(), 27.3, ci95) == status
    assert verdict(claim(), result(27.3, ci95=ci95)).status == status


def test_metric_interval_does_not_rescue_a_value_outside_tolerance():
    assert compare(claim(), 20.0, (10.0, 30.0)) == "deviates"


def test_rounding_claim_uses_its_rounding():
    c = claim(expected=65, tolerance={}, rounding=1, kind="count")
    assert compare(c, 64.6) == "reproduced"
    assert compare(c, 63.08) == "deviates"


def test_equations_and_hyperparameters_holding_are_reproduced():
    eq = claim(kind="equation", expected=0.0, tolerance={"abs": 1e-5})
    assert compare(eq, 3e-6) == "reproduced"
    assert compare(eq, 3e-4) == "deviates"
    hp = claim(kind="hyperparameter", expected=4000, tolerance={"abs": 0})
    assert compare(hp, 4000) == "reproduced" and compare(hp, 4001) == "deviates"


def test_bound_met_is_within_tolerance_never_reproduced():
    c = claim(expected=30.0, tolerance={}, bound="at_least")
    assert compare(c, 30.0) == "within tolerance"
    assert compare(c, 29.9) == "deviates"


def test_inconsistent_claim_outside_tolerance():
    c = claim(expected=41.8, inconsistency="41.0 in Section 6.1", inconsistency_bound={"abs": 1.3})
    assert verdict(c, result(41.0)).status == "paper inconsistent"
    assert verdict(c, result(41.8, ci95=(41.5, 42.1))).status == "reproduced"
    # beyond the documented size of the paper's inconsistency: a deviation, not the paper's
    assert verdict(c, result(38.0)).status == "deviates"
    assert verdict(dataclasses.replace(c, inconsistency_bound={}), result(41.0)).status == "deviates"


def test_missing_result_by_scale():
    assert verdict(claim(scale="cluster"), None).status == "needs cluster"
    assert verdict(claim(scale="local"), None).status == "not run"
    assert verdict(claim(scale="local"), result(1.0, status="not run")).status == "not run"


def test_local_result_never_upgrades_a_cluster_claim():
    c = claim(scale="cluster")
    v = verdict(c, result(27.3, scale="local: 2-core CPU, Multi30k"))
    assert v.status == "needs cluster" and "local" in v.note
    # A scale text that merely mentions the cluster is not a cluster-scale result.
    assert verdict(c, result(27.3, scale="local: smoke test of the cluster path")).status == "needs cluster"
    assert verdict(c, result(27.3, scale="cluster: 8x A100, WMT14")).status == "reproduced"


def test_checker_verdict_only_makes_things_worse():
    assert verdict(claim(), result(27.3, status="fail")).status == "deviates"
    v = verdict(claim(), result(20.0, status="pass"))
    assert v.status == "deviates" and "pass" in v.note
    assert verdict(claim(), result(27.3, status="pass")).status == "reproduced"
    assert verdict(claim(), result(None, status="error")).status == "error"
    assert verdict(claim(), result(None, status="not applicable")).status == "not applicable"


def test_every_status_is_reachable():
    reached = {
        verdict(claim(), result(27.3)).status, verdict(claim(), result(27.0, ci95=None)).status,
        verdict(claim(), result(1.0)).status, verdict(claim(inconsistency="x", inconsistency_bound={"abs": 30}), result(1.0)).status,
        verdict(claim(scale="cluster"), None).status, verdict(claim(), None).status,
        verdict(claim(), result(None, status="error")).status,
        verdict(claim(), result(None, status="not applicable")).status,
    }
    assert reached == set(STATUSES)


def test_within_note_gives_the_offset_in_the_papers_precision():
    count = claim(kind="count", expected=65, tolerance={"abs": 3.0}, unit="10^6 parameters")
    v = verdict(count, result(63.08, ci95=None))
    assert v.status == "within tolerance"
    assert v.note == "1.92 below the paper's value 65 (1.9 × the paper's printed precision 1)"
    assert "no 95% interval" in verdict(claim(), result(27.0, ci95=None)).note
    assert "outside the 95% interval [26.5, 27.2]" in verdict(claim(), result(27.0, ci95=(26.5, 27.2))).note
