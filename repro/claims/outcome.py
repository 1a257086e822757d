"""What a checker can say about a claim: a measurement, or why there is none, and the outcome.

A checker measures and returns a :class:`Measurement`; when it cannot (the implementation
under audit does not expose the part, or the claim needs a run nobody has made) it raises
:class:`NotApplicable` or :class:`NotRun`. Two more reasons are not "cannot": an implementation
that *has no such part* (no positional encoding at all, a feed-forward layer without biases)
raises :class:`Absent`, a departure from the paper that fails the claim; and a comparison whose
outputs carry nothing to compare (empty, constant, end-of-sentence only) raises
:class:`Inconclusive`, which never passes. The engine turns each into one :class:`Outcome`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repro.claims.claim import Claim
    from repro.results.store import Result


class TextEnum(str, enum.Enum):
    """An enumeration whose members are their text: printed, hashed and compared as it."""

    def __str__(self) -> str:
        return self.value

    # Hash as the text, so that a mapping keyed by members finds them by their text and back.
    __hash__ = str.__hash__


class Outcome(TextEnum):
    """The outcome of checking one claim against one implementation (its value is what JSON shows)."""

    PASS = "pass"
    FAIL = "fail"
    #: outside the tolerance where the claim records that the paper contradicts itself
    INCONSISTENT = "paper inconsistent"
    NOT_RUN = "not run"
    NOT_APPLICABLE = "not applicable"
    ERROR = "error"
    #: the comparison ran on outputs that cannot show a difference (empty, constant, EOS only)
    INCONCLUSIVE = "inconclusive"
    #: a run's records show it did something else than the paper's statement, as its own recipe asked
    #: (a reduced run: "ran 600 of 100000 updates"): not a failure of the records, not the paper's either
    DEPARTS = "departs"

    @property
    def measured(self) -> bool:
        """The checker measured something (the record carries a value)."""
        return self in (Outcome.PASS, Outcome.FAIL, Outcome.INCONSISTENT, Outcome.DEPARTS)

    @property
    def broken(self) -> bool:
        """The implementation failed the claim, its checker broke, or the check could not tell
        (inconclusive): the claim ran and is not established."""
        return self in (Outcome.FAIL, Outcome.ERROR, Outcome.INCONCLUSIVE)


class NotApplicable(Exception):
    """The implementation under audit does not expose the part this claim needs."""


class Absent(Exception):
    """The implementation has no such part at all (as opposed to not exposing it): a departure
    from the paper. The claim fails, its reason starting "absent"."""


class Inconclusive(Exception):
    """The comparison a checker made cannot show what it tests: the outputs compared are empty,
    constant or end-of-sentence only (:func:`repro.checks.vacuity.require_informative`)."""


class NotRun(Exception):
    """The measurement needs a run (training, a cluster job) that has not produced a result."""


class Contradiction(Exception):
    """Two records of a run disagree, or a record disagrees with what the run's own recipe made it do
    (a logged rate off Eq. 3, a token count its batchers never gave, a vocabulary edited since): the
    claim fails, the message naming the file, the field and both values; ``value`` is what the record says."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


@dataclass
class Measurement:
    """What a checker measured. ``passed`` is set when the checker itself decides (e.g. an
    equation holding to tolerance); otherwise the claim's expected value and tolerance decide.
    ``departs``: the value is not the paper's because the run was asked for another (a run's
    records, :data:`Outcome.DEPARTS`); a value the tolerance accepts still passes."""

    value: Any
    passed: bool | None = None
    detail: str = ""
    unit: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    departs: bool = False


@dataclass
class CheckContext:
    """What a checker may use: the implementation under test and any stored results."""

    target: Any
    seed: int = 0
    results: dict[str, "Result"] = field(default_factory=dict)


__all__ = ["Absent", "CheckContext", "Contradiction", "Inconclusive", "Measurement", "NotApplicable", "NotRun",
           "Outcome"]
