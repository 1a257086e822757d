"""The report's section per run checked: "this run against the paper" (:mod:`repro.checks.run_check`).

Every run the report draws from (named by a result's ``run_dir``, or given with ``repro report --runs``)
that is on this machine is checked on its own records: each statement of the paper its records can
show, the run's value, the paper's, the verdict (pass, departs, fail, needs another run) and why.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from repro.checks.run_check import RunCheck, check_run
from repro.claims.claim import Claim
from repro.observed.judge import verdict
from repro.report.runs import Run
from repro.report.values import show
from repro.train.run_record import RUN_RECORD

COLUMNS = ("statement", "source", "paper", "this run", "verdict", "why")


def checked_runs(runs: Sequence[Run], claims: Sequence[Claim]) -> list[RunCheck]:
    """The runs on this machine that hold a training run's records, each checked on them."""
    return [check_run(run.path, claims=claims) for run in runs
            if run.path.is_dir() and ((run.path / RUN_RECORD).is_file() or any((run.path / "checkpoints").glob("*.pt")))]


def table(check: RunCheck) -> pd.DataFrame:
    rows = [{"statement": r.claim.id, "source": r.claim.source, "paper": show(r.claim.expected),
             "this run": show(r.measured), "verdict": verdict(r),
             "why": r.detail.removeprefix("needs another run: ")} for r in check.records]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def note(check: RunCheck) -> str:
    counts: dict[str, int] = {}
    for r in check.records:
        counts[verdict(r)] = counts.get(verdict(r), 0) + 1
    return (f"{check.describe()}. Checked on the run's own records (repro check --run {check.files.path}): "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + ".")
