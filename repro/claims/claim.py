"""One claim of the paper, as written in ``claims/*.toml``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from repro.claims.compare import is_finite, within

KINDS = ("equation", "hyperparameter", "count", "complexity", "cost", "metric", "relation", "invariant", "structure")
SCALES = ("local", "cluster")
#: The kind of evidence a claim's measurement is: a ``setting`` read from the code's configuration,
#: a ``behaviour`` measured on the code that runs, the ``result`` of a run (a metric), ``paper
#: arithmetic``: a computation on the paper's own numbers that touches no code of the project (a
#: check of the paper's consistency, printed apart from what is measured), or ``run``: observed on the
#: records of a run that happened (its log, checkpoints, vocabulary, corpus and evaluations; ``repro
#: check --run DIR``).
BASES = ("setting", "behaviour", "result", "paper arithmetic", "run")


@dataclass(frozen=True)
class Claim:
    """A machine-checkable statement of the paper.

    ``expected`` is the paper's value (number, string, boolean, list or table). A numeric
    claim passes when the measurement lies within ``tolerance`` (``abs`` and/or ``rel``) of it,
    or, with ``rounding``, when the measurement rounded to that step equals the paper's figure
    (the paper prints e.g. "65" parameters ×10^6: rounding = 1). ``bound`` = ``at_least`` or
    ``at_most`` turns the value into a one-sided target (used for the project's own local targets).
    ``target`` marks ``expected`` as the project's own target, not a number of the paper: every
    report prints it as "target", never as "paper".
    """

    id: str
    source: str
    statement: str
    kind: str
    scale: str
    checker: str
    file: str
    expected: Any = None
    tolerance: dict[str, float] = field(default_factory=dict)
    rounding: float | None = None
    unit: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    bound: str | None = None
    notes: str = ""
    inconsistency: str = ""
    #: The documented size of the paper's own inconsistency on a numeric claim (``abs`` / ``rel``
    #: about ``expected``, as ``tolerance``): a failure within it reads "paper inconsistent", one
    #: beyond it is a failure like any other (:meth:`explained_by_inconsistency`).
    inconsistency_bound: dict[str, float] = field(default_factory=dict)
    basis: str = ""
    target: bool = False

    def __post_init__(self) -> None:
        if not self.basis:  # unstated: a metric is a run's result, a recipe value a setting, the rest behaviour
            basis = "result" if self.kind == "metric" else "setting" if self.checker == "recipe.value" else "behaviour"
            object.__setattr__(self, "basis", basis)

    @property
    def value_label(self) -> str:
        """What ``expected`` is: ``"target"`` for the project's own target, else ``"paper"``."""
        return "target" if self.target else "paper"

    def explained_by_inconsistency(self, measured: Any) -> bool:
        """Whether a ``measured`` value outside the tolerance is what the paper's own inconsistency
        explains: the claim records one, and a numeric value lies within ``inconsistency_bound`` of
        the paper's figure (a claim without a numeric figure, a relation, has no size: its recorded
        inconsistency explains any failure). A NaN or an infinity is never explained."""
        if not self.inconsistency or not is_finite(measured):
            return False
        numeric = isinstance(self.expected, (int, float)) and not isinstance(self.expected, bool)
        if not numeric:
            return True
        if isinstance(measured, bool) or not isinstance(measured, (int, float)) or not self.inconsistency_bound:
            return False
        return within(measured, self.expected, abs_tol=self.inconsistency_bound.get("abs", 0.0),
                      rel_tol=self.inconsistency_bound.get("rel", 0.0))

    def within(self, measured: Any) -> bool:
        """Whether ``measured`` agrees with the paper's value under this claim's tolerance."""
        expected = self.expected
        if isinstance(expected, bool) or isinstance(measured, bool):
            return is_finite(measured) and bool(measured) == bool(expected)  # bool(nan) is True
        if isinstance(expected, (int, float)) and isinstance(measured, (int, float)):
            return within(measured, expected, abs_tol=self.tolerance.get("abs", 0.0),
                          rel_tol=self.tolerance.get("rel", 0.0), rounding=self.rounding, bound=self.bound)
        if isinstance(expected, (int, float)) and isinstance(measured, (list, tuple)):
            # one paper value measured several times (a checker's values that disagree, one per run,
            # session or checkpoint): each must agree, and an empty list is no measurement
            return bool(measured) and all(isinstance(m, (int, float)) and not isinstance(m, bool)
                                          and self.within(m) for m in measured)
        if isinstance(expected, list) and isinstance(measured, list):
            return len(expected) == len(measured) and all(
                _scalar_within(self, e, m) for e, m in zip(expected, measured)
            )
        if not is_finite(measured):  # a table or anything else holding a NaN or an infinity
            return False
        return measured == expected


def _scalar_within(claim: Claim, expected: Any, measured: Any) -> bool:
    return dataclasses.replace(claim, expected=expected).within(measured)
