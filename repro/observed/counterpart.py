"""The paper's job a run stands for, and what that job is: its recipe identity, its claims, its test set.

A run records the recipe it trained (its name in ``run.json`` and in every checkpoint). The paper's
recipes are jobs of the paper's experiments (:mod:`repro.cluster.experiments`): ``base`` is
``table2-base-ende``, ``table3-A-h1`` a job of ``table3``, ``parser-wsj`` is ``table4-wsj``. The
project's own scaled-down recipes stand in for one of them (``local`` for the base EN-DE model,
``local-parsing`` for the WSJ parser, ``table3-<scale>-<row>`` for a row of Table 3): a run of one is
set against the statements about the job it stands in for, and departs from most of them, which is
what it is. ``smoke`` (a synthetic copy task) and recipes of no name the project knows stand for none.

The paper job's own recipe is the one ``repro submit`` runs on the paper's hardware
(:func:`repro.cluster.paper_jobs.job_spec`), every setting of which other claims check against the
paper; its recipe identity (:func:`repro.train.config.recipe_identity`) is hashed as every job's
results hash theirs (``provenance.config_hash``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from repro.cluster.experiments import EXPERIMENTS, JobSpec
from repro.cluster.paper_jobs import job_spec
from repro.data.test_sets import PaperTestSet, paper_test_set
from repro.model import TABLE3_ROWS
from repro.recipes import ALIASES, SCALES
from repro.results.provenance import config_hash
from repro.train.config import recipe_identity

#: Recipe name -> (experiment, job) of the paper.
_PAPER = {"base": ("table2-base-ende", "table2-base-ende"), "big": ("table2-big-ende", "table2-big-ende"),
          "big-enfr": ("table2-big-enfr", "table2-big-enfr"), "base-enfr": ("table2-base-enfr", "table2-base-enfr"),
          "parser-wsj": ("table4-wsj", "table4-wsj"), "parser-semi": ("table4-semi", "table4-semi"),
          **{f"table3-{row}": ("table3", f"table3-{row}") for row in TABLE3_ROWS}}
#: The project's recipes that stand in for a paper recipe (the scaled rows of Table 3 are added below).
_STAND_INS = {"local": "base", "local-parsing": "parser-wsj",
              **{f"table3-{scale}-{row}": f"table3-{row}" for scale in SCALES for row in TABLE3_ROWS}}


@dataclass(frozen=True)
class PaperJob:
    """The paper's job a run stands for. ``model``: base, big or parser; ``pair``: en-de, en-fr or None
    (the parser); ``table``: the table its results fill (2, 3 or 4); ``stand_in``: the run's own recipe
    when it is a scaled-down stand-in for this job (None: the run's recipe is the paper's)."""

    experiment: str
    job: str
    recipe: str
    model: str
    pair: str | None
    table: int
    stand_in: str | None = None

    @property
    def spec(self) -> JobSpec:
        """What ``repro submit`` runs for this job on the paper's hardware."""
        return job_spec(self.experiment, self.job)

    @property
    def recipe_hash(self) -> str:
        """The hash of the job's recipe identity: the ``config_hash`` a run of exactly this recipe records."""
        return experiment_hash(self.experiment, self.job)

    def attributes(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "job": self.job, "model": self.model, "pair": self.pair,
                "table": self.table}

    def describe(self) -> str:
        own = f"the project's scaled-down recipe '{self.stand_in}', standing in for " if self.stand_in else ""
        return f"{own}the paper's job {self.job} (recipe {self.recipe}, experiment {self.experiment})"


def counterpart(recipe_name: str | None) -> PaperJob | None:
    """The paper's job a run of ``recipe_name`` stands for (module docstring); None for none."""
    name = ALIASES.get(recipe_name or "", recipe_name or "")
    paper = _STAND_INS.get(name, name)
    if paper not in _PAPER:
        return None
    experiment, job = _PAPER[paper]
    table = int(experiment.removeprefix("table")[0])   # table2-base-ende, table3, table4-wsj
    model = "parser" if table == 4 else "big" if paper in ("big", "big-enfr", "table3-big") else "base"
    pair = None if table == 4 else "en-fr" if paper.endswith("enfr") else "en-de"
    return PaperJob(experiment, job, paper, model, pair, table, name if name != paper else None)


@lru_cache(maxsize=None)
def experiment_hash(experiment: str, job: str) -> str:
    spec = job_spec(experiment, job)
    return config_hash(recipe_identity(spec.train, spec.decode))


def identity_differences(recorded: dict[str, Any], experiment: str, job: str, limit: int = 6) -> list[str]:
    """The fields in which a recorded recipe identity differs from the paper job's ("max_steps 600, the
    paper's job 100000")."""
    spec = job_spec(experiment, job)
    wanted = recipe_identity(spec.train, spec.decode)
    changed, absent = [], []
    for part in ("train", "decode"):
        mine, theirs = recorded.get(part) or {}, wanted[part]
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                (changed if key in mine and key in theirs else absent).append(
                    f"{key} {mine.get(key)!r} (the paper's job: {theirs.get(key)!r})")
    out = changed + absent
    return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])


@lru_cache(maxsize=None)
def serving_jobs() -> dict[str, tuple[str, str]]:
    """Claim id -> (experiment, job) of the paper job whose results stand for it (the jobs of Table 3 at
    a scale excluded: their records are not the paper's claims)."""
    out = {}
    for name in EXPERIMENTS:
        if name == "smoke":
            continue
        jobs = [name] if name != "table3" else [f"table3-{row}" for row in TABLE3_ROWS]
        for job in jobs:
            for claim in job_spec(name, job).claims:
                out[claim] = (name, job)
    return out


def claim_job(claim_id: str) -> PaperJob | None:
    """The paper's job whose run measures ``claim_id`` (None for a claim no paper job serves)."""
    found = serving_jobs().get(claim_id)
    if found is None:
        return None
    recipe = next(name for name, (experiment, job) in _PAPER.items() if (experiment, job) == found)
    return counterpart(recipe)


def claim_test_set(claim_id: str, split: str | None) -> PaperTestSet | None:
    """The paper's test set a measurement of ``claim_id`` on ``split`` must have scored (None: none known)."""
    job = claim_job(claim_id)
    if job is None or split is None:
        return None
    return paper_test_set(str(job.spec.train.get("dataset")), split)


__all__ = ["PaperJob", "claim_job", "claim_test_set", "counterpart", "experiment_hash",
           "identity_differences", "serving_jobs"]
