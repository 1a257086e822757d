"""Section 5's updates as the loop runs them on one GPU with fused Adam: each update's figures read one
update late (:func:`repro.train.update_step.launch_update`), the optimizer step launched with the
update's non-finite flag as its ``found_inf``.

Watched on the CPU, where torch's fused Adam takes the same flag: the GPU path's Adam (the arguments
the loop's builder gives it on a GPU, :func:`repro.checks.runtime_choice.gpu_adam_arguments`) is handed
to the loop's own run, and that run is compared with the same run read at once (each update's figures
read and checked before its step, as where the optimizer cannot skip a step on the device):

- the same updates logged with the same rate, tokens, loss and NLL, and the same checkpoints kept,
  holding the same weights, bit for bit (the same kernels in the same order);
- an update whose loss is not finite leaves the weights, Adam's moments and its step count as they
  were, and raises naming that update;
- a run whose update diverges stops naming it, with no checkpoint written for it or after it.
"""

from __future__ import annotations

import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

import torch

import repro.train.update_step as update_step

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.checks.runtime_choice import gpu_adam_arguments
from repro.checks.update_arithmetic import random_pairs
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.observed.run_files import read_log
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.loop import Trainer, build, run
from repro.train.update_step import TrainingDiverged

#: Updates of the compared runs, the spacing of their checkpoints, and the update whose loss is made NaN.
STEPS, EVERY, DIVERGES = 7, 3, 5


def _gpu_adam(trainer: Trainer, kwargs: dict[str, Any]) -> None:
    """``trainer``'s optimizer replaced by the GPU path's Adam over the same parameters."""
    params = [p for group in trainer.optimizer.param_groups for p in group["params"]]
    trainer.optimizer = torch.optim.Adam(params, lr=0.0, **kwargs)


def _run_departures(cfg, examples, kwargs: dict[str, Any], tmp: Path) -> list[str]:
    """How the run read late departs from the run read at once."""
    at_once, late = tmp / "at-once", tmp / "late"
    for out in (late, at_once):
        with mock.patch.object(update_step, "skips_on_device", lambda optimizer: False) if out is at_once \
                else nullcontext():
            run(cfg.replace(out_dir=str(out)), examples, SIZE["vocab_size"], log=lambda _: None,
                on_built=lambda t: _gpu_adam(t, kwargs))
    out: list[str] = []
    want, got = read_log(at_once / "metrics.csv"), read_log(late / "metrics.csv")
    if [r.step for r in got] != [r.step for r in want]:
        out.append(f"updates logged {[r.step for r in got]}, read at once {[r.step for r in want]}")
    for g, w in zip(got, want):
        for field in ("lr", "src_tokens", "tgt_tokens", "loss", "nll"):
            value, reference = getattr(g, field), getattr(w, field)
            if reference is None or finite(value, f"update {g.step}'s {field} read late") != finite(
                    reference, f"update {w.step}'s {field} read at once"):
                out.append(f"update {g.step}: {field} {value!r}, read at once {reference!r}")
    kept_want, kept_got = list_checkpoints(at_once), list_checkpoints(late)
    steps_want = [load_checkpoint(p)["step"] for p in kept_want]
    steps_got = [load_checkpoint(p)["step"] for p in kept_got]
    if steps_got != steps_want:
        out.append(f"checkpoints of updates {steps_got}, read at once {steps_want}")
    for p_got, p_want in zip(kept_got, kept_want):
        a, b = load_checkpoint(p_got)["model"], load_checkpoint(p_want)["model"]
        moved = [k for k in b if not torch.equal(finite(a[k], f"{p_got.name}'s {k}"), b[k])]
        if moved:
            out.append(f"{p_got.name}: weights {', '.join(moved[:3])} differ from the run read at once")
    return out


def _skip_departures(cfg, examples, kwargs: dict[str, Any]) -> list[str]:
    """A non-finite update launched read late must change nothing and raise naming its step."""
    trainer = build(cfg, examples, SIZE["vocab_size"])
    _gpu_adam(trainer, kwargs)
    batches = iter(trainer.batcher)
    trainer.update(trainer.micro_batches(batches), 1)
    micro = trainer.micro_batches(batches)
    with torch.no_grad():   # one infinite weight: the update's loss is not finite
        trainer.model.output_projection.weight[0, 0] = float("inf")
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    moments = {id(p): {k: v.clone() for k, v in s.items()} for p, s in trainer.optimizer.state.items()}
    launched = trainer.launch(micro, 2)
    out = [] if launched.deferred else ["the GPU path's Adam is not read late (the update was read before its step)"]
    try:
        launched.result()
        out.append("a non-finite update 2 read late raised nothing")
    except TrainingDiverged as err:
        if not str(err).startswith("step 2:"):
            out.append(f"a non-finite update 2 read late stopped naming another: {err}")
    after = trainer.model.state_dict()
    moved = [k for k in after if not torch.equal(after[k], weights[k])]
    if moved:
        out.append(f"a non-finite update changed the weights {moved[:3]}")
    if any(not torch.equal(v, moments[id(p)][k]) for p, s in trainer.optimizer.state.items() for k, v in s.items()):
        out.append("a non-finite update moved Adam's moments or step count")
    return out


def _stop_departures(cfg, examples, kwargs: dict[str, Any], tmp: Path) -> list[str]:
    """A run whose update ``DIVERGES`` is not finite (read late: it is not due for a checkpoint)."""
    built: list[Trainer] = []

    def poison(step: int) -> None:
        if step == DIVERGES - 1:
            with torch.no_grad():
                built[0].model.output_projection.weight.fill_(float("nan"))

    def on_built(trainer: Trainer) -> None:
        _gpu_adam(trainer, kwargs)
        built.append(trainer)

    out_dir = tmp / "diverges"
    try:
        run(cfg.replace(out_dir=str(out_dir)), examples, SIZE["vocab_size"], log=lambda _: None,
            on_built=on_built, on_step=poison)
        return [f"a run whose update {DIVERGES} is NaN ran to its end"]
    except TrainingDiverged as err:
        out = [] if str(err).startswith(f"step {DIVERGES}:") else [f"the diverged run stopped with: {err}"]
    steps = [load_checkpoint(p)["step"] for p in list_checkpoints(out_dir)]
    want = [s for s in range(EVERY, DIVERGES, EVERY)]
    if steps != want:
        out.append(f"the diverged run left checkpoints of updates {steps} (want {want}: none for or after "
                   f"update {DIVERGES})")
    return out


@checker("run.read_late")
def read_late(claim: Claim, ctx: CheckContext) -> Measurement:
    """The run read one update late (module docstring) against the run read at once, a non-finite
    update read late, and a run that diverges read late. Measured: the number of departures."""
    own(ctx)
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende"))).replace(
        max_steps=STEPS, checkpoint_every_steps=EVERY, checkpoint_every_minutes=0.0, log_every=1, threads=1,
        keep_checkpoints=STEPS)
    kwargs = gpu_adam_arguments(cfg)
    if kwargs is None:
        return Measurement(None, False, "the loop's builder made no torch.optim.Adam for GPU parameters")
    examples = random_pairs(torch.Generator().manual_seed(ctx.seed), 12)
    with tempfile.TemporaryDirectory(prefix="repro-read-late-") as tmp:
        found = (_run_departures(cfg, examples, kwargs, Path(tmp)) + _skip_departures(cfg, examples, kwargs)
                 + _stop_departures(cfg, examples, kwargs, Path(tmp)))
    return Measurement(len(found), detail=(
        f"{STEPS} updates read late with the GPU path's Adam ({kwargs}) against the same run read at once, "
        f"a non-finite update, a run whose update {DIVERGES} is NaN: "
        + ("; ".join(found[:6]) if found else "the same run, nothing changed by the non-finite update, the run "
                                              f"stopped at update {DIVERGES} with no checkpoint for it")))
