"""repro's settings as the runs that produce the paper's numbers use them.

The settings claims of Sections 5 and 6 are read from the job specs that ``repro submit`` builds
for the paper's experiments on the paper's hardware (profile ``paper-p100``: one machine with 8
P100), after every override a job applies, and from the decoding settings the job's evaluation
runs with (:mod:`repro.cluster.job_evaluation` decodes with the spec's ``decode``). Each value says
which job it was read from.
"""

from __future__ import annotations

import tempfile
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


def _checkpoint_minutes(cfg: TrainConfig) -> float:
    """Minutes between checkpoints on the paper's hardware: the recipe's spacing in updates at the base
    model's step time (Section 5.2), or its wall-clock interval when it checkpoints by time."""
    if cfg.checkpoint_every_steps:
        return round(cfg.checkpoint_every_steps * PAPER_STEP_SECONDS["base"] / 60, 6)
    return cfg.checkpoint_every_minutes


def paper_settings() -> dict[str, Any]:
    """Setting key -> (value, where it was read), for the ``recipe.value`` claims."""
    base, big, enfr = (job_spec(e) for e in ("table2-base-ende", "table2-big-ende", "table2-big-enfr"))
    wsj, semi = job_spec("table4-wsj"), job_spec("table4-semi")
    cfg = {j.name: TrainConfig.from_dict(j.train) for j in (base, big, enfr, wsj, semi)}
    profile = load_profile(PAPER_PROFILE)

    def where(job: JobSpec, field: str) -> str:
        return f"repro submit {job.experiment} --cluster {PAPER_PROFILE}: job {job.name}, {field}"

    b, g, f, w, s = (cfg[j.name] for j in (base, big, enfr, wsj, semi))
    return {
        "label_smoothing": (b.label_smoothing, where(base, "train.label_smoothing")),
        "warmup_steps": (b.warmup_steps, where(base, "train.warmup_steps")),
        "tokens_per_batch": (b.tokens_per_batch, where(base, "train.tokens_per_batch")),
        "train_steps_base": (b.max_steps, where(base, "train.max_steps")),
        "train_steps_big": (g.max_steps, where(big, "train.max_steps")),
        "average_last_base": (b.average_last, where(base, "train.average_last")),
        "average_last_big": (g.average_last, where(big, "train.average_last")),
        "checkpoint_every_minutes": (_checkpoint_minutes(b), where(base, "train.checkpoint_every_steps x the paper's "
                                                                    f"{PAPER_STEP_SECONDS['base']} s per base step")),
        "dropout_base": (b.model_config().dropout, where(base, "the model config")),
        "dropout_big_ende": (g.model_config().dropout, where(big, "the model config")),
        "dropout_big_enfr": (f.model_config().dropout, where(enfr, "the model config")),
        "beam_size": (base.decode["beam_size"], where(base, "decode.beam_size")),
        "length_penalty": (base.decode["alpha"], where(base, "decode.alpha")),
        "max_len_offset": (base.decode["max_len_offset"], where(base, "decode.max_len_offset")),
        "parser_beam_size": (wsj.decode["beam_size"], where(wsj, "decode.beam_size")),
        "parser_length_penalty": (wsj.decode["alpha"], where(wsj, "decode.alpha")),
        "parser_max_len_offset": (wsj.decode["max_len_offset"], where(wsj, "decode.max_len_offset")),
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
