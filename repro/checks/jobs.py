"""The paper's jobs as the checkers watch them: the job specs ``repro submit`` resolves on the
paper's hardware (:mod:`repro.cluster.paper_jobs`), and the same training settings on a small
model, so that the code they run can be run here."""

from __future__ import annotations

from repro.claims.outcome import CheckContext, NotApplicable
from repro.cluster.paper_jobs import PAPER_PROFILE, job_config, job_spec
from repro.train.config import TrainConfig

#: The size of the small model a job's settings are run on (its training settings and P_drop kept).
SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)


def own(ctx: CheckContext) -> None:
    """These claims are measured on repro's own experiments; another implementation has none."""
    if not ctx.target.has_repro_presets:
        raise NotApplicable(f"{ctx.target.name}: this claim is measured on repro's own experiments and data path")


def watches_jobs(ctx: CheckContext, method: str) -> bool:
    """Whether a claim answering to the adapter's ``method`` watches repro's own paper jobs: the
    target is repro (its presets) and does not bring its own ``method`` (``watched_on_jobs``)."""
    if not ctx.target.has_repro_presets:
        return False
    try:
        return bool(ctx.target.watched_on_jobs(method))
    except AttributeError:
        return False


def shrunk(cfg: TrainConfig) -> TrainConfig:
    """The job's config on a small model: its training settings (and P_drop, and its positional
    encoding) kept, on the CPU in fp32 (the paper's arithmetic, whatever ``auto`` would pick here)."""
    model = cfg.model_config()
    return cfg.replace(model_overrides={"n_layers": SIZE["n_layers"], "d_model": SIZE["d_model"],
                                        "d_ff": SIZE["d_ff"], "n_heads": SIZE["n_heads"],
                                        "dropout": model.dropout, "positional": model.positional},
                       device="cpu", threads=0, precision="fp32")


def job_name(experiment: str, row: str | None) -> str | None:
    """The job of ``experiment`` that a claim names: Table 3's rows are the jobs table3-<row>."""
    return f"table3-{row}" if experiment == "table3" and row else None


__all__ = ["PAPER_PROFILE", "SIZE", "job_config", "job_name", "job_spec", "own", "shrunk", "watches_jobs"]
