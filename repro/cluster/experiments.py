"""The paper's experiments as lists of jobs: one recipe (:mod:`repro.recipes`) per job.

- ``table2-base-ende`` / ``table2-big-ende`` / ``table2-big-enfr`` / ``table2-base-enfr``:
  Table 2's Transformer rows (recipes ``base``, ``big``, ``big-enfr``, ``base-enfr``);
- ``table3``: every row of Table 3 (recipes ``table3-<row>``, 20 rows), one job array; with a
  scale (``repro submit table3 --scale small``), the rows at that scale (recipes
  ``table3-<scale>-<row>``, :class:`repro.recipes.Scale`), each with several seeds, as one array
  whose finished jobs are left out when it is submitted again (:func:`finished`);
- ``table4-wsj`` / ``table4-semi``: the constituency parser of Section 6.3;
- ``smoke``: the ``smoke`` recipe, a synthetic copy task a laptop trains in seconds.

A job's recipe is fitted to the cluster profile (its device, and a pass no larger than the
profile's ``max_tokens_per_device``: accumulation keeps the update at the recipe's size), then
``--set`` changes are applied; a job changed so is recorded at scale ``reduced:``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.cluster.profiles import ClusterProfile
from repro.data.synthetic import SyntheticCorpus
from repro.data.corpora import SEMI_PARSING, WSJ_PARSING, resolve_data_dir
from repro.errors import ConfigError
from repro.measures import claim_requests
from repro.model import TABLE3_ROWS
from repro.parsing.prepare import require_targets
from repro.recipes import Recipe, Scale, apply_assignments, get_recipe, get_scale
from repro.results.provenance import config_hash
from repro.train.config import PLACEMENT_FIELDS
from repro.train.update_plan import plan_update


@dataclass(frozen=True)
class JobSpec:
    """One job: its name, its recipe (``train``: TrainConfig fields, ``decode``: DecodeSettings
    fields) and which claims it serves."""

    name: str
    experiment: str
    preset: str
    claims: tuple[str, ...]
    train: dict[str, Any]
    profile: str
    synthetic: dict[str, Any] | None = None
    #: Command-line changes to the paper's recipe (``--set``): a run with any is not at the paper's scale.
    overrides: dict[str, Any] = field(default_factory=dict)
    recipe: str = ""
    decode: dict[str, Any] = field(default_factory=dict)
    #: A parser job's target units (``Recipe.targets``: ``symbols`` or ``per-word``); the prepared
    #: folder it trains on must hold them. None for translation jobs.
    targets: str | None = None
    #: A job of Table 3 at a named scale: the scale, its signature (:func:`scale_signature`), the row and
    #: the seed; its results are stored as ``<claim>/<record>.json``, one per seed, replaced in place.
    scaled: dict[str, Any] | None = None
    #: What the job measures for each of its claims after training: the measurement and split its claim
    #: names (:class:`repro.measures.Request` as dicts; :mod:`repro.cluster.job_evaluation` measures them).
    measures: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "experiment": self.experiment, "preset": self.preset,
                "claims": list(self.claims), "train": dict(self.train), "profile": self.profile,
                "overrides": dict(self.overrides), "recipe": self.recipe, "decode": dict(self.decode),
                "measures": [dict(m) for m in self.measures]}
        if self.synthetic is not None:
            data["synthetic"] = dict(self.synthetic)
        if self.targets is not None:
            data["targets"] = self.targets
        if self.scaled is not None:
            data["scaled"] = dict(self.scaled)
        return data


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    build: Callable[["Plan"], list[JobSpec]]


#: The prepared parsing folders (:mod:`repro.parsing.prepare`) whose jobs carry their target units.
PARSING_DATASETS = (WSJ_PARSING, SEMI_PARSING)

#: The synthetic corpus of the smoke job and the cluster tests' hooks: how long each of its steps
#: is made to last (``step_sleep_s``: a job slowed down to be preempted mid-run) and, with
#: ``nan_at = {"rank": R, "step": S}``, a loss made non-finite on rank R at update S (one rank's
#: divergence must stop every rank).
SMOKE_SYNTHETIC = {"sentences": SyntheticCorpus.sentences, "length": SyntheticCorpus.length, "step_sleep_s": 0.0}


#: Seeds per row of Table 3 at a scale, unless asked otherwise (``--seeds``).
SCALED_SEEDS = 3


@dataclass
class Plan:
    """What the job builders need: the profile, where runs go, and changes from the command line."""

    profile: ClusterProfile
    runs_dir: Path
    data_dir: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    precision: str | None = None       # --precision: how the jobs compute, not what they run (not 'reduced')
    #: Table 3 at a named scale (``--scale``): its rows (default all 20) and seeds per row.
    scale: str | None = None
    seeds: int = SCALED_SEEDS
    rows: tuple[str, ...] | None = None

    def fit(self, recipe: Recipe, name: str) -> Recipe:
        """``recipe`` on this profile's devices, writing under ``runs_dir/name``, with ``--set`` applied."""
        train = recipe.train
        fitted = recipe.replace(
            out_dir=str(self.runs_dir / name),
            data_dir=self.data_dir if self.data_dir is not None else train.data_dir,
            max_tokens_per_device=min(train.max_tokens_per_device, self.profile.max_tokens_per_device),
            device=("cuda" if self.profile.gpus_per_node else "cpu") if train.device == "auto" else train.device,
            **({"precision": self.precision} if self.precision is not None else {}),
        )
        changes = {k: v for k, v in self.overrides.items() if k != "synthetic"}
        return apply_assignments(fitted, changes, flag=f"--set (job {name})") if changes else fitted

    def job(self, experiment: str, name: str, recipe: Recipe, claims: tuple[str, ...],
            synthetic: dict[str, Any] | None = None, *, measured_as: tuple[str, ...] | None = None) -> JobSpec:
        """A job of ``recipe`` for ``claims``, measuring for each what its claim names (the claim of
        ``measured_as`` at the same place, when a record stands for a claim under another id)."""
        fitted = self.fit(recipe, name)
        overrides = {k: v for k, v in self.overrides.items() if k != "synthetic"}
        targets = fitted.targets if fitted.train.dataset in PARSING_DATASETS else None
        measures = tuple(r.to_dict() for r in claim_requests(measured_as or claims, claims))
        return JobSpec(name, experiment, fitted.train.preset, claims, fitted.train.to_dict(), self.profile.name,
                       synthetic, overrides, recipe.name, fitted.decode.to_dict(), targets, measures=measures)


def _single(name: str, recipe: str, *claims: str) -> Callable[[Plan], list[JobSpec]]:
    """An experiment of one job: one recipe trained for its claims."""
    def build(plan: Plan) -> list[JobSpec]:
        return [plan.job(name, name, get_recipe(recipe), claims)]
    return build


def _table3(plan: Plan) -> list[JobSpec]:
    if plan.scale is not None:
        return _scaled_table3(plan)
    if plan.rows is not None:
        raise ConfigError("rows can be chosen only with a scale (--scale); the paper's Table 3 is all 20")
    return [plan.job("table3", f"table3-{row}", get_recipe(f"table3-{row}"), (f"table3.ppl.{row}", f"table3.bleu.{row}"))
            for row in TABLE3_ROWS]


def _scaled_table3(plan: Plan) -> list[JobSpec]:
    """Table 3's rows at ``plan.scale``, seeds 1 to ``plan.seeds`` each, in the paper's order."""
    scale = get_scale(plan.scale)
    if plan.seeds < 1:
        raise ConfigError(f"seeds must be positive, got {plan.seeds}")
    rows = plan.rows if plan.rows is not None else TABLE3_ROWS
    unknown = [r for r in rows if r not in TABLE3_ROWS]
    if unknown or not rows:
        raise ConfigError(f"unknown Table 3 row(s) {', '.join(unknown) or '(none given)'}; the rows: "
                          f"{', '.join(TABLE3_ROWS)}")
    signature = scale_signature(scale, plan.overrides)
    jobs = []
    for row in [r for r in TABLE3_ROWS if r in rows]:
        recipe = scale.row(row)
        for seed in range(1, plan.seeds + 1):
            name = f"{recipe.name}-seed{seed}"
            job = plan.job("table3", name, recipe.replace(seed=seed), scaled_claims(scale.name, row),
                           measured_as=(f"table3.ppl.{row}", f"table3.bleu.{row}"))
            jobs.append(dataclasses.replace(job, scaled={"scale": scale.name, "signature": signature, "row": row,
                                                         "seed": seed, "record": f"seed-{seed}-{signature}"}))
    return jobs


def scaled_claims(scale: str, row: str) -> tuple[str, str]:
    """The result ids of a row at a scale: ``table3-<scale>.ppl.<row>`` and ``table3-<scale>.bleu.<row>``."""
    return (f"table3-{scale}.ppl.{row}", f"table3-{scale}.bleu.{row}")


def scale_signature(scale: Scale, overrides: dict[str, Any] | None = None) -> str:
    """A short hash of what a scale's runs train (its base recipe with the ``--set`` changes, where and how
    they compute left out): runs of one signature are seeds of one experiment, and only they are combined."""
    changes = {k: v for k, v in (overrides or {}).items() if k not in ("synthetic", *PLACEMENT_FIELDS)}
    recipe = apply_assignments(scale.base, changes, flag="--set") if changes else scale.base
    train = {k: v for k, v in recipe.train.to_dict().items() if k not in PLACEMENT_FIELDS}
    return config_hash({"scale": scale.name, "train": train, "decode": recipe.decode.to_dict()})


def finished(job: JobSpec | dict[str, Any], results_dir: str | Path | None) -> bool:
    """Whether a job of Table 3 at a scale (a JobSpec or its dict) has stored the results of every claim it
    serves (its seed's records, :attr:`JobSpec.scaled`): such a job is not trained again."""
    spec = job.to_dict() if isinstance(job, JobSpec) else job
    scaled = spec.get("scaled")
    if not scaled or results_dir is None:
        return False
    return all((Path(results_dir) / claim / f"{scaled['record']}.json").is_file() for claim in spec["claims"])


def _smoke(plan: Plan) -> list[JobSpec]:
    synthetic = {**SMOKE_SYNTHETIC, **plan.overrides.get("synthetic", {})}
    return [plan.job("smoke", "smoke", get_recipe("smoke"), (), synthetic)]


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment("table2-base-ende", "Table 2: base model, WMT 2014 EN-DE (newstest2014)",
               _single("table2-base-ende", "base", "table2.bleu.base-ende", "sec5.step-time.base")),
    Experiment("table2-big-ende", "Table 2: big model, WMT 2014 EN-DE (newstest2014)",
               _single("table2-big-ende", "big", "table2.bleu.big-ende", "sec5.step-time.big")),
    Experiment("table2-big-enfr", "Table 2: big model, WMT 2014 EN-FR (newstest2014)",
               _single("table2-big-enfr", "big-enfr", "table2.bleu.big-enfr")),
    Experiment("table2-base-enfr", "Table 2: base model, WMT 2014 EN-FR (newstest2014)",
               _single("table2-base-enfr", "base-enfr", "table2.bleu.base-enfr")),
    Experiment("table3", "Table 3: the 20 variations of the base model, one job array", _table3),
    Experiment("table4-wsj", "Table 4: parser trained on WSJ only (Section 6.3)",
               _single("table4-wsj", "parser-wsj", "table4.f1.wsj-only")),
    Experiment("table4-semi", "Table 4: parser, semi-supervised (Section 6.3)",
               _single("table4-semi", "parser-semi", "table4.f1.semi")),
    Experiment("smoke", "a tiny synthetic training run (seconds on one CPU core)", _smoke),
]}


def get_experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ConfigError(f"unknown experiment '{name}'; known experiments: {', '.join(EXPERIMENTS)}") from None


def plan_jobs(experiment: str, plan: Plan) -> list[JobSpec]:
    """The experiment's jobs for this profile, each checked before anything is submitted."""
    try:
        jobs = get_experiment(experiment).build(plan)
    except ConfigError as err:
        raise ConfigError(f"experiment {experiment}: {err}") from None
    for job in jobs:
        plan_update(int(job.train["tokens_per_batch"]), plan.profile.world_size, int(job.train["max_tokens_per_device"]))
        check_parser_data(job.to_dict())
    return jobs


def check_parser_data(spec: dict[str, Any]) -> None:
    """A parser job's prepared folder must hold the job's target units (its ``manifest.json``).

    Checked when the jobs are planned and again when a job starts: at submission the folder may
    live only on the cluster's file system. A folder not found is left to the data loader, which
    names the missing files."""
    if spec.get("targets") is None:
        return
    train = spec["train"]
    folder = resolve_data_dir(train.get("data_dir")) / str(train["dataset"])
    if folder.is_dir():
        require_targets(folder, spec["targets"], f"job {spec['name']}")
