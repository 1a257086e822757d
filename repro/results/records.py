"""Check records into the results store: what ``repro check`` and the main job keep of a check."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from repro.results.provenance import collect_provenance
from repro.results.store import Result, ResultStore

if TYPE_CHECKING:
    from repro.claims.runner import CheckRecord

def store_records(records: Iterable["CheckRecord"], store: ResultStore, name: str | None = None,
                  device: str = "cpu") -> list:
    """Write each measured record (pass, fail, paper inconsistent) with this process's provenance;
    records derived from stored results (metrics, relations) are skipped: they would only copy them.
    ``name``: the writer's own record name (:meth:`ResultStore.write`), replaced in place; ``device``:
    where the implementation computed (``repro check --device``)."""
    written = []
    where = "the CPU" if device == "cpu" else device
    for r in records:
        if not r.status.measured or r.derived:
            continue
        prov = collect_provenance(
            config={"claim": r.claim.id, "params": r.claim.params}, dataset="none (equation-level check)",
            scale=f"local: equation-level check on {where}", **({} if device == "cpu" else {"device": device}),
        )
        written.append(store.write(Result(r.claim.id, r.measured, prov, unit=r.unit or r.claim.unit,
                                          status=r.status.value, detail=r.detail, extra=r.extra), name))
    return written
