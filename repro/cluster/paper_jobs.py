"""repro's settings as the runs that produce the paper's numbers use them.

The settings claims of Sections 5 and 6 are read from the job specs that ``repro submit`` builds
for the paper's experiments on the paper's hardware (profile ``paper-p100``: one machine with 8
P100), after every override a job applies, and from the decoding settings the job's evaluation
runs with (:mod:`repro.cluster.job_evaluation` decodes with the spec's ``decode``). Each value says
which job it was read from.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from repro.cluster.experiments import JobSpec, Plan, plan_jobs
from repro.cluster.profiles import load_profile
from repro.model import TABLE3_ROWS
from repro.recipes import PAPER_STEP_SECONDS
from repro.train.config import TrainConfig

#: The profile of Section 5.2's hardware.
PAPER_PROFILE = "paper-p100"


@lru_cache(maxsize=None)
def job_spec(experiment: str, name: str | None = None, profile: str | None = None) -> JobSpec:
    """The job (``name``, default the experiment's only one) ``repro submit EXPERIMENT --cluster PROFILE``
    submits (default: the paper's hardware, ``paper-p100``)."""
    with tempfile.TemporaryDirectory(prefix="repro-plan-") as tmp:
        jobs = plan_jobs(experiment, Plan(load_profile(profile or PAPER_PROFILE), Path(tmp)))
    return next(j for j in jobs if name is None or j.name == name)


def job_config(experiment: str, name: str | None = None, profile: str | None = None) -> TrainConfig:
    return TrainConfig.from_dict(job_spec(experiment, name, profile).train)


def _model_size(cfg: TrainConfig) -> str:
    """``big`` or ``base``: the step time of Section 5.2 that a job's model has (big: d_model 1024)."""
    return "big" if cfg.model_config().d_model >= 1024 else "base"


def _checkpoint_minutes(cfg: TrainConfig) -> float:
    """Minutes between checkpoints on the paper's hardware: the recipe's spacing in updates at its
    model's step time (Section 5.2: 0.4 s per base step, 1.0 s per big one), or its wall-clock
    interval when it checkpoints by time."""
    if cfg.checkpoint_every_steps:
        return round(cfg.checkpoint_every_steps * PAPER_STEP_SECONDS[_model_size(cfg)] / 60, 6)
    return cfg.checkpoint_every_minutes


def paper_settings() -> dict[str, Any]:
    """Setting key -> (value, where it was read), for the ``recipe.value`` claims. A statement that
    governs several of Table 2's jobs (all four, or those of one model size) is read from each of
    them: the value is theirs when they agree, else the first job's that departs from the others,
    named (a setting read from one job would let the others drift)."""
    table2 = [job_spec(e) for e in ("table2-base-ende", "table2-big-ende", "table2-big-enfr", "table2-base-enfr")]
    base, big, enfr, _ = table2
    wsj, semi = job_spec("table4-wsj"), job_spec("table4-semi")
    cfg = {j.name: TrainConfig.from_dict(j.train) for j in (*table2, wsj, semi)}
    bases = [j for j in table2 if _model_size(cfg[j.name]) == "base"]
    bigs = [j for j in table2 if _model_size(cfg[j.name]) == "big"]
    profile = load_profile(PAPER_PROFILE)

    def where(job: JobSpec, field: str) -> str:
        return f"repro submit {job.experiment} --cluster {PAPER_PROFILE}: job {job.name}, {field}"

    def every(jobs: list[JobSpec], read: Callable[[JobSpec], Any], field: str) -> tuple[Any, str]:
        values = [(read(j), j) for j in jobs]
        common = max((v for v, _ in values), key=[v for v, _ in values].count)
        odd = next(((v, j) for v, j in values if v != common), None)
        if odd is not None:
            return odd[0], where(odd[1], field) + f" (the other jobs: {common!r})"
        return common, f"repro submit {', '.join(j.experiment for j in jobs)} --cluster {PAPER_PROFILE}: {field}"

    def train(key: str) -> Callable[[JobSpec], Any]:
        return lambda j: getattr(cfg[j.name], key)

    b, g, f, w, s = (cfg[j.name] for j in (base, big, enfr, wsj, semi))
    return {
        "label_smoothing": every(table2, train("label_smoothing"), "train.label_smoothing"),
        "warmup_steps": every(table2, train("warmup_steps"), "train.warmup_steps"),
        "tokens_per_batch": every(table2, train("tokens_per_batch"), "train.tokens_per_batch"),
        "train_steps_base": every(bases, train("max_steps"), "train.max_steps"),
        "train_steps_big": every(bigs, train("max_steps"), "train.max_steps"),
        "average_last_base": every(bases, train("average_last"), "train.average_last"),
        "average_last_big": every(bigs, train("average_last"), "train.average_last"),
        "checkpoint_every_minutes": every(table2, lambda j: _checkpoint_minutes(cfg[j.name]),
                                          "train.checkpoint_every_steps x the paper's step time of its model size "
                                          f"({PAPER_STEP_SECONDS['base']} s base, {PAPER_STEP_SECONDS['big']} s big)"),
        "dropout_base": (b.model_config().dropout, where(base, "the model config")),
        "dropout_big_ende": (g.model_config().dropout, where(big, "the model config")),
        "dropout_big_enfr": (f.model_config().dropout, where(enfr, "the model config")),
        "beam_size": every(table2, lambda j: j.decode["beam_size"], "decode.beam_size"),
        "length_penalty": every(table2, lambda j: j.decode["alpha"], "decode.alpha"),
        "max_len_offset": every(table2, lambda j: j.decode["max_len_offset"], "decode.max_len_offset"),
        "parser_beam_size": every([wsj, semi], lambda j: j.decode["beam_size"], "decode.beam_size"),
        "parser_length_penalty": every([wsj, semi], lambda j: j.decode["alpha"], "decode.alpha"),
        "parser_max_len_offset": every([wsj, semi], lambda j: j.decode["max_len_offset"], "decode.max_len_offset"),
        "vocab_size_ende": (b.vocab_size, where(base, "train.vocab_size")),
        "vocab_size_enfr": (f.vocab_size, where(enfr, "train.vocab_size")),
        "dataset_ende": (b.dataset, where(base, "train.dataset")),
        "dataset_enfr": (f.dataset, where(enfr, "train.dataset")),
        "parser_layers": (w.model_config().n_layers, where(wsj, "the model config")),
        "parser_d_model": (w.model_config().d_model, where(wsj, "the model config")),
        "parser_vocab_wsj": (w.vocab_size, where(wsj, "train.vocab_size")),
        "parser_vocab_semi": (s.vocab_size, where(semi, "train.vocab_size")),
        "gpus": (profile.world_size if profile.gpus_per_node else 0, f"cluster profile {PAPER_PROFILE}"),
        "gpu_type": (profile.gpu_type, f"cluster profile {PAPER_PROFILE}"),
        "table3_average_last": (max(job_config("table3", f"table3-{row}").average_last for row in TABLE3_ROWS),
                                f"repro submit table3 --cluster {PAPER_PROFILE}: the most any of its 20 jobs averages"),
    }
