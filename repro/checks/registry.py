"""Checkers: one function per kind of measurement, registered under the name claims use.

A checker receives the claim and a :class:`~repro.claims.outcome.CheckContext` and returns a
:class:`~repro.claims.outcome.Measurement`. It measures; it never restates the paper. When it
cannot run (the implementation under audit lacks the part, or a metric has no run yet) it
raises ``NotApplicable`` or ``NotRun``, and the claim is reported so, never as passed.
"""

from __future__ import annotations

from collections.abc import Callable

from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement

CheckerFn = Callable[[Claim, CheckContext], Measurement]
CHECKERS: dict[str, CheckerFn] = {}
#: Checkers that measure the implementation under audit (the others measure the paper's own
#: arithmetic or mathematics, or read stored runs, whatever the implementation).
AUDITING: set[str] = set()
#: Checkers whose value is not a measurement of behaviour: ``setting`` (they read configuration),
#: ``paper arithmetic`` (they compute on the paper's own numbers) or ``run`` (they read the records
#: of one run, ``repro check --run``). A claim naming one must say so in its basis
#: (:func:`basis_allowed`), so that coverage never counts a statement as measured on the strength of
#: a setting read, and a run's records are never read as the code's behaviour.
EVIDENCE: dict[str, str] = {}


def checker(name: str, *, audits: bool = True, reads_results: bool = False,
            evidence: str | None = None) -> Callable[[CheckerFn], CheckerFn]:
    """Register ``fn`` as the checker that claims name ``name``; ``audits=False`` for checkers
    that do not look at the implementation (they are left out of ``repro audit``);
    ``reads_results=True`` for checkers that derive their value from stored results (their
    records are not stored again as measurements); ``evidence`` (``setting``, ``paper
    arithmetic`` or ``run``) for checkers that measure no behaviour of the code."""

    def register(fn: CheckerFn) -> CheckerFn:
        if name in CHECKERS:
            raise RuntimeError(f"checker '{name}' registered twice")
        if evidence not in (None, "setting", "paper arithmetic", "run"):
            raise RuntimeError(f"checker '{name}': evidence must be 'setting', 'paper arithmetic' or 'run', "
                               f"got {evidence!r}")
        fn.reads_results = reads_results  # type: ignore[attr-defined]
        CHECKERS[name] = fn
        if audits:
            AUDITING.add(name)
        if evidence is not None:
            EVIDENCE[name] = evidence
        return fn

    return register


def basis_allowed(claim: Claim) -> str | None:
    """Why ``claim``'s basis overstates what its checker measures, or ``None`` when it does not."""
    evidence = EVIDENCE.get(claim.checker)
    if evidence is not None and claim.basis != evidence:
        return (f"its checker '{claim.checker}' gives {evidence} evidence, not '{claim.basis}': set basis = "
                f"\"{evidence}\"")
    if evidence is None and claim.basis == "run":
        return f"its checker '{claim.checker}' reads no run's records: basis 'run' is for the checkers of a run"
    return None


def audits_implementation(name: str) -> bool:
    """Whether the checker ``name`` measures the implementation under test."""
    return name in AUDITING
