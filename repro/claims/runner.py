"""Running claims: one checker per claim, against one implementation (an adapter).

A claim's status is ``pass`` or ``fail`` when its checker measured something (``paper
inconsistent`` instead of ``fail`` when the claim records that the paper contradicts itself
there, so no implementation can match every figure), ``not run``
when it needs a run that has not happened, ``not applicable`` when the implementation under
audit lacks the part it needs, and ``error`` when the checker or the adapter broke (the
record names the adapter method that raised). One claim's error never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from repro.audit.adapter import Adapter
from repro.checks.registry import CheckContext, Measurement, NotApplicable, NotRun, get_checker
from repro.claims.claim import Claim
from repro.results.store import Result

STATUSES = ("pass", "fail", "paper inconsistent", "not run", "not applicable", "error")


@dataclass
class CheckRecord:
    claim: Claim
    status: str
    measured: Any = None
    detail: str = ""
    unit: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {
            "id": c.id,
            "source": c.source,
            "kind": c.kind,
            "scale": c.scale,
            "statement": c.statement,
            "status": self.status,
            "expected": c.expected,
            "tolerance": c.tolerance or None,
            "rounding": c.rounding,
            "measured": self.measured,
            "unit": self.unit or c.unit,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


class _TracingAdapter:
    """Wraps an adapter to remember which method was called last, for error messages."""

    def __init__(self, target: Adapter) -> None:
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


def run_claim(claim: Claim, target: Adapter, results: dict[str, Result], seed: int = 0) -> CheckRecord:
    traced = _TracingAdapter(target)
    ctx = CheckContext(target=traced, seed=seed, results=results)  # type: ignore[arg-type]
    start = time.perf_counter()
    try:
        measurement: Measurement = get_checker(claim.checker)(claim, ctx)
    except NotApplicable as why:
        return CheckRecord(claim, "not applicable", detail=str(why), seconds=time.perf_counter() - start)
    except NotRun as why:
        return CheckRecord(claim, "not run", detail=str(why), seconds=time.perf_counter() - start)
    except Exception as err:  # noqa: BLE001 - a broken adapter must not stop the audit
        where = f"adapter method '{traced.last_method}' of {target.name}" if traced.last_method else f"checker '{claim.checker}'"
        return CheckRecord(
            claim, "error", detail=f"claim {claim.id}: {where} raised {type(err).__name__}: {err}",
            seconds=time.perf_counter() - start,
        )
    passed = measurement.passed if measurement.passed is not None else claim.within(measurement.value)
    status = "pass" if passed else ("paper inconsistent" if claim.inconsistency else "fail")
    return CheckRecord(
        claim, status, measurement.value, measurement.detail,
        measurement.unit, time.perf_counter() - start, measurement.extra,
    )


def run_checks(
    claims: Iterable[Claim],
    target: Adapter | None = None,
    results: dict[str, Result] | None = None,
    seed: int = 0,
    on_record: Callable[[CheckRecord], None] | None = None,
) -> list[CheckRecord]:
    """Run each claim's checker against ``target`` (default: repro's own implementation)."""
    if target is None:
        from repro.audit.repro_adapter import ReproAdapter

        target = ReproAdapter()
    records = []
    for claim in claims:
        record = run_claim(claim, target, results or {}, seed)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records
