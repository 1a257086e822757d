"""Storing what a measurement found as a result record, the one way every job does it.

The record (:class:`repro.results.Result`) carries the measured value, its unit, interval and
protocol signature, the job's provenance (its config, scale and run, with the measurement's own
provenance fields added) and the measurement's ``extra`` beside the job's. A value that is not a
finite number (a NaN perplexity of a diverged model) is stored as a failure saying so, never as
something the report could count as a reproduction; only rank 0 of a job writes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro.claims.outcome import Outcome
from repro.measures.measure_registry import Measured, Request
from repro.results import Result, ResultStore, collect_provenance

log = logging.getLogger("repro.measures.recording")


def record(store: ResultStore, request: Request, measured: Measured, *, config: Any, scale: str,
           provenance: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
           name: str | None = None) -> Path:
    """Write ``measured`` as the record of ``request.result_id`` under ``store`` (as ``<name>.json`` when
    the job owns its record, :meth:`ResultStore.write`); returns its path. ``provenance``: the job's
    fields of ``provenance.extra``; ``extra``: the job's fields of the record's ``extra``."""
    status, detail = None, measured.detail
    if not measured.finite:
        status = Outcome.FAIL.value
        detail = f"the measurement {request.measure} gave {measured.value!r}, not a finite number; {detail}"
        log.warning("%s: %s = %r is not a finite number; stored as a failure", request.result_id, request.measure,
                    measured.value)
    interval = None
    if measured.ci95 is not None and all(math.isfinite(x) for x in measured.ci95):
        interval = tuple(round(x, measured.digits) for x in measured.ci95)
    prov = collect_provenance(config=config, dataset=measured.dataset, scale=scale,
                              bleu_signature=measured.bleu_signature,
                              **{**dict(provenance or {}), **measured.provenance, "measure": request.measure,
                                 **({"split": request.split} if request.split else {})})
    path = store.write(Result(request.result_id, measured.value, prov, unit=measured.unit, status=status,
                              detail=detail, extra={**measured.extra, **dict(extra or {})}, ci95=interval), name)
    log.info("%s = %s (%s)", request.result_id, measured.value, scale)
    return path
