"""Claims over other claims' measurements: the paper's comparisons (Sections 5.4, 6.1, 6.2, 6.3).

A relation claim's ``params.expression`` is arithmetic and comparisons over other claims, written
``{claim.id}``, and named constants (``params.constants``: figures the paper quotes for earlier
models, which are not this paper's measurements). It is evaluated on the newest stored result of
each claim it names, at the scale those were measured (cluster only when all are), and reads
"not run" until they all exist. :func:`evaluate` on the claims' own ``expected`` values shows
whether the paper's numbers satisfy the relation; where they do not, the claim records the
inconsistency.

What an expression may hold, and how it is read: :mod:`repro.claims.relation_expression`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping

from repro.checks.registry import checker
from repro.checks.step_time import comparable_results
from repro.claims.claim import Claim
from repro.claims.relation_expression import RelationError, evaluate, operands  # noqa: F401  (RelationError: re-exported)
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement, NotRun
from repro.results.provenance import Provenance
from repro.results.store import Result


def _scale(results: list[Result]) -> str:
    kinds = {r.provenance.scale.strip().lower().startswith("cluster") for r in results}
    return "cluster" if kinds == {True} else "local"


def relation_result(claim: Claim, results: Mapping[str, Result]) -> Result | None:
    """The relation evaluated on stored results, as a result of its own (``None`` until every
    claim it names has one). Its scale is ``cluster`` only when every operand's is."""
    ids = operands(claim)
    if any(cid not in results for cid in ids):
        return None
    used = [results[cid] for cid in ids]
    value = evaluate(claim, {cid: finite(results[cid].measured, f"the stored value of {cid}") for cid in ids})
    newest = max(used, key=lambda r: r.provenance.instant)
    scale = _scale(used)
    provenance = Provenance(
        commit=newest.provenance.commit, config_hash=newest.provenance.config_hash,
        hardware="; ".join(sorted({r.provenance.hardware for r in used})),
        dataset="; ".join(sorted({r.provenance.dataset for r in used})),
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        scale=f"{scale}: relation over {', '.join(ids)}",
        extra={"operands": {cid: results[cid].measured for cid in ids}},
    )
    return Result(claim.id, value, provenance, unit=claim.unit,
                  detail=", ".join(f"{cid} = {results[cid].measured}" for cid in ids))


@checker("relation.expression", audits=False, reads_results=True)
def relation(claim: Claim, ctx: CheckContext) -> Measurement:
    """The relation on the newest stored result of every claim it names."""
    results = comparable_results(ctx.results)
    missing = [cid for cid in operands(claim) if cid not in results]
    if missing:
        incomparable = [cid for cid in missing if cid in ctx.results]
        why = f" ({', '.join(incomparable)}: not comparable on this hardware)" if incomparable else ""
        raise NotRun(f"needs stored results of {', '.join(missing)}{why}")
    result = relation_result(claim, results)
    assert result is not None
    return Measurement(result.measured, detail=f"{result.detail} [{result.provenance.scale}]")
