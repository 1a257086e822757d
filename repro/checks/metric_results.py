"""Metric claims (BLEU, perplexity, F1, step time): measured by runs, read from the results store."""

from __future__ import annotations

from repro.claims.outcome import CheckContext, Measurement, NotRun, Outcome
from repro.checks.registry import checker
from repro.claims.claim import Claim


@checker("metric.result", audits=False, reads_results=True)
def result(claim: Claim, ctx: CheckContext) -> Measurement:
    """The newest stored result for this claim; "not run" when no run has produced one."""
    stored = ctx.results.get(claim.id)
    if stored is None:
        where = "a cluster job (repro submit)" if claim.scale == "cluster" else "a local run (repro reproduce)"
        raise NotRun(f"no result yet; needs {where}")
    prov = stored.provenance
    return Measurement(
        stored.measured,
        passed=None if stored.status is None else stored.status == Outcome.PASS,
        unit=stored.unit,
        detail=f"{stored.detail} [{prov.scale}; {prov.dataset}; {prov.hardware}; commit {prov.commit[:12]}]".strip(),
    )
