"""Checkers, one module per part of the paper. Importing this package registers them all.

:func:`select_claims` loads the claims (refusing one that names no registered checker) and
:func:`run_checks` runs them against an implementation with these checkers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from repro.checks import (  # noqa: F401  (importing a module registers its checkers)
    architectures, attention, attention_maps, attention_scores, batch_epochs, beam_rank, bleu_case, bleu_protocol, checkpoint_keeping, compiled_shapes, decoding, dot_product, dropout,
    encoded_cache, evalb_rules, evaluation_average, invariants, job_model, layers, linearization,
    measurement_records, metric_results, multihead, observed_average, observed_data, observed_evaluation,
    observed_heldout, observed_loss, observed_model, observed_time, observed_training, parse_scoring, parser_recipe,
    search_scores,
    positional, rank_group, read_late, recipe_runs, relations,
    resumed_step_time, runtime_choice, scaled_jobs, section4, stacks, step_time, table1, table2, table3,
    token_counts, training, training_data, update_arithmetic, verdict_statistics,
)
from repro.checks.registry import AUDITING, CHECKERS, EVIDENCE, audits_implementation, basis_allowed, checker
from repro.checks.relations import relation_result
from repro.checks.step_time import comparable_results, step_time_result
from repro.checks.table2 import cost_result
from repro.claims import Claim, load_claims
from repro.claims.compare import NonFinite
from repro.claims.runner import CheckRecord, run_claims, run_claims_in_processes
from repro.errors import ClaimFileError

if TYPE_CHECKING:
    from repro.results.store import Result


def select_claims(scale: str | None = None, only: Sequence[str] = (), claims_dir: str | os.PathLike[str] | None = None,
                  *, auditing: bool = False) -> list[Claim]:
    """The claims under ``claims_dir`` (default: the shipped ones) at ``scale`` (``None``: all),
    whose id starts with one of ``only`` (if given); ``auditing``: only those whose checker
    measures the implementation under audit. Selecting nothing with ``only`` is an error."""
    claims = load_claims(claims_dir, checkers=CHECKERS)
    for claim in claims:
        overstated = basis_allowed(claim)
        if overstated:
            raise ClaimFileError(f"{claim.file}: claim '{claim.id}': field 'basis': {overstated}")
    if scale is not None:
        claims = [c for c in claims if c.scale == scale]
    if auditing:
        claims = [c for c in claims if audits_implementation(c.checker)]
    if only:
        claims = [c for c in claims if any(c.id.startswith(p) for p in only)]
        if not claims:
            kind = "auditable" if auditing else (scale or "")
            raise ClaimFileError(f"no {kind + ' ' if kind else ''}claim id starts with {', '.join(only)}")
    return claims


def run_checks(
    claims: Iterable[Claim],
    target: Any,
    results: Mapping[str, "Result"] | None = None,
    seed: int = 0,
    on_record: Callable[[CheckRecord], None] | None = None,
    jobs: int = 1,
    make_target: Callable[[], Any] | None = None,
) -> list[CheckRecord]:
    """Each claim's registered checker against ``target`` (an adapter, e.g. ``ReproAdapter()``). With
    ``jobs`` > 1, in that many processes, each building its target with ``make_target`` (picklable;
    :func:`repro.claims.runner.run_claims_in_processes`): the same records, sooner where cores are many."""
    if jobs > 1:
        if make_target is None:
            raise ValueError("run_checks: jobs > 1 needs make_target (each process builds its own target)")
        return run_claims_in_processes(claims, __name__, make_target, jobs, results, seed, on_record)
    return run_claims(claims, CHECKERS, target, results, seed, on_record)


def derived_result(claim: Claim, results: Mapping[str, "Result"]) -> "Result | None":
    """The result of a claim computed from other stored results (a relation, Table 2's cost of a
    measured run), with the provenance of what it was computed from; ``None`` when the claim is
    not of that sort or its inputs are missing. The report shows these beside stored results."""
    if claim.checker == "relation.expression":
        try:
            return relation_result(claim, comparable_results(results))
        except NonFinite:  # an operand stored as NaN or infinity: the relation has no value
            return None
    if claim.checker == "table2.cost_from_run":
        return cost_result(claim, dict(results))
    if claim.checker == "metric.step_time":
        return step_time_result(claim, results)
    return None


#: Checkers whose report value is derived from the stored one even when a result of the claim
#: is stored (a step time is normalised to 8 P100 before it is compared).
DERIVED_OVER_STORED = ("metric.step_time",)


__all__ = ["AUDITING", "CHECKERS", "DERIVED_OVER_STORED", "EVIDENCE", "audits_implementation", "checker", "derived_result", "run_checks", "select_claims"]
