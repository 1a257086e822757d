"""How a statement of the paper is judged on a run's records: about this run or not, then pass, departs or fail.

- A claim names the paper's jobs it is about (``params.about``: ``job``, ``experiment``, ``model``,
  ``pair``, ``table``; :class:`repro.observed.counterpart.PaperJob`); a run that stands for another job,
  or for none, reads "needs another run", saying what the statement is about and what the run is.
- The run's value within the claim's tolerance of the paper's passes.
- Otherwise, when the run's own recipe asked for something else than the paper (``departures``: what,
  in words), the run departs: its records agree with what it was asked, and that is not the paper.
- Otherwise the run was asked for the paper's setting and did something else: a failure. Records that
  contradict each other or the recipe are failures before any of this (:class:`~repro.claims.outcome.Contradiction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repro.claims.claim import Claim
from repro.claims.outcome import Measurement, NotRun
from repro.observed.counterpart import PaperJob
from repro.observed.history import stated_as_checkpointed

#: The keys of ``params.about`` (the attributes of :class:`PaperJob` a statement may be about).
ABOUT_KEYS = ("experiment", "job", "model", "pair", "table")


def _about_text(about: dict[str, Any]) -> str:
    return ", ".join(f"{k} {' or '.join(map(str, v))}" for k, v in about.items())


def paper_job(claim: Claim, files: Any) -> PaperJob | None:
    """The paper's job the run stands for, when the claim is about it; NotRun ("needs another run")
    naming both when it is not. A claim about no job in particular takes any run (None: the run stands
    for none of the paper's jobs). A run whose ``run.json`` states another recipe than its checkpoint
    holds contradicts itself: every claim about it fails, naming the field
    (:func:`repro.observed.history.stated_as_checkpointed`)."""
    about = claim.params.get("about") or {}
    job = files.paper
    if not about:
        stated_as_checkpointed(files)
        return job
    if job is None:
        raise NotRun(f"needs another run: the statement is about the paper's {_about_text(about)}; this run's recipe "
                     f"'{files.recipe.get('name') or 'unnamed'}' stands for none of the paper's jobs")
    attributes = job.attributes()
    for key, allowed in about.items():
        if attributes.get(key) not in allowed:
            raise NotRun(f"needs another run: the statement is about the paper's {_about_text(about)}; this run stands "
                          f"for {job.job} ({key} {attributes.get(key)})")
    stated_as_checkpointed(files)
    return job


def verdict(record: Any) -> str:
    """A check record's verdict as a run check says it: "needs another run" where the engine says "not run"."""
    status = str(record.status)
    return "needs another run" if status == "not run" and record.claim.basis == "run" else status


def judge(claim: Claim, value: Any, detail: str, departures: Sequence[str] = (), unit: str | None = None,
          extra: dict[str, Any] | None = None) -> Measurement:
    """Pass within the tolerance; departs when the run's recipe asked for another value (``departures``
    say what, in words); fail otherwise (module docstring)."""
    if claim.within(value):
        return Measurement(value, passed=True, detail=detail, unit=unit, extra=extra or {})
    if departures:
        return Measurement(value, passed=False, departs=True, unit=unit, extra=extra or {},
                           detail=f"{detail}; the run was asked for it: {'; '.join(departures)}")
    return Measurement(value, passed=False, unit=unit, extra=extra or {},
                       detail=f"{detail}; the run's recipe is the paper's here, so this is not a departure of the "
                              "recipe: the run did not do what the paper says")
