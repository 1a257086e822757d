"""Metric claims (BLEU, perplexity, F1, step time): measured by runs, read from the results store."""

from __future__ import annotations

from repro.claims.outcome import CheckContext, Measurement, NotRun, Outcome
from repro.checks.registry import checker
from repro.claims.claim import Claim


@checker("metric.result", audits=False, reads_results=True)
def result(claim: Claim, ctx: CheckContext) -> Measurement:
    """The newest stored result for this claim; "not run" when no run has produced one. The claim's
    tolerance or bound decides on the measured value, as the report does; a record's own ``status`` can
    only fail it (a job stores ``fail`` for a value that is no finite number), never pass a value the
    claim does not take (a ``"status": "pass"`` beside a BLEU of 1.0 passed ``check``, the report said it deviates)."""
    stored = ctx.results.get(claim.id)
    if stored is None:
        where = "a cluster job (repro submit)" if claim.scale == "cluster" else "a local run (repro reproduce)"
        raise NotRun(f"no result yet; needs {where}")
    prov = stored.provenance
    return Measurement(
        stored.measured,
        passed=False if stored.status == Outcome.FAIL else None,
        unit=stored.unit,
        detail=f"{stored.detail} [{prov.scale}; {prov.dataset}; {prov.hardware}; commit {prov.commit[:12]}]".strip(),
    )
