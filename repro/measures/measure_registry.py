"""The registry of measurements: a name of the catalogue (:mod:`repro.claims.measure_names`) -> the code that measures it.

A metric claim names its measurement (``params.measure``, ``params.split``); a job that trained a
model asks for each of its claims a :class:`Request` and hands it, with what it has
(:class:`Trained`: the model, its vocabulary and data set, the runtime, the search settings, the
run), to :func:`measure`, which calls the registered function by name. The function returns a
:class:`Measured`: the value, its unit, interval and protocol, and what the record says about it;
:func:`repro.measures.recording.record` stores it. The local main job, the local parser job and the
cluster jobs all measure this way, so that one name is measured by one piece of code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from repro.claims.claim import Claim
from repro.claims.measure_names import MEASURES, MODEL_MEASURES, RUN_MEASURES
from repro.content_hash import file_sha256
from repro.data.corpora import Dataset
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.errors import ConfigError
from repro.runtime import Runtime


@dataclass(frozen=True)
class Request:
    """One record a job is to store: its id, the measurement named by its claim and the split it reads.

    ``claim`` is the claim whose params name the measurement: the record's own id, except for the
    records a claim's measurement is taken for under another id (a seed of Table 3 at a named scale,
    ``table3-small.bleu.A-h1``, measured as ``table3.bleu.A-h1``) and for the local runs' measurements
    without a claim (None)."""

    result_id: str
    measure: str
    split: str | None = None
    claim: str | None = None

    def __post_init__(self) -> None:
        if self.measure not in MEASURES:
            raise ConfigError(f"{self.result_id}: unknown measurement '{self.measure}' (known: {', '.join(MEASURES)})")
        if self.split is None and self.measure not in RUN_MEASURES:
            raise ConfigError(f"{self.result_id}: measurement '{self.measure}' needs the split it reads (params.split)")

    def to_dict(self) -> dict[str, Any]:
        return {"result_id": self.result_id, "measure": self.measure, "split": self.split, "claim": self.claim}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> "Request":
        if not isinstance(data, Mapping) or not isinstance(data.get("result_id"), str) \
                or not isinstance(data.get("measure"), str):
            raise ConfigError(f"{source}: a measurement must be an object with 'result_id' and 'measure' (got {data!r})")
        try:
            return cls(data["result_id"], data["measure"], data.get("split"), data.get("claim"))
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None

    @classmethod
    def of_claim(cls, claim: Claim, result_id: str | None = None) -> "Request":
        """The measurement ``claim`` names, stored under ``result_id`` (default: the claim's id)."""
        measure = claim.params.get("measure")
        if not isinstance(measure, str):
            raise ConfigError(f"{claim.file}: claim '{claim.id}': field 'params.measure': a metric claim a job "
                              f"measures must name its measurement (one of {', '.join(MEASURES)})")
        return cls(result_id or claim.id, measure, claim.params.get("split"), claim.id)


@dataclass
class Trained:
    """What a job has when it measures: the trained model, its vocabulary and data set, where it runs,
    its search settings, and the run that trained it.

    ``summary`` holds the run's ``steps``, ``elapsed_s`` and ``resumed_from``; ``files`` where a
    measurement writes what it produced (``hypotheses``: BLEU's translations, ``outputs``: the
    parser's raw outputs, ``trees``: its repaired trees); ``limit`` measures the first sentences of
    the split only; ``intervals`` asks for the bootstraps a measurement makes only on request
    (perplexity's, over sentences); ``checkpoint`` is the file the model was loaded from and
    ``averaged_from`` the checkpoints averaged into it (Section 6.1), as that file names them, and
    ``averaged`` their identities as that file keeps them (name, update, SHA-256, when written:
    :func:`repro.train.average.averaged_identities`; empty for a file written before files kept them)."""

    model: Any
    vocab: SharedVocab | None
    dataset: Dataset | None
    runtime: Runtime
    search: DecodeSettings
    run_dir: Path
    checkpoints_averaged: int = 1
    summary: Mapping[str, Any] = field(default_factory=dict)
    devices: int = 1
    files: Mapping[str, Path] = field(default_factory=dict)
    limit: int | None = None
    intervals: bool = False
    checkpoint: Path | None = None
    averaged_from: tuple[str, ...] = ()
    averaged: tuple[dict[str, Any], ...] = ()
    #: decodes already made, by split and output file, with the model and search that made them: the
    #: measurements that score one decode (the two BLEU protocols) share it
    decodes: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def checkpoint_sha256(self) -> str | None:
        """The SHA-256 of the file the model was loaded from (read once, whatever is measured of it)."""
        return file_sha256(self.checkpoint) if self.checkpoint is not None else None

    def evaluated(self) -> dict[str, Any]:
        """What every measurement of this model records of how it was taken: the search it decodes with
        (a measurement that searched replaces it by the search its decode ran), the checkpoint it was
        loaded from (name and SHA-256) and the checkpoints averaged into it (names, and identities
        where the averaged file keeps them)."""
        return {"decode": self.search.to_dict(), "evaluated_checkpoint": self.checkpoint.name if self.checkpoint else None,
                **({"evaluated_sha256": self.checkpoint_sha256} if self.checkpoint is not None else {}),
                "averaged_from": list(self.averaged_from), "checkpoints_averaged": self.checkpoints_averaged,
                **({"averaged": [dict(a) for a in self.averaged]} if self.averaged else {})}


@dataclass(frozen=True)
class Measured:
    """What a measurement found: the value and what its record says about it.

    ``provenance`` goes to the record's ``provenance.extra``, ``extra`` to its ``extra``; ``digits``
    is how the value and its interval are rounded; ``raw`` is the evaluation it came from (a
    :class:`~repro.eval.translation.BleuEvaluation`, a :class:`~repro.eval.perplexity.Perplexity`, a
    :class:`~repro.parsing.scoring.ParseScore`...), for the job's own summary, never stored;
    ``seconds`` the wall time of its phases (``decode``, ``score``)."""

    value: float
    unit: str
    detail: str
    dataset: str
    digits: int
    ci95: tuple[float, float] | None = None
    bleu_signature: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    raw: Any = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def finite(self) -> bool:
        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool) and math.isfinite(self.value)


#: A measurement: what the job has and the request -> what it measured, or None when there is nothing
#: to store (a step time of a run that made no update).
Measure = Callable[[Trained, Request], "Measured | None"]

#: name -> the function that measures it; filled by the modules of this package (:func:`measurement`).
MEASUREMENTS: dict[str, Measure] = {}


def measurement(name: str) -> Callable[[Measure], Measure]:
    """Register the decorated function as the code of the catalogue's measurement ``name``."""
    if name not in MEASURES:
        raise ValueError(f"'{name}' is not a measurement of the catalogue (repro.claims.measure_names)")

    def register(fn: Measure) -> Measure:
        if name in MEASUREMENTS:
            raise ValueError(f"measurement '{name}' registered twice")
        MEASUREMENTS[name] = fn
        return fn
    return register


def measure(trained: Trained, request: Request) -> Measured | None:
    """Measure ``request`` on ``trained`` with the registered code of its measurement (looked up at each
    call); a measurement of the model records how it was taken (:meth:`Trained.evaluated`, on the main
    rank, which writes the record). Called on every rank of a job: the work is split over the ranks
    where it can be."""
    try:
        fn = MEASUREMENTS[request.measure]
    except KeyError:
        raise ConfigError(f"{request.result_id}: no code registered for measurement '{request.measure}'") from None
    return how_taken(trained, request, fn(trained, request))


def how_taken(trained: Trained, request: Request, found: Measured | None) -> Measured | None:
    """``found`` with what its record says of how a measurement of the model was taken
    (:meth:`Trained.evaluated`, what the measurement recorded itself winning), on the main rank,
    which writes the record."""
    if found is None or request.measure not in MODEL_MEASURES or not trained.runtime.is_main:
        return found
    return dataclasses.replace(found, provenance={**trained.evaluated(), **found.provenance})
