"""Running claims: one checker per claim, against one implementation (an adapter).

A claim's outcome is ``pass`` or ``fail`` when its checker measured something (``paper
inconsistent`` instead of ``fail`` when the claim records that the paper contradicts itself
there, so no implementation can match every figure), ``not run`` when it needs a run that has
not happened, ``not applicable`` when the implementation under audit does not expose the part
it needs, ``fail`` with the reason "absent" when the implementation has no such part at all (a
departure), ``inconclusive`` when the outputs compared could not show a difference, and
``error`` when the checker or the adapter broke (the record names the adapter method that
raised). One claim's error never stops the others. A NaN or an infinity is always ``fail``:
met by a comparison (:class:`repro.claims.compare.NonFinite`) or in the measured value, whatever
the checker decided.

The engine is generic: it is handed the checkers (``repro.checks`` binds its registry) and the
implementation (an adapter, :mod:`repro.audit.adapter`).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import numbers
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from repro.claims import interrupts
from repro.claims.claim import Claim
from repro.claims.compare import NonFinite, is_finite
from repro.claims.outcome import (Absent, CheckContext, Contradiction, Inconclusive, Measurement, NotApplicable, NotRun,
                                  Outcome)
from repro.claims.seeding import claim_seed, seeded
from repro.model.arithmetic import IEEE_FP32, ieee_fp32

if TYPE_CHECKING:
    from repro.results.store import Result

#: Every outcome, in the order summaries print them.
STATUSES = tuple(o.value for o in Outcome)

#: What an absent part is measured as (:class:`~repro.claims.outcome.Absent`).
ABSENT = "absent"

CheckerFn = Callable[[Claim, CheckContext], Measurement]


@dataclass
class CheckRecord:
    claim: Claim
    status: Outcome
    measured: Any = None
    detail: str = ""
    unit: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: The value was derived from stored results (a metric, a relation), not measured by the check.
    derived: bool = False
    #: The arithmetic the check ran in (:mod:`repro.model.arithmetic`).
    arithmetic: str = IEEE_FP32

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {
            "id": c.id,
            "source": c.source,
            "kind": c.kind,
            "basis": c.basis,
            "scale": c.scale,
            "statement": c.statement,
            "status": self.status.value,
            "expected": c.expected,
            "tolerance": c.tolerance or None,
            "rounding": c.rounding,
            "measured": self.measured,
            "unit": self.unit or c.unit,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
            "arithmetic": self.arithmetic,
        }


class _TracingAdapter:
    """Wraps an adapter to remember which method was called last, for error messages."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.last_method: str | None = None

    @property
    def name(self) -> str:
        return self._target.name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if not callable(value) or attr.startswith("_"):
            return value

        def traced(*args: Any, **kwargs: Any) -> Any:
            self.last_method = attr
            return value(*args, **kwargs)

        return traced


def run_claim(claim: Claim, check: CheckerFn, target: Any, results: Mapping[str, "Result"] | None = None,
              seed: int = 0) -> CheckRecord:
    """Run ``check`` (the claim's checker) for ``claim`` against ``target``, in IEEE fp32 whatever the
    device and whatever the caller set (:func:`repro.model.arithmetic.ieee_fp32`): a verdict that
    changed with the hardware would not be a verdict. torch's global random state (the weights of
    every model the check builds, its dropout masks) is seeded from ``seed`` and the claim's id
    (:mod:`repro.claims.seeding`) and restored after: a verdict that changed with what ran before
    would not be one either."""
    with ieee_fp32(), seeded(claim_seed(seed, claim.id)):
        return _run_claim(claim, check, target, results, seed)


def _run_claim(claim: Claim, check: CheckerFn, target: Any, results: Mapping[str, "Result"] | None,
               seed: int) -> CheckRecord:
    traced = _TracingAdapter(target)
    ctx = CheckContext(target=traced, seed=seed, results=dict(results or {}))
    start = time.perf_counter()
    interrupts.watch()
    try:
        measurement = check(claim, ctx)
    except NotApplicable as why:
        return CheckRecord(claim, Outcome.NOT_APPLICABLE, detail=str(why), seconds=time.perf_counter() - start)
    except NotRun as why:
        return CheckRecord(claim, Outcome.NOT_RUN, detail=str(why), seconds=time.perf_counter() - start)
    except Absent as why:  # the implementation has no such part: a departure, never "not applicable"
        return CheckRecord(claim, Outcome.FAIL, ABSENT, f"{ABSENT}: {why}", seconds=time.perf_counter() - start,
                           extra={ABSENT: str(why)})
    except Inconclusive as why:
        return CheckRecord(claim, Outcome.INCONCLUSIVE, detail=str(why), seconds=time.perf_counter() - start)
    except Contradiction as why:  # a run's records contradict each other or its recipe: a failure
        return CheckRecord(claim, Outcome.FAIL, why.value, str(why), seconds=time.perf_counter() - start)
    except NonFinite as why:  # a NaN or an infinity met on the way: a departure, never a pass
        return CheckRecord(claim, Outcome.FAIL, None,
                           f"{why}" + (f" (after adapter method '{traced.last_method}')" if traced.last_method else ""),
                           seconds=time.perf_counter() - start)
    except Exception as err:  # noqa: BLE001 - a broken adapter must not stop the audit
        where = (f"adapter method '{traced.last_method}' of {target.name}" if traced.last_method
                 else f"checker '{claim.checker}'")
        return CheckRecord(
            claim, Outcome.ERROR, detail=f"claim {claim.id}: {where} raised {type(err).__name__}: {err}",
            seconds=time.perf_counter() - start,
        )
    except (SystemExit, KeyboardInterrupt) as err:  # the implementation may not end the run; the user's Ctrl-C does
        if interrupts.from_user(err):
            raise
        where = (f"adapter method '{traced.last_method}' of {target.name}" if traced.last_method
                 else f"checker '{claim.checker}'")
        return CheckRecord(
            claim, Outcome.ERROR, detail=f"claim {claim.id}: {where} raised {type(err).__name__}({err}); the code "
                                         "under test may not end the run", seconds=time.perf_counter() - start)
    if measurement.passed is None and (mismatch := _shape_mismatch(claim, measurement.value)):
        return CheckRecord(claim, Outcome.ERROR, measurement.value, mismatch, measurement.unit,
                           time.perf_counter() - start, measurement.extra)
    passed = measurement.passed if measurement.passed is not None else claim.within(measurement.value)
    explained = claim.explained_by_inconsistency(measurement.value)
    status = Outcome.PASS if passed else (Outcome.INCONSISTENT if explained else Outcome.FAIL)
    if measurement.departs and not passed:
        status = Outcome.DEPARTS
    if not passed and claim.inconsistency and not explained:
        measurement.detail = (f"{measurement.detail}; beyond the paper's own inconsistency "
                              f"({_bound_text(claim)}): a failure").lstrip("; ")
    if not is_finite(measurement.value):  # whatever the checker decided: NaN and infinity never pass
        status = Outcome.FAIL
    return CheckRecord(
        claim, status, measurement.value, measurement.detail,
        measurement.unit, time.perf_counter() - start, measurement.extra,
        derived=bool(getattr(check, "reads_results", False)),
    )


def _shape_mismatch(claim: Claim, value: Any) -> str | None:
    """Why the paper's value and the measurement cannot be compared (a list in the claims file against
    one measured number: the file describes another measurement than its checker makes), or None.
    Compared anyway, they would read as unequal: a ``fail`` verdict on a defect of the claims file.
    One paper number against a measured list is comparable (:meth:`Claim.within`: each value must
    agree), so a checker that lists its values where they disagree reads ``fail``, never ``error``."""
    def shape(v: Any) -> str | None:
        if isinstance(v, (list, tuple)):
            return f"a list of {len(v)} value(s)"
        return "one number" if isinstance(v, numbers.Number) else None
    expected, measured = shape(claim.expected), shape(value)
    if expected is None or measured is None or not expected.startswith("a list") or measured.startswith("a list"):
        return None
    return (f"{claim.file}: claim {claim.id}: field 'expected' is {expected}, but checker '{claim.checker}' "
            f"measures {measured} ({value!r}); the claim and its checker disagree on what is measured")


def _bound_text(claim: Claim) -> str:
    bound = claim.inconsistency_bound
    if not bound:
        return "no size documented"
    return " or ".join(f"{'±' + format(v, 'g') if k == 'abs' else '±' + format(100 * v, 'g') + '%'}"
                       for k, v in bound.items()) + f" about {claim.expected}"


def run_claims(
    claims: Iterable[Claim],
    checkers: Mapping[str, CheckerFn],
    target: Any,
    results: Mapping[str, "Result"] | None = None,
    seed: int = 0,
    on_record: Callable[[CheckRecord], None] | None = None,
) -> list[CheckRecord]:
    """Each claim's checker (looked up in ``checkers`` by the claim's ``checker`` name) against ``target``."""
    records = []
    for claim in claims:
        record = run_claim(claim, checkers[claim.checker], target, results, seed)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a SLURM task's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # no affinity on this platform
        return os.cpu_count() or 1


#: What each worker process of :func:`run_claims_in_processes` holds: (checkers, target, results, seed).
_WORKER: dict[str, Any] = {}


def _start_worker(checkers_module: str, make_target: Callable[[], Any], results: Mapping[str, "Result"] | None,
                  seed: int, threads: int) -> None:
    torch.set_num_threads(threads)
    checkers = importlib.import_module(checkers_module).CHECKERS
    _WORKER.update(checkers=checkers, target=make_target(), results=results, seed=seed)


def _run_in_worker(claim: Claim) -> CheckRecord:
    return run_claim(claim, _WORKER["checkers"][claim.checker], _WORKER["target"], _WORKER["results"], _WORKER["seed"])


def run_claims_in_processes(
    claims: Iterable[Claim],
    checkers_module: str,
    make_target: Callable[[], Any],
    jobs: int,
    results: Mapping[str, "Result"] | None = None,
    seed: int = 0,
    on_record: Callable[[CheckRecord], None] | None = None,
) -> list[CheckRecord]:
    """:func:`run_claims` spread over ``jobs`` worker processes (spawned: a process that has touched a
    GPU cannot be forked), each building its own target with ``make_target`` (picklable) and looking
    checkers up in ``checkers_module``'s ``CHECKERS``. Each claim is seeded from its id
    (:func:`run_claim`), so a record is the one a single process makes, whichever worker ran it and
    whatever ran before it there; the records come back in the claims' order, ``on_record`` called in
    that order. The cores are shared: each worker computes on ``cores // workers`` threads, and there are
    never more workers than cores (each holds its own torch: ``--jobs 100000`` spawned one process per
    claim, hundreds of them, until the machine ran out of memory)."""
    claims = list(claims)
    workers = min(jobs, len(claims), usable_cores())
    if workers <= 1:
        checkers = importlib.import_module(checkers_module).CHECKERS
        return run_claims(claims, checkers, make_target(), results, seed, on_record)
    threads = max(1, usable_cores() // workers)
    records: list[CheckRecord] = []
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker, initargs=(checkers_module, make_target, results, seed, threads)) as pool:
        for record in pool.map(_run_in_worker, claims):
            records.append(record)
            if on_record is not None:
                on_record(record)
    return records


def count(records: Iterable[CheckRecord]) -> dict[str, int]:
    """How many records have each outcome (keyed by the outcome's text)."""
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    return counts
