"""Section 6.1's checkpoint averaging (and Table 3's "no checkpoint averaging"), watched on the
evaluation of the job itself.

"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which
were written at 10-minute intervals. For the big models, we averaged the last 20 checkpoints."
Section 6.2 (Table 3): "... but no checkpoint averaging".

The job's training settings run the training loop (a tiny model writing a checkpoint after every
update, keeping as many as the job keeps) until it has written more checkpoints than the job
averages; then the job's own evaluation (:func:`repro.cluster.job_evaluation.evaluate_claims`,
for the job's first metric claim, on a three-sentence split) runs on that run directory, as it runs
after a cluster job, while a forward hook watches the model it decodes with. Its embedding table
is set against the mean of the newest j checkpoints for every j: the j that matches is how many
checkpoints the evaluation averaged. Nothing is read from the job's ``average_last``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import Tensor, nn

from repro.checks.jobs import job_spec, own
from repro.checks.registry import checker
from repro.claims.measure_names import MODEL_MEASURES
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement
from repro.cluster.job_evaluation import evaluate_claims
from repro.data.vocab import WORD_LEVEL, SharedVocab
from repro.errors import ConfigError
from repro.train.checkpoint import load_checkpoint
from repro.files.writer import atomic_write_text
from repro.train.config import TrainConfig
from repro.train.probes import run_for_evaluation

WORDS = "the a house cat dog sees runs green small big old new".split()
SENTENCES = [" ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 6)) for i in range(1, 9)]


def _write_split(folder: Path, split: str, lines: list[str]) -> None:
    for lang in ("en", "de"):
        atomic_write_text(folder / f"{split}.{lang}", "".join(line + "\n" for line in lines), within=folder)


def _metric_claim(measures: tuple[dict, ...]) -> list[str]:
    """The job's first claim whose measurement (the spec's ``measures``, :mod:`repro.measures`) loads a
    model (perplexity first: the cheapest), leaving out the step time (which has no model)."""
    ppl = [m["result_id"] for m in measures if m["measure"] == "perplexity.wordpiece"]
    model = [m["result_id"] for m in measures if m["measure"] in MODEL_MEASURES]
    return (ppl or model)[:1]


def _embedding_seen(model_run) -> list[Tensor]:
    """The weights of every embedding the models run inside ``model_run()`` look up."""
    seen: list[Tensor] = []

    def hook(module: nn.Module, args: tuple) -> None:
        if isinstance(module, nn.Embedding):
            seen.append(module.weight.detach().clone())

    handle = nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        model_run()
    finally:
        handle.remove()
    return seen


def _evaluated_average(spec, cfg: TrainConfig, claims: list[str], keep: int) -> tuple[int, dict[int, float], int]:
    """(the j whose newest-j mean the evaluation decoded with, the error of every j, how many
    checkpoints the loop left) for a run of ``cfg`` keeping ``keep`` checkpoints."""
    with tempfile.TemporaryDirectory(prefix="repro-evaluation-average-") as tmp:
        data, out_dir = Path(tmp) / "data", Path(tmp) / "run"
        _write_split(data, "train", SENTENCES)
        for split in ("dev", "test"):
            _write_split(data, split, SENTENCES[:3])
        vocab = SharedVocab.train(SENTENCES * 2, 64, split=WORD_LEVEL)
        vocab.save(out_dir / "vocab.json")
        examples = [(vocab.encode(s), vocab.encode(s)) for s in SENTENCES]
        # A checkpoint after every update (when they are written is sec6.checkpoint-interval.observed's
        # claim); how many the loop keeps and how many the evaluation averages are the job's.
        updates = keep + 2
        run_cfg = cfg.replace(keep_checkpoints=keep, checkpoint_every_steps=1, checkpoint_every_minutes=0.0)
        written = run_for_evaluation(run_cfg, out_dir, examples, len(vocab), updates, 1.0)
        states = [load_checkpoint(p)["model"] for p in written]
        train = {**spec.train, "dataset": str(data), "data_dir": None, "precision": "fp32", "device": "cpu",
                 "max_steps": updates}
        job = {**spec.to_dict(), "train": train, "claims": claims, "overrides": {}}
        try:
            seen = _embedding_seen(lambda: evaluate_claims(job, {"out_dir": str(out_dir), "steps": updates}, 1,
                                                           Path(tmp) / "results"))
        except ConfigError as refused:  # the evaluation will not average what the loop left
            raise EvaluationRefused(str(refused)) from None
    if not seen:
        return 0, {}, len(states)
    weight = finite(seen[0], "the embedding the evaluation decodes with").double()
    errors = {}
    for j in range(1, len(states) + 1):
        newest = states[-j:]
        means = [torch.stack([s[key].double() for s in newest]).mean(0)
                 for key, t in newest[0].items() if tuple(t.shape) == tuple(weight.shape)]
        errors[j] = min((max_abs_diff(weight, m, "the evaluated embedding") for m in means), default=float("inf"))
    best = min(errors, key=errors.__getitem__)
    return (best if errors[best] <= 1e-6 else 0), errors, len(states)


class EvaluationRefused(Exception):
    """The job's evaluation refused the run the job's loop left (too few checkpoints, say)."""


@checker("run.evaluation_average")
def evaluation_average(claim: Claim, ctx: CheckContext) -> Measurement:
    """How many of a run's newest checkpoints the job's evaluation averages, observed (module
    docstring). The run keeps as many checkpoints as the job keeps; when the evaluation averaged
    all of them (so that it might have averaged more), the run is repeated keeping
    ``params.extra_checkpoints`` more, and the loop must have kept at least what the evaluation
    averages. Measured: that number (5 base, 20 big, 1 for Table 3's jobs)."""
    own(ctx)
    spec = job_spec(claim.params["experiment"], claim.params.get("job"))
    claims = _metric_claim(spec.measures)
    if not claims:
        raise ValueError(f"job {spec.name} serves no metric claim whose evaluation loads a model")
    cfg = TrainConfig.from_dict(spec.train)
    try:
        best, errors, left = _evaluated_average(spec, cfg, claims, cfg.keep_checkpoints)
    except EvaluationRefused as why:
        return Measurement(None, False, f"job {spec.name}: the job's evaluation refused the run its loop left: {why}")
    detail = (f"job {spec.name}: the loop left {left} checkpoints at the job's cadence (it keeps "
              f"{cfg.keep_checkpoints}); the evaluation of {claims[0]}")
    if best and best == left:
        more = cfg.keep_checkpoints + int(claim.params.get("extra_checkpoints", 3))
        try:
            best, errors, wider = _evaluated_average(spec, cfg, claims, more)
        except EvaluationRefused as why:
            return Measurement(None, False, f"{detail}: the evaluation refused a run keeping {more}: {why}")
        detail += (f" averaged all of them; with {wider} checkpoints left (keeping {more}) it")
        if best > left:
            return Measurement(best, False, detail + f" averaged the newest {best}: more than the job's loop keeps")
    if not best:
        shown = min(errors.values(), default=float("inf"))
        return Measurement(None, False, detail + f" decoded with no mean of the newest checkpoints (closest "
                                                 f"{shown:.1e} away)")
    runner_up = sorted(errors.values())[1] if len(errors) > 1 else float("inf")
    return Measurement(best, detail=detail + f" decoded with the mean of the newest {best} (max |difference| "
                                             f"{errors[best]:.1e}; the next closest mean {runner_up:.1e})")
