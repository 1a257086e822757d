"""Storing what a measurement found as a result record, the one way every job does it, in the results
store and in the run's own directory (``RUN_DIR/evaluations/``, read by ``repro check --run``).

The record (:class:`repro.results.Result`) carries the measured value, its unit, interval and
protocol signature, the job's provenance (its config, scale and run, with the measurement's own
provenance fields added) and the measurement's ``extra`` beside the job's. A value that is not a
finite number (a NaN perplexity of a diverged model) is stored as a failure saying so, never as
something the report could count as a reproduction; only rank 0 of a job writes.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.errors import ResultError
from repro.files.reader import read_text
from repro.files.writer import atomic_write_text, publish_all
from repro.limits import TEXT_BYTES

from repro.claims.outcome import Outcome
from repro.measures.measure_registry import Measured, Request
from repro.results import Result, ResultStore, collect_provenance
from repro.train.config import recipe_identity

#: The folder of a run directory that holds the records of the evaluations taken of the run.
EVALUATIONS = "evaluations"
#: The folder of ``evaluations/`` that keeps the records a later evaluation of the same kind replaced.
EARLIER = "earlier"

log = logging.getLogger("repro.measures.recording")


def result_of(request: Request, measured: Measured, *, config: Mapping[str, Any], scale: str,
              decode: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None,
              extra: Mapping[str, Any] | None = None) -> Result:
    """``measured`` as the record of ``request.result_id``: ``config`` is the job's training config and
    ``decode`` its decoding settings (their recipe identity, :func:`repro.train.config.recipe_identity`,
    is hashed into ``provenance.config_hash`` and kept as ``provenance.extra.recipe_identity``, so that a
    reader can say how it differs from a paper job's); ``provenance``: the job's fields of ``provenance.extra``;
    ``extra``: the job's fields of the record's ``extra``."""
    status, detail = None, measured.detail
    if not measured.finite:
        status = Outcome.FAIL.value
        detail = f"the measurement {request.measure} gave {measured.value!r}, not a finite number; {detail}"
        log.warning("%s: %s = %r is not a finite number; stored as a failure", request.result_id, request.measure,
                    measured.value)
    interval = None
    if measured.ci95 is not None and all(math.isfinite(x) for x in measured.ci95):
        interval = tuple(round(x, measured.digits) for x in measured.ci95)
    identity = recipe_identity(dict(config), dict(decode or {}))
    prov = collect_provenance(config=identity, dataset=measured.dataset, scale=scale,
                              bleu_signature=measured.bleu_signature,
                              **{**dict(provenance or {}), **measured.provenance, "measure": request.measure,
                                 **({"split": request.split} if request.split else {}), "recipe_identity": identity})
    return Result(request.result_id, measured.value, prov, unit=measured.unit, status=status, detail=detail,
                  extra={**measured.extra, **dict(extra or {})}, ci95=interval)


def keep_in_run(run_dir: str | os.PathLike[str], result: Result) -> Path:
    """The run's own copy of an evaluation of it: ``RUN_DIR/evaluations/<result id>.json`` (the same
    record as the store's); ``repro check --run`` reads it. :func:`keep_all_in_run` of one record."""
    return keep_all_in_run(run_dir, [result])[0]


def keep_all_in_run(run_dir: str | os.PathLike[str], results: Sequence[Result]) -> list[Path]:
    """The records of one evaluation of the run, ``RUN_DIR/evaluations/<result id>.json`` each, put in
    place together, whole or not at all (:func:`repro.files.writer.publish_all`). Where the run was
    evaluated so before, the earlier record is kept, never overwritten: copied first to
    ``evaluations/earlier/<result id>.<n>.json`` (n = 1, 2, ...), which the new record names
    (``provenance.extra.replaces``), and said in the log."""
    run_dir = Path(run_dir)
    staged = {}
    for result in results:
        path = run_dir / EVALUATIONS / f"{result.claim_id}.json"
        if path.is_file():
            earlier = _keep_earlier(run_dir, path, result.claim_id)
            result.provenance.extra["replaces"] = earlier.relative_to(path.parent).as_posix()
            log.warning("%s: the run was evaluated so before; the earlier record is kept as %s", path, earlier)
        staged[path] = (json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str) + "\n").encode()
    return publish_all(staged, within=run_dir)


def _keep_earlier(run_dir: Path, path: Path, result_id: str) -> Path:
    """Copy the record ``path`` to the first free ``evaluations/earlier/<result id>.<n>.json``."""
    folder = path.parent / EARLIER
    n = 1
    while (folder / f"{result_id}.{n}.json").exists():
        n += 1
    kept = folder / f"{result_id}.{n}.json"
    atomic_write_text(kept, read_text(path, "evaluation record", limit=TEXT_BYTES.hard, error=ResultError),
                      within=run_dir)
    return kept


def record(store: ResultStore, request: Request, measured: Measured, *, config: Mapping[str, Any], scale: str,
           decode: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None,
           extra: Mapping[str, Any] | None = None, name: str | None = None,
           run_dir: str | os.PathLike[str] | None = None) -> Path:
    """Write ``measured`` as the record of ``request.result_id`` under ``store`` (as ``<name>.json`` when
    the job owns its record, :meth:`ResultStore.write`), and into the run's own records when ``run_dir``
    is given (:func:`keep_in_run`); returns the store's path. The other arguments: :func:`result_of`."""
    result = result_of(request, measured, config=config, scale=scale, decode=decode, provenance=provenance,
                       extra=extra)
    if run_dir is not None:
        keep_in_run(run_dir, result)
    path = store.write(result, name)
    log.info("%s = %s (%s)", request.result_id, measured.value, scale)
    return path
