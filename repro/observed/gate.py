"""A result counts for a paper claim only if it came from the paper's job.

A metric claim of the paper (Table 2's BLEU, Table 3's rows, Table 4's F1, Section 5.2's step time)
is the result of one of the paper's jobs (:func:`repro.observed.counterpart.claim_job`). A record
filed under its id counts for it only when

- its run trained the job's recipe as the paper specifies it: the record's ``config_hash`` (the hash
  of its run's recipe identity, :func:`repro.train.config.recipe_identity`) equals the job's;
- it scored the paper's test set (newstest2014 full for Table 2, newstest2013 for Table 3): the
  identity of the files it scored (``provenance.extra.test_set``, :mod:`repro.data.test_sets`) is the
  paper's; a record that does not say which files it scored does not count;
- its decode searched as its recipe asks (``provenance.extra.decode``, the search the decode ran, against
  the recipe's decoding settings it keeps): a record of the recipe decoded otherwise (``repro evaluate
  --beam 1``) is not the job's result;
- and it was measured as the claim says (``params.measure``).

Anything else is another record: the report shows it beside the claim, with what differs, and the
claim reads as if no run had been made (``needs cluster``); the relations over the paper's figures
(Section 6.2's conclusions) read only the records that count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from repro.claims.claim import Claim
from repro.observed.counterpart import claim_job, claim_test_set, identity_differences
from repro.results.store import Result


def not_counted(claim: Claim, result: Result) -> str | None:
    """Why ``result`` does not count for ``claim`` (module docstring); None when it counts, or when no
    paper job serves the claim (a local claim, the project's own target)."""
    job = claim_job(claim.id)
    if job is None:
        return None
    prov, why = result.provenance, []
    if prov.config_hash != job.recipe_hash:
        identity = prov.extra.get("recipe_identity")
        differs = (identity_differences(identity, job.experiment, job.job) if isinstance(identity, dict)
                   else ["the record does not keep its recipe (recorded by an older repro)"])
        why.append(f"its run's recipe is not {job.job}'s as the paper specifies it (config hash {prov.config_hash}, "
                   f"the job's {job.recipe_hash}: {'; '.join(differs)})")
    searched, asked = prov.extra.get("decode"), (prov.extra.get("recipe_identity") or {}).get("decode")
    if isinstance(searched, dict) and isinstance(asked, dict):
        other = [f"{k} {searched.get(k)!r} (its recipe: {v!r})" for k, v in sorted(asked.items()) if searched.get(k) != v]
        if other:
            why.append(f"its decode did not search as its recipe asks: {', '.join(other)}")
    paper = claim_test_set(claim.id, claim.params.get("split"))
    if paper is not None:
        scored = prov.extra.get("test_set")
        if not isinstance(scored, dict):
            why.append(f"it does not record which files it scored (the claim's test set: {paper.name})")
        elif differences := paper.differences(scored):
            why.append(f"it did not score {paper.name}: {'; '.join(differences)}")
    wanted, measured_as = claim.params.get("measure"), prov.extra.get("measure")
    if wanted and measured_as and measured_as != wanted:
        why.append(f"it was measured as {measured_as}, the claim as {wanted}")
    return "; ".join(why) or None


def set_aside(claims: Iterable[Claim], results: Mapping[str, Result]) -> dict[str, str]:
    """Claim id -> why its stored result does not count for it, for every claim whose result does not."""
    out = {}
    for claim in claims:
        result = results.get(claim.id)
        if result is not None and (why := not_counted(claim, result)) is not None:
            out[claim.id] = why
    return out
