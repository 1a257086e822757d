"""Checkers: one function per kind of measurement, registered under the name claims use.

A checker receives the claim and a :class:`CheckContext` and returns a :class:`Measurement`.
It measures; it never restates the paper. When it cannot run (the implementation under audit
lacks the part, or a metric has no run yet) it raises :class:`NotApplicable` or
:class:`NotRun`, and the claim is reported so, never as passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repro.audit.adapter import Adapter
    from repro.claims.claim import Claim
    from repro.results.store import Result


class NotApplicable(Exception):
    """The implementation under audit does not expose the part this claim needs."""


class NotRun(Exception):
    """The measurement needs a run (training, a cluster job) that has not produced a result."""


@dataclass
class Measurement:
    """What a checker measured. ``passed`` is set when the checker itself decides (e.g. an
    equation holding to tolerance); otherwise the claim's expected value and tolerance decide."""

    value: Any
    passed: bool | None = None
    detail: str = ""
    unit: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckContext:
    """What a checker may use: the implementation under test and any stored results."""

    target: "Adapter"
    seed: int = 0
    results: dict[str, "Result"] = field(default_factory=dict)


CheckerFn = Callable[["Claim", CheckContext], Measurement]
CHECKERS: dict[str, CheckerFn] = {}
#: Checkers that measure the implementation under audit (the others measure the paper's own
#: arithmetic or mathematics, or read stored runs, whatever the implementation).
AUDITING: set[str] = set()


def checker(name: str, *, audits: bool = True) -> Callable[[CheckerFn], CheckerFn]:
    """Register ``fn`` as the checker that claims name ``name``; ``audits=False`` for checkers
    that do not look at the implementation (they are left out of ``repro audit``)."""

    def register(fn: CheckerFn) -> CheckerFn:
        if name in CHECKERS:
            raise RuntimeError(f"checker '{name}' registered twice")
        CHECKERS[name] = fn
        if audits:
            AUDITING.add(name)
        return fn

    return register


def audits_implementation(name: str) -> bool:
    """Whether the checker ``name`` measures the implementation under test."""
    get_checker(name)
    return name in AUDITING


def get_checker(name: str) -> CheckerFn:
    import repro.checks  # noqa: F401  (importing the package registers every checker)

    try:
        return CHECKERS[name]
    except KeyError:
        raise KeyError(f"no checker named '{name}'") from None
