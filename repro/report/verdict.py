"""The report's verdict on each claim: the one place where a measurement becomes a status.

=====================  ==================================================================
status                 when
=====================  ==================================================================
reproduced             a metric (the result of a run): inside the tolerance AND the paper's
                       value lies in the measurement's 95% interval (``Result.ci95``), the
                       interval's ends rounded to the paper's printed precision: 27.3 lies in
                       [25.96, 27.34] (-> [26.0, 27.3]) but not in [25.96, 27.24] (-> [26.0,
                       27.2]). A metric without an interval is at best "within tolerance".
                       Any other number: it equals the paper's value at the paper's precision
                       (rounded to the claim's ``rounding`` or to the last digit the paper
                       prints); for equations and hyperparameters, the check holds to its
                       tolerance; strings, booleans, tables equal.
within tolerance       inside the claim's tolerance (or meets a one-sided ``bound``), but not
                       reproduced by the rule above.
deviates               outside the tolerance, or the checker that produced it said ``fail``.
paper inconsistent     outside the tolerance where the claim records that the paper
                       contradicts itself (``inconsistency``), so no run can match every figure.
needs cluster          a cluster-scale claim with no cluster-scale result. A local-scale
                       result is shown beside it, marked with its scale, but never upgrades
                       the claim: a laptop run says nothing about the paper's numbers.
not run                a local claim with no result.
error                  the stored result records that its checker broke.
not applicable         the stored result records that the implementation lacks the part.
=====================  ==================================================================

A result's scale is read from ``provenance.scale``: it counts as cluster scale only when
that text starts with ``cluster``; anything else is treated as local (the cautious reading).

For a structured paper value (a table, such as Table 1's exponents {n = 2, d = 1}) the
tolerance lives in the checker's parameters, and the checker's verdict stands. Otherwise a
checker's own verdict (``Result.status``) can only make a status worse, never better: a
``fail`` is ``deviates`` even if the number happens to lie in the claim's tolerance, and a
``pass`` whose number lies outside the tolerance is reported as ``deviates`` with a note,
because the report must not certify what its own comparison contradicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from repro.claims.claim import Claim
from repro.claims.outcome import Outcome, TextEnum
from repro.results.store import Result


class ReportStatus(TextEnum):
    """The report's verdict on a claim (its value is what the report prints)."""

    REPRODUCED = "reproduced"
    WITHIN = "within tolerance"
    DEVIATES = "deviates"
    INCONSISTENT = "paper inconsistent"
    NEEDS_CLUSTER = "needs cluster"
    NOT_RUN = "not run"
    ERROR = "error"
    NOT_APPLICABLE = "not applicable"


REPRODUCED = ReportStatus.REPRODUCED
WITHIN = ReportStatus.WITHIN
DEVIATES = ReportStatus.DEVIATES
INCONSISTENT = ReportStatus.INCONSISTENT
NEEDS_CLUSTER = ReportStatus.NEEDS_CLUSTER
NOT_RUN = ReportStatus.NOT_RUN
ERROR = ReportStatus.ERROR
NOT_APPLICABLE = ReportStatus.NOT_APPLICABLE

#: Every status the report prints, best first (also the order of the summary).
STATUSES = (REPRODUCED, WITHIN, DEVIATES, INCONSISTENT, NEEDS_CLUSTER, NOT_RUN, ERROR, NOT_APPLICABLE)

#: One line per status, printed as the report's legend.
MEANINGS = {
    REPRODUCED: "a metric: inside the tolerance and the paper's value lies in the measured 95% interval, its ends "
                "rounded to the paper's precision; other numbers: equal to the paper's value at the paper's precision "
                "(equations and hyperparameters: hold to tolerance)",
    WITHIN: "inside the claim's tolerance (or meets its one-sided bound), but not reproduced by that rule "
            "(a metric without an interval is at best within tolerance)",
    DEVIATES: "outside the tolerance, or the checker that measured it reported fail",
    INCONSISTENT: "outside the tolerance where the paper contradicts itself (see the note)",
    NEEDS_CLUSTER: "a cluster-scale claim without a cluster-scale result (a local result is shown for its scale only)",
    NOT_RUN: "a local claim without a result",
    ERROR: "the stored result records that its checker broke",
    NOT_APPLICABLE: "the stored result records that the implementation lacks the part",
}

#: Kinds whose check either holds to its tolerance or not: holding is "reproduced".
_EXACT_KINDS = ("equation", "hyperparameter", "structure", "invariant")


@dataclass(frozen=True)
class Verdict:
    status: ReportStatus
    note: str = ""


def result_scale(result: Result) -> str:
    """``cluster`` when the result's provenance says so, else ``local``."""
    return "cluster" if result.provenance.scale.strip().lower().startswith("cluster") else "local"


def paper_precision(value: float | int) -> float:
    """The step of the last digit the paper prints: 27.3 -> 0.1, 4.92 -> 0.01, 3.3e18 -> 1e17."""
    try:
        exponent = Decimal(repr(value)).as_tuple().exponent
    except InvalidOperation:
        return 0.0
    return 10.0 ** int(exponent) if isinstance(exponent, int) else 0.0


def _equal_at_precision(claim: Claim, expected: Any, measured: Any) -> bool:
    if isinstance(expected, bool) or isinstance(measured, bool):
        return bool(expected) == bool(measured)
    if isinstance(expected, (int, float)) and isinstance(measured, (int, float)):
        if math.isnan(float(measured)):
            return False
        step = claim.rounding or paper_precision(expected)
        if step == 0:
            return measured == expected
        return math.isclose(round(measured / step) * step, expected, rel_tol=1e-9, abs_tol=step * 1e-6)
    if isinstance(expected, list) and isinstance(measured, list):
        return len(expected) == len(measured) and all(
            _equal_at_precision(claim, e, m) for e, m in zip(expected, measured)
        )
    return expected == measured


def interval_holds(claim: Claim, ci95: tuple[float, float] | None) -> bool:
    """Whether the paper's value lies in ``ci95``, its ends rounded to the paper's precision."""
    expected = claim.expected
    if ci95 is None or isinstance(expected, bool) or not isinstance(expected, (int, float)):
        return False
    low, high = ci95
    if math.isnan(low) or math.isnan(high):
        return False
    step = claim.rounding or paper_precision(expected)
    if step > 0:
        low, high = round(low / step) * step, round(high / step) * step
    tol = step * 1e-6
    return low - tol <= expected <= high + tol


def compare(claim: Claim, measured: Any, ci95: tuple[float, float] | None = None) -> ReportStatus:
    """The status of ``measured`` (with its 95% interval, if any) against the paper's value, ignoring
    scale and checker verdicts."""
    if not claim.within(measured):
        return INCONSISTENT if claim.explained_by_inconsistency(measured) else DEVIATES
    if claim.bound is not None:
        return WITHIN  # a one-sided target met: there is no exact figure to reproduce
    if claim.kind in _EXACT_KINDS:
        return REPRODUCED
    if claim.kind == "metric" and not isinstance(claim.expected, (list, dict)):
        return REPRODUCED if interval_holds(claim, ci95) else WITHIN
    return REPRODUCED if _equal_at_precision(claim, claim.expected, measured) else WITHIN


def verdict(claim: Claim, result: Result | None) -> Verdict:
    """The report's status of ``claim`` given its newest ``result`` (or none)."""
    missing = NEEDS_CLUSTER if claim.scale == "cluster" else NOT_RUN
    if result is None or result.status == Outcome.NOT_RUN:
        return Verdict(missing, result.detail if result is not None else "")
    if result.status == Outcome.ERROR:
        return Verdict(ERROR, result.detail)
    if result.status == Outcome.NOT_APPLICABLE:
        return Verdict(NOT_APPLICABLE, result.detail)
    if claim.scale == "cluster" and result_scale(result) != "cluster":
        return Verdict(NEEDS_CLUSTER, "the measured value is from a local-scale run and is shown for its scale only")
    if isinstance(claim.expected, dict) and result.status in (Outcome.PASS, Outcome.FAIL, Outcome.INCONSISTENT):
        # Structured values (Table 1's fitted exponents) carry their tolerance in the checker's
        # params; the claim alone cannot compare them, so the checker's verdict stands.
        if result.status == Outcome.PASS:
            exact = claim.kind in _EXACT_KINDS or claim.expected == result.measured
            return Verdict(REPRODUCED if exact else WITHIN)
        return Verdict(INCONSISTENT if claim.explained_by_inconsistency(result.measured) else DEVIATES,
                       "the checker reported fail")
    status = compare(claim, result.measured, result.ci95)
    if result.status == Outcome.FAIL and status in (REPRODUCED, WITHIN):
        return Verdict(INCONSISTENT if claim.explained_by_inconsistency(result.measured) else DEVIATES,
                       "the checker that produced this result reported fail")
    if result.status == Outcome.PASS and status in (DEVIATES, INCONSISTENT):
        return Verdict(status, "the checker reported pass, but the value lies outside the claim's tolerance")
    if result.status == Outcome.INCONSISTENT and status in (REPRODUCED, WITHIN):
        return Verdict(INCONSISTENT, "the checker reported the paper inconsistent")
    if status == WITHIN:
        return Verdict(status, within_note(claim, result))
    return Verdict(status, claim.inconsistency if status == INCONSISTENT else "")


def within_note(claim: Claim, result: Result) -> str:
    """Why a number inside the tolerance is not "reproduced": its offset in the paper's printed
    precision (Table 3's counts: "1.92 below the paper's value 65 (1.9 × the paper's printed precision 1)"),
    and for a metric where the paper's value lies against the measured interval."""
    expected, measured = claim.expected, result.measured
    if claim.bound is not None or isinstance(expected, bool) or not isinstance(expected, (int, float)) \
            or isinstance(measured, bool) or not isinstance(measured, (int, float)):
        return ""
    step = claim.rounding or paper_precision(expected)
    diff = float(measured) - float(expected)
    side = "below" if diff < 0 else "above"
    text = f"{abs(diff):.3g} {side} the {claim.value_label}'s value {expected:g}"
    if step:
        text += f" ({abs(diff) / step:.1f} × the paper's printed precision {step:g})"
    if claim.kind == "metric":
        if result.ci95 is None:
            text += "; no 95% interval was measured, so it cannot read reproduced"
        else:
            text += f"; the paper's value lies outside the 95% interval [{result.ci95[0]:g}, {result.ci95[1]:g}]"
    return text
