"""Which record of a claim a report shows: the newest, by instant, over the claim's seeds.

Records are compared by the instant of their date (:mod:`repro.instants`), never as text. Two
records of one seed with the same newest date that disagree are a conflict no date resolves. Records
of several seeds are all shown: the claim's result is their mean, with the spread over seeds
(:func:`repro.eval.seeds.over_seeds`) and every seed's value and date in its detail.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from repro.errors import ResultError
from repro.eval.seeds import over_seeds
from repro.results.store import Result, ResultStore, disagree


def latest(store: ResultStore) -> dict[str, Result]:
    """The newest record of each claim in ``store`` (:func:`newest`), by claim id."""
    by_claim: dict[str, list[tuple[Path, Result]]] = {}
    for path, res in store.read_records():
        by_claim.setdefault(res.claim_id, []).append((path, res))
    return {claim_id: newest(records) for claim_id, records in by_claim.items()}


def newest(records: list[tuple[Path, Result]]) -> Result:
    """The newest of one claim's records (``(file, record)`` pairs), none passed over in silence.

    Records are compared by the instant of their date. Two records of one seed with the same newest
    date that disagree (another measured value or outcome) are a conflict no date resolves: refused
    naming both files. When the newest record names a seed (``extra.seed``) and other seeds have
    records too, the result is the mean over each seed's newest record, with the seeds' interval
    (:func:`repro.eval.seeds.over_seeds`) and every seed's value and date in its detail: records of
    different seeds are different measurements, and showing one of them would hide the others."""
    by_seed: dict[Any, list[tuple[Path, Result]]] = {}
    for path, res in records:
        by_seed.setdefault(_seed(res), []).append((path, res))
    per_seed = {seed: _newest_of_one_seed(found) for seed, found in by_seed.items()}
    latest_seed = max(per_seed, key=lambda seed: per_seed[seed].provenance.instant)
    seeded = {seed: res for seed, res in per_seed.items() if seed is not None}
    if latest_seed is None or len(seeded) < 2:
        return per_seed[latest_seed]
    return over_seeds_result(dict(sorted(seeded.items())), per_seed[latest_seed])


def _seed(result: Result) -> int | None:
    seed = result.extra.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _newest_of_one_seed(records: list[tuple[Path, Result]]) -> Result:
    latest = max(r.provenance.instant for _, r in records)
    tied = [(p, r) for p, r in records if r.provenance.instant == latest]
    first_path, first = tied[0]
    for path, res in tied[1:]:
        if disagree(first, res):
            raise ResultError(f"{first_path} and {path}: two records of claim {first.claim_id} dated "
                              f"{first.provenance.date} disagree (measured {first.measured!r}, scale "
                              f"{first.provenance.scale!r} vs {res.measured!r}, scale {res.provenance.scale!r}); "
                              "remove the wrong one")
    return tied[-1][1]


def over_seeds_result(by_seed: dict[int, Result], latest: Result) -> Result:
    """One claim's records of several seeds as one result: the mean and its interval over the seeds
    (numbers), or their common value (anything else: seeds that measure different non-numbers are
    refused by name, as no single value stands for them)."""
    listing = "; ".join(f"seed {seed}: {res.measured!r} ({res.provenance.date})" for seed, res in by_seed.items())
    values = [res.measured for res in by_seed.values()]
    extra = {k: v for k, v in latest.extra.items() if k != "seed"}
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if not numbers:
        if any(v != values[0] for v in values[1:]):
            raise ResultError(f"claim {latest.claim_id}: its seeds measure different values ({listing}); no one "
                              "value stands for them")
        return Result(latest.claim_id, values[0], latest.provenance, unit=latest.unit, status=latest.status,
                      detail=f"all {len(by_seed)} seeds agree ({listing})", extra={**extra, "seeds": list(by_seed)})
    half_widths = [(r.ci95[1] - r.ci95[0]) / 2 for r in by_seed.values() if r.ci95 is not None]
    summary = over_seeds({seed: float(res.measured) for seed, res in by_seed.items()},
                         half_widths if len(half_widths) == len(by_seed) else ())
    statuses = {res.status for res in by_seed.values()}
    return Result(latest.claim_id, summary.mean, latest.provenance, unit=latest.unit,
                  status=statuses.pop() if len(statuses) == 1 else None,
                  detail=f"mean of {len(by_seed)} seeds ({listing})",
                  extra={**extra, "seeds": list(by_seed), "over_seeds": summary.to_dict(6)},
                  ci95=summary.ci95 if all(math.isfinite(x) for x in summary.ci95) else None)
