"""The measurements a job's claims name: what a job measures is read from its claims, never from their ids."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from repro.claims.claim import Claim
from repro.claims.loader import default_claims_dir, load_claims
from repro.errors import ConfigError
from repro.measures.measure_registry import Request


def _claims(claims_dir: str | None) -> dict[str, Claim]:
    folders = [default_claims_dir(), *([Path(claims_dir)] if claims_dir is not None else [])]
    stamp = tuple((str(f), tuple((p.name, p.stat().st_mtime_ns) for p in sorted(f.glob("*.toml"))) if f.is_dir()
                   else ()) for f in folders)
    return _load(stamp, claims_dir)


@lru_cache(maxsize=8)
def _load(stamp: tuple, claims_dir: str | None) -> dict[str, Claim]:
    """The claims of ``claims_dir`` over the project's, loaded again whenever a file of either changes (``stamp``)."""
    claims = {c.id: c for c in load_claims(None)}
    if claims_dir is not None:
        claims.update({c.id: c for c in load_claims(claims_dir)})
    return claims


def claim_requests(claim_ids: Sequence[str], result_ids: Sequence[str] | None = None, *,
                   claims_dir: str | os.PathLike[str] | None = None) -> list[Request]:
    """A request for each of ``claim_ids``: the measurement and split its claim's params name, stored under
    the matching id of ``result_ids`` (default: the claim's own). The claims are the project's
    (:func:`repro.claims.loader.default_claims_dir`), with those of ``claims_dir`` over them."""
    claims = _claims(str(claims_dir) if claims_dir is not None else None)
    result_ids = list(result_ids) if result_ids is not None else list(claim_ids)
    if len(result_ids) != len(claim_ids):
        raise ValueError("one result id per claim")
    requests = []
    for claim_id, result_id in zip(claim_ids, result_ids):
        if claim_id not in claims:
            raise ConfigError(f"no claim has the id '{claim_id}': a job measures only what a claim names")
        requests.append(Request.of_claim(claims[claim_id], result_id))
    return requests
