"""The paper's experiments as lists of jobs: one training configuration per job.

- ``table2-base-ende`` / ``table2-big-ende`` / ``table2-big-enfr``: Table 2's Transformer rows
  (Sections 5 and 6.1: 100k steps base, 300k big; checkpoint averaging of the last 5 / 20).
- ``table3``: every row of Table 3 (:data:`repro.model.TABLE3_ROWS`, 20 rows), one job array,
  dev set newstest2013, no checkpoint averaging.
- ``table4-wsj`` / ``table4-semi``: the constituency parser of Section 6.3.
- ``smoke``: a tiny synthetic run (:mod:`repro.cluster.smoke`) that a laptop finishes in seconds;
  with ``--set dataset=multi30k-en-de`` (and a small ``vocab_size``) the same tiny model is
  trained for real by ``repro.train``.

Every job's training config uses the fields of ``repro.train.config.TrainConfig`` and is
validated against it when that module is importable.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.cluster.profiles import ClusterProfile
from repro.cluster.smoke import SMOKE_MODEL, SYNTHETIC
from repro.cluster.update import PAPER_TOKENS_PER_BATCH, plan_update
from repro.errors import ConfigError
from repro.model import TABLE3_ROWS, get_preset

#: Dataset names for the parser (registered by the parsing area in repro.data.registry).
WSJ_DATASET = "wsj-parsing"
SEMI_DATASET = "wsj-parsing-semi"


@dataclass(frozen=True)
class JobSpec:
    """One job: its name, what it trains (``train``: TrainConfig fields) and which claims it serves."""

    name: str
    experiment: str
    preset: str
    claims: tuple[str, ...]
    train: dict[str, Any]
    profile: str
    synthetic: dict[str, Any] | None = None
    #: Command-line changes to the paper's recipe (``--set``): a run with any is not at the paper's scale.
    overrides: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "experiment": self.experiment, "preset": self.preset,
                "claims": list(self.claims), "train": dict(self.train), "profile": self.profile,
                "overrides": dict(self.overrides)}
        if self.synthetic is not None:
            data["synthetic"] = dict(self.synthetic)
        return data


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    build: Callable[["Plan"], list[JobSpec]]


@dataclass
class Plan:
    """What the job builders need: the profile, where runs go, and overrides from the command line."""

    profile: ClusterProfile
    runs_dir: Path
    data_dir: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def train_config(self, name: str, **fields: Any) -> dict[str, Any]:
        """A TrainConfig as a dict: the paper's recipe, the profile's device, ``fields``, then overrides."""
        preset = get_preset(fields.get("preset", "base"))
        config: dict[str, Any] = {
            "preset": preset.name,
            "model_overrides": {},
            "dataset": "wmt14-en-de",
            "data_dir": self.data_dir,
            "vocab_size": preset.model.src_vocab_size,
            "tokens_per_batch": PAPER_TOKENS_PER_BATCH,
            "max_tokens_per_device": self.profile.max_tokens_per_device,
            "max_steps": preset.train_steps,
            "warmup_steps": preset.warmup_steps,
            "label_smoothing": preset.label_smoothing,
            "checkpoint_every_steps": 0,
            "checkpoint_every_minutes": 10.0,   # Section 6.1: checkpoints at 10-minute intervals
            "keep_checkpoints": max(20, preset.checkpoints_averaged),
            "average_last": preset.checkpoints_averaged,
            "seed": 1,
            "out_dir": str(self.runs_dir / name),
            "device": "cuda" if self.profile.gpus_per_node else "cpu",
            "log_every": 100,
        }
        config.update(fields)
        config.update(self.overrides)
        return config


def _job(plan: Plan, experiment: str, name: str, preset: str, claims: tuple[str, ...], **fields: Any) -> JobSpec:
    return JobSpec(name, experiment, preset, claims, plan.train_config(name, preset=preset, **fields),
                   plan.profile.name, overrides=dict(plan.overrides))


def _single(name: str, preset: str, dataset: str, *claims: str) -> Callable[[Plan], list[JobSpec]]:
    """An experiment of one job: one preset trained on one dataset for its claims."""
    def build(plan: Plan) -> list[JobSpec]:
        return [_job(plan, name, name, preset, claims, dataset=dataset)]
    return build


def _table4(name: str, parser: str, dataset: str) -> Callable[[Plan], list[JobSpec]]:
    """Section 6.3's parser: preset, vocabulary, claim and training overrides from repro.parsing."""
    def build(plan: Plan) -> list[JobSpec]:
        from repro.parsing.experiments import EXPERIMENTS as PARSING

        exp = PARSING[parser]
        return [_job(plan, name, name, exp.preset, (exp.claim_id,), dataset=dataset, vocab_size=exp.vocab_size,
                     model_overrides=dict(exp.model_overrides), **exp.train_overrides)]
    return build


def _table3(plan: Plan) -> list[JobSpec]:
    # Table 3: newstest2013 dev set, "no checkpoint averaging".
    return [_job(plan, "table3", f"table3-{row}", row, (f"table3.ppl.{row}", f"table3.bleu.{row}"),
                 average_last=1) for row in TABLE3_ROWS]


SMOKE_SYNTHETIC = {"sentences": 16, "length": 8, "lr": 3e-3, "step_sleep_s": 0.0}


def _smoke(plan: Plan) -> list[JobSpec]:
    synthetic = {**SMOKE_SYNTHETIC, **plan.overrides.pop("synthetic", {})}
    tokens = synthetic["sentences"] * synthetic["length"]
    train = plan.train_config(
        "smoke", preset="base", model_overrides=dict(SMOKE_MODEL), dataset=SYNTHETIC, data_dir=None, vocab_size=32,
        tokens_per_batch=tokens, max_tokens_per_device=min(plan.profile.max_tokens_per_device, tokens // 4),
        max_steps=30, warmup_steps=10, label_smoothing=0.0, checkpoint_every_steps=5,
        keep_checkpoints=3, average_last=1, device="cpu", log_every=5,
    )
    return [JobSpec("smoke", "smoke", "base", (), train, plan.profile.name, synthetic)]


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment("table2-base-ende", "Table 2: base model, WMT 2014 EN-DE (newstest2014)",
               _single("table2-base-ende", "base", "wmt14-en-de", "table2.bleu.base-ende",
                       "sec5.step-time.base")),
    Experiment("table2-big-ende", "Table 2: big model, WMT 2014 EN-DE (newstest2014)",
               _single("table2-big-ende", "big", "wmt14-en-de", "table2.bleu.big-ende", "sec5.step-time.big")),
    Experiment("table2-big-enfr", "Table 2: big model, WMT 2014 EN-FR (newstest2014)",
               _single("table2-big-enfr", "big-enfr", "wmt14-en-fr", "table2.bleu.big-enfr")),
    Experiment("table3", "Table 3: the 20 variations of the base model, one job array", _table3),
    Experiment("table4-wsj", "Table 4: parser trained on WSJ only (Section 6.3)",
               _table4("table4-wsj", "parser-wsj", WSJ_DATASET)),
    Experiment("table4-semi", "Table 4: parser, semi-supervised (Section 6.3)",
               _table4("table4-semi", "parser-semi", SEMI_DATASET)),
    Experiment("smoke", "a tiny synthetic training run (seconds on one CPU core)", _smoke),
]}


def get_experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ConfigError(f"unknown experiment '{name}'; known experiments: {', '.join(EXPERIMENTS)}") from None


def plan_jobs(experiment: str, plan: Plan) -> list[JobSpec]:
    """The experiment's jobs for this profile, each checked before anything is submitted."""
    plan = Plan(plan.profile, plan.runs_dir, plan.data_dir, dict(plan.overrides))
    jobs = get_experiment(experiment).build(plan)
    for job in jobs:
        _validate(job, plan.profile)
    return jobs


def _validate(job: JobSpec, profile: ClusterProfile) -> None:
    train = job.train
    plan_update(int(train["tokens_per_batch"]), profile.world_size, int(train["max_tokens_per_device"]))
    if importlib.util.find_spec("repro.train.config") is not None:
        config_cls = importlib.import_module("repro.train.config").TrainConfig
        try:
            config_cls.from_dict(train)
        except ConfigError as err:
            raise ConfigError(f"experiment {job.experiment}, job {job.name}: {err}") from None
