"""Section 6.1's checkpoints as a run leaves them: which ones pruning keeps (the evaluation averages
the newest), and which one a resumed run starts from. Watched on short runs of the training loop
(a small model of the job's settings, a fake clock, a checkpoint after every update)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import torch

import repro.train.loop as loop

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.checks.update_arithmetic import random_pairs
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Inconclusive, Measurement
from repro.train.checkpoint import list_checkpoints, load_checkpoint, step_of
from repro.train.loop import run
from repro.train.prefetch import prefetcher
from repro.train.probes import files_dated_against_steps, pruned_run


def _short_run(cfg, out_dir: Path, steps: int, seed: int, examples: list | None = None, **hooks) -> None:
    ticks = [0]
    run(cfg.replace(out_dir=str(out_dir), max_steps=steps, checkpoint_every_steps=1, checkpoint_every_minutes=0.0,
                    log_every=10**6, threads=1),
        examples or random_pairs(torch.Generator().manual_seed(seed), 6), SIZE["vocab_size"], log=lambda _: None,
        clock=lambda: ticks[0], **hooks)


def _small(claim: Claim):
    cfg = job_config(claim.params.get("experiment", "table2-base-ende"), claim.params.get("job"))
    small = shrunk(cfg).replace(model_overrides={**shrunk(cfg).model_overrides, "n_layers": 1, "d_model": 8,
                                                 "d_ff": 8, "n_heads": 1})
    return cfg, small


@checker("run.checkpoints_kept")
def checkpoints_kept(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's pruning (``keep_checkpoints``) on a run of the loop that has written a checkpoint
    after each of keep + 2 updates (one real, relabelled) and makes one more: the checkpoints left
    must be those of the newest ``keep`` updates,
    and they must hold at least the job's ``average_last`` (the evaluation averages the newest).
    Measured: True when the run left exactly the newest ``keep``."""
    own(ctx)
    cfg, small = _small(claim)
    keep, steps = cfg.keep_checkpoints, cfg.keep_checkpoints + 3
    ticks = [0]
    with tempfile.TemporaryDirectory(prefix="repro-keep-") as tmp:
        left = pruned_run(small.replace(log_every=10**6, threads=1), tmp, steps,
                          random_pairs(torch.Generator().manual_seed(ctx.seed), 6), SIZE["vocab_size"],
                          clock=lambda: ticks[0])
    newest = list(range(steps - keep + 1, steps + 1))
    ok = left == newest and len(left) >= cfg.average_last
    return Measurement(ok, detail=(f"job keeps {keep}, averages {cfg.average_last}; after {steps} updates the run "
                                   f"left the checkpoints of updates {left}" + ("" if left == newest else
                                                                               f" (the newest {keep}: {newest})")))


@checker("run.resume_newest")
def resume_newest(claim: Claim, ctx: CheckContext) -> Measurement:
    """A resumed run starts from the newest checkpoint: a run of the loop leaves checkpoints of
    several updates (their files dated against their steps, :func:`repro.train.probes.files_dated_against_steps`);
    run again with a larger ``max_steps``, the model it starts from (read when
    the trainer is built and restored) must be the newest checkpoint's, and its first update the
    one after it. Measured: True when both hold."""
    own(ctx)
    _, small = _small(claim)
    with tempfile.TemporaryDirectory(prefix="repro-resume-") as tmp:
        _short_run(small.replace(keep_checkpoints=4, average_last=1), Path(tmp), 4, ctx.seed)
        states = {step_of(p): load_checkpoint(p)["model"] for p in list_checkpoints(tmp)}
        files_dated_against_steps(tmp)
        started, steps = [], []
        _short_run(small.replace(keep_checkpoints=8, average_last=1), Path(tmp), 5, ctx.seed,
                   on_built=lambda t: started.append({k: v.detach().clone() for k, v in t.model.state_dict().items()}),
                   on_step=steps.append)
    matches = [s for s, state in states.items() if all(torch.equal(state[k], started[0][k]) for k in state)]
    newest = max(states)
    ok = matches == [newest] and steps[:1] == [newest + 1]
    return Measurement(ok, detail=(f"checkpoints of updates {sorted(states)}; the resumed run started from the weights of "
                                   f"update(s) {matches or 'none of them'} and made updates {steps}"))


@checker("run.resume_exact")
def resume_exact(claim: Claim, ctx: CheckContext) -> Measurement:
    """A requeued job trains as if it had never stopped: the job's settings (dropout on) on a small
    model and a corpus of several batches per epoch, run for ``updates`` updates at once, and run
    to ``stop`` updates then resumed to ``updates``; the weights must be equal bit for bit. Both
    batch sources the loop runs are watched: the CPU's (one update's batches at a time) and the
    GPU's prefetcher (the next updates' batches read ahead in a worker process), whose checkpoint must hold
    the position of what was consumed, not of what was read. What a resume must restore, the RNG
    (dropout masks, the batcher's shuffles) and the data position among it, each changes the
    weights. Measured: the largest |difference| of a weight over both sources."""
    own(ctx)
    _, small = _small(claim)
    if not small.model_config().dropout > 0:
        raise Inconclusive("the job's model has no dropout: a resume that loses the RNG could not show")
    updates, stop = int(claim.params.get("updates", 6)), int(claim.params.get("stop", 3))
    small = small.replace(tokens_per_batch=24, max_tokens_per_device=24, keep_checkpoints=updates + 1, average_last=1)
    pairs = random_pairs(torch.Generator().manual_seed(ctx.seed), 12)
    worst, rows = 0.0, []
    for source, batches in (("the CPU's batches", loop.batches_for),
                            ("the GPU's prefetcher", lambda t: prefetcher(t.batcher, t.accumulation, pin=False))):
        with tempfile.TemporaryDirectory(prefix="repro-resume-") as tmp, \
                mock.patch.object(loop, "batches_for", batches):
            finals = []
            for name, legs in (("once", [updates]), ("resumed", [stop, updates])):
                for steps in legs:
                    _short_run(small, Path(tmp) / name, steps, ctx.seed, examples=pairs)
                finals.append(load_checkpoint(list_checkpoints(Path(tmp) / name)[-1])["model"])
        gap = max(finite((a - finals[1][k]).abs().max().item(), f"weight {k}") for k, a in finals[0].items())
        worst = max(worst, gap)
        rows.append(f"{source}: {gap:.3g}")
    return Measurement(worst, detail=f"{updates} updates at once against {stop} then resumed to {updates}, largest "
                                     f"|weight difference| with {'; '.join(rows)}")
