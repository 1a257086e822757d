"""Section 6.3: "all other parameters remained unchanged from the English-to-German base
translation model", observed on the parser's job against the base job.

The paper changes the parser's size (4 layers, d_model = 1024), its vocabulary, and selects its
dropout, learning rates and beam size on section 22; everything else is the base model's. Each
of the remaining settings is observed on the code each job runs, not read from its config: the
label smoothing its training objective hands to the loss, Adam's beta1, beta2 and epsilon
recovered from two of its loop's updates, the heads and feed-forward width of the model its loop
builds (a forward pass), and what that model adds to its embeddings.
"""

from __future__ import annotations

from repro.checks.census import job_dimensions
from repro.checks.jobs import job_config, own, shrunk
from repro.checks.recipe_runs import added_positions, objective_epsilon
from repro.checks.registry import checker
from repro.checks.training import adam_gradients, recover_adam
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.train.config import TrainConfig
from repro.train.probes import loop_adam_updates


def observed_recipe(cfg: TrainConfig) -> dict[str, object]:
    """The settings of Section 6.3's "all other parameters", as the job's code runs them."""
    dims, _ = job_dimensions(cfg)
    (beta1, beta2, eps), _ = recover_adam(loop_adam_updates(shrunk(cfg), adam_gradients()))
    return finite({"label smoothing": objective_epsilon(cfg)[0], "Adam beta1": round(beta1, 4), "Adam beta2": round(beta2, 4),
            "Adam epsilon": float(f"{eps:.3g}"), "heads": dims["h"], "d_ff": dims["d_ff"],
            "positions": added_positions(cfg)[0]}, "the settings observed on the job")


@checker("run.parser_unchanged")
def parser_unchanged(claim: Claim, ctx: CheckContext) -> Measurement:
    """The settings of the parser's job (params.experiment) that differ from the base job's
    (params.base), both observed (module docstring). Measured: how many differ (0 in the paper)."""
    own(ctx)
    parser = observed_recipe(job_config(claim.params.get("experiment", "table4-wsj")))
    base = observed_recipe(job_config(claim.params.get("base", "table2-base-ende")))
    differ = [f"{k}: {parser[k]} (base {base[k]})" for k in base if parser[k] != base[k]]
    return Measurement(len(differ), detail=("differ: " + "; ".join(differ)) if differ else
                       "the same as the base job's: " + ", ".join(f"{k} {v}" for k, v in base.items()))
