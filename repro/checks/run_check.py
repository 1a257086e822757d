"""``repro check --run DIR``: every statement of the paper a run's own records can show, checked on them.

The claims are those of basis ``run`` (``claims/observed.toml``: the rates it logged, the tokens of its
updates, their number, its optimizer, its model, vocabulary and corpus, its checkpoints and the ones
its evaluation averaged, its search, BLEU protocol and scored test set, its hardware) and the paper's
figures the job it stands for measures (Table 2's BLEU, a row of Table 3, Table 4's F1, Section 5.2's
step time), read off the run's own evaluation records (checker ``observed.metric``, basis ``run``).
Each is judged by :mod:`repro.observed.judge`: pass, departs (the run was asked for something else,
with its value and the paper's), fail (its records contradict each other or its recipe), or "needs
another run" with the reason. The run's files are read first (:mod:`repro.observed.run_files`): a
malformed record stops the check, naming its file and field (exit 2). A run whose last session was
interrupted (:mod:`repro.observed.interruption`) is checked up to its newest checkpoint, and says so.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from repro.checks import run_checks, select_claims
from repro.claims.claim import Claim
from repro.claims.runner import CheckRecord
from repro.observed.run_files import RunFiles


@dataclass
class RunCheck:
    """The records of one run and the verdict on each statement about it."""

    files: RunFiles
    records: list[CheckRecord]

    def describe(self) -> str:
        """One line: the run, its recipe and the paper's job it stands for."""
        files = self.files
        job = files.paper.describe() if files.paper is not None else "none of the paper's jobs"
        steps = files.newest.step if files.newest is not None else (files.record or {}).get("steps")
        line = (f"{files.path}: recipe '{files.recipe.get('name') or 'unnamed'}', {steps} update(s), recipe hash "
                f"{files.recipe_hash}; it stands for {job}")
        return line if files.interrupted is None else f"{line}; {files.interrupted.describe()}"


def claims_of(files: RunFiles, claims: Sequence[Claim], only: Sequence[str] = ()) -> list[Claim]:
    """Of ``claims``, those of basis ``run``, then the paper's figures the run's job measures (read off its
    evaluations); with ``only``, those whose id starts so."""
    observed = [c for c in claims if c.basis == "run"]
    by_id = {c.id: c for c in claims}
    served = [by_id[c] for c in (files.paper.spec.claims if files.paper is not None else ()) if c in by_id]
    observed += [dataclasses.replace(c, basis="run", checker="observed.metric") for c in served]
    if only:
        observed = [c for c in observed if any(c.id.startswith(p) for p in only)]
    return observed


def check_run(path: str | os.PathLike[str], claims_dir: str | os.PathLike[str] | None = None,
              only: Sequence[str] = (), on_record: Callable[[CheckRecord], None] | None = None,
              claims: Sequence[Claim] | None = None) -> RunCheck:
    """Read the run in ``path`` and check every statement its records can show (module docstring), among
    ``claims`` (default: those of ``claims_dir``)."""
    files = RunFiles.load(Path(path))
    claims = list(claims) if claims is not None else select_claims(claims_dir=claims_dir)
    return RunCheck(files, run_checks(claims_of(files, claims, only), files, on_record=on_record))
