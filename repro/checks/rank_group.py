"""Claims watched in a real two-process group (:mod:`repro.checks.group_probe`): the gradient of an
accumulated update over two ranks, the rate Adam steps at, and which of its passes synchronise, the
divergence stop raised on one rank, which rank writes checkpoints, what each rank trains on after a
resume, the perplexity a sharded evaluation reports, and the order of a sharded
evaluation's outputs. The group is spawned once per process and shared by these claims."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.checks.update_arithmetic import random_pairs, reference_losses
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.checks.group_probe import (RESUME_STOP, RESUME_UPDATES, SHARD_ITEMS, WORLD, observe_group, sharded_perplexity,
                                      step_rates)
from repro.train.loop import build

#: Each rank's passes (pairs per pass): unequal within and across ranks.
SPLITS = ((1, 2, 3), (3, 1, 2))
EXPERIMENT = "table2-base-ende"


@lru_cache(maxsize=2)
def _observed(seed: int) -> tuple[list[dict[str, Any]], list[list[list]]]:
    cfg = shrunk(job_config(EXPERIMENT))
    pairs = random_pairs(torch.Generator().manual_seed(seed), sum(map(sum, SPLITS)))
    passes, start = [], 0
    for split in SPLITS:
        bounds = np.cumsum([start, *split]).tolist()
        passes.append([pairs[a:b] for a, b in zip(bounds, bounds[1:])])
        start = bounds[-1]
    examples = random_pairs(torch.Generator().manual_seed(seed + 1), 8)
    return observe_group(cfg, SIZE["vocab_size"], passes, examples), passes


def _reference(passes: list[list[list]]) -> tuple[dict[str, torch.Tensor], float]:
    """One process's gradient of the mean smoothed loss over both ranks' target tokens."""
    cfg = shrunk(job_config(EXPERIMENT))
    model = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"]).model.eval()
    loss = torch.zeros((), dtype=torch.float64)
    tokens = 0
    for rank_passes in passes:
        for part in rank_passes:
            batch = collate(part)
            h, _, n = reference_losses(model(batch.src, batch.tgt_in), [t for _, t in part], cfg.label_smoothing)
            loss, tokens = loss + h, tokens + n
    (loss / tokens).backward()
    return {n: p.grad.double() for n, p in model.named_parameters() if p.grad is not None}, float(loss) / tokens


@checker("run.ddp_update")
def ddp_update(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.1's update over two data-parallel ranks, each accumulating three passes of unequal
    token counts (the loop's ``Trainer.update`` under DDP, gloo on the CPU, dropout off): the
    gradient each rank hands Adam against one process's gradient of the mean smoothed loss over
    all of the update's target tokens; only the last pass of each rank may synchronise gradients
    (a DDP communication hook records the pass it runs in). Measured: the largest difference
    relative to the largest gradient; a rank that synchronised in another pass, or ranks holding
    different gradients, fail the claim."""
    own(ctx)
    seen, passes = _observed(ctx.seed)
    want, loss = _reference(passes)
    scale = max_abs(torch.cat([g.flatten() for g in want.values()]), "the reference gradient")
    worst, problems = 0.0, []
    for r in seen:
        if not r["grads"]:
            problems.append(f"rank {r['rank']}: the optimizer stepped with no gradient")
            continue
        worst = max(worst, max(max_abs_diff(r["grads"].get(n, torch.zeros_like(g)), g, f"rank {r['rank']}'s gradient "
                                            f"of {n}") for n, g in want.items()) / scale)
        if r["synced"] != [r["passes"]]:
            problems.append(f"rank {r['rank']} synchronised gradients in passes {r['synced']} of {r['passes']} "
                            f"(only the last may)")
        if abs(r["stats"][0] / loss - 1) > 1e-5:
            problems.append(f"rank {r['rank']} reports a loss per token of {r['stats'][0]:.5f}, the mean over the "
                            f"update is {loss:.5f}")
    return Measurement(worst, False if problems else None, (
        f"{WORLD} ranks, passes of {SPLITS[0]} and {SPLITS[1]} pairs: largest gradient difference {worst:.1e} of the "
        f"largest gradient; passes that synchronised: " + ", ".join(f"rank {r['rank']}: {r['synced']}" for r in seen)
        + ("; " + "; ".join(problems) if problems else "")))


def _one_process_rates(passes: list[list[list]]) -> list[float]:
    """The rates one process's Adam steps at for the whole update (every rank's passes, accumulated)."""
    trainer = build(shrunk(job_config(EXPERIMENT)), [([5, 6], [7, 8])], SIZE["vocab_size"])
    trainer.model.eval()
    rates: list[list[float]] = []
    trainer.optimizer.register_step_pre_hook(lambda opt, *_: rates.append(step_rates(opt)))
    trainer.update([collate(part) for rank_passes in passes for part in rank_passes], 1)
    return rates[0]


@checker("run.ddp_rate")
def ddp_rate(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.3: Eq. 3 gives the rate of an update, whatever the number of GPUs that share it. In the
    two-rank group of :func:`ddp_update` (the loop's ``Trainer.update`` under DDP), the rate each rank's
    Adam steps at (read as the optimizer is about to step) against the rate one process's Adam steps
    at for the same update (all passes accumulated in one process). Measured: the largest relative
    difference; a rank that did not step fails the claim."""
    own(ctx)
    seen, passes = _observed(ctx.seed)
    want = _one_process_rates(passes)
    worst, problems = 0.0, []
    for r in seen:
        if not r.get("rates"):
            problems.append(f"rank {r['rank']}: the optimizer never stepped")
            continue
        got = torch.tensor(r["rates"], dtype=torch.float64)
        worst = max(worst, max_abs_diff(got, torch.tensor(want, dtype=torch.float64), f"rank {r['rank']}'s rate")
                    / max(abs(w) for w in want))
    return Measurement(worst, False if problems else None, (
        f"update 1: one process steps at {want[0]:.6g}; " + ", ".join(
            f"rank {r['rank']} at {r['rates'][0]:.6g}" for r in seen if r.get("rates"))
        + ("; " + "; ".join(problems) if problems else "")))


@checker("run.divergence_stop")
def divergence_stop(claim: Claim, ctx: CheckContext) -> Measurement:
    """The loop stops on a loss that is not finite: in a two-rank group, rank 1's loss made
    infinite (then NaN) in one pass of an accumulated update; every rank must raise
    ``TrainingDiverged`` and no rank may step. Measured: True when every rank did so for both."""
    own(ctx)
    seen, _ = _observed(ctx.seed)
    rows = [f"rank {r['rank']}: {kind} " + ("stopped" if r[f"stopped_{kind}"] else "went on")
            + (", stepped" if r[f"moved_{kind}"] else "") for kind in ("inf", "nan") for r in seen]
    ok = all(r[f"stopped_{k}"] and not r[f"moved_{k}"] for k in ("inf", "nan") for r in seen)
    return Measurement(ok, detail="a non-finite loss on rank 1 only: " + "; ".join(rows))


@checker("run.main_rank")
def main_rank(claim: Claim, ctx: CheckContext) -> Measurement:
    """Rank 0 is the main one: in a two-update run of the loop in a two-rank group, a checkpoint
    due after every update, each rank writing under its own folder, rank 0 must write both and
    rank 1 none. Measured: the steps each rank wrote, [rank 0's, rank 1's]."""
    own(ctx)
    seen, _ = _observed(ctx.seed)
    return Measurement([r["checkpoints"] for r in seen], detail=", ".join(
        f"rank {r['rank']} wrote checkpoints after updates {r['checkpoints']}" for r in seen))


@checker("run.resume_ranks")
def resume_ranks(claim: Claim, ctx: CheckContext) -> Measurement:
    """A requeued data-parallel job trains each rank on what it would have trained on had the job never
    stopped: the loop in a two-rank group (both ranks in one run directory, rank 0 writing the
    checkpoints), run for RESUME_UPDATES updates at once and stopped after RESUME_STOP then resumed;
    each rank's updates after the stop must draw the same examples in both. A resume that restores one
    rank's data position into every rank (the checkpoint's shard as written), or any other position,
    differs. Measured: the (rank, update) pairs whose examples differ."""
    own(ctx)
    seen, _ = _observed(ctx.seed)
    differ = [(r["rank"], RESUME_STOP + 1 + i)
              for r in seen for i, (a, b) in enumerate(zip(r["batches_once"][RESUME_STOP:], r["batches_resumed"][RESUME_STOP:]))
              if a != b]
    counts = [len(r["batches_resumed"]) for r in seen]
    if any(n != RESUME_UPDATES for n in counts):
        return Measurement(None, False, f"the resumed job's ranks made {counts} updates, not {RESUME_UPDATES} each")
    return Measurement(len(differ), detail=(
        f"{RESUME_UPDATES} updates at once against {RESUME_STOP} then resumed, {WORLD} ranks: "
        + (f"(rank, update) drawing other examples after the resume: {differ}" if differ else
           f"every rank drew the same examples in updates {RESUME_STOP + 1}-{RESUME_UPDATES}")))


@checker("run.sharded_perplexity")
def sharded_perplexity_over_ranks(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 3's perplexity measured by an evaluation split over a job's ranks is one process's: the
    evaluation's perplexity (:func:`repro.eval.translation.evaluate_perplexity`, with the sentences its
    bootstrap interval resamples) of the same freshly built model on the same dev split, on each rank of
    the two-rank group and in this process. Compared: the perplexity, the summed NLL, the wordpieces and
    the per-sentence NLLs and wordpieces (a rank that scores sentences another rank scores too counts
    them twice, and narrows the interval). Measured: the largest relative difference."""
    own(ctx)
    seen, _ = _observed(ctx.seed)
    with tempfile.TemporaryDirectory(prefix="repro-perplexity-") as tmp:
        alone = sharded_perplexity(Path(tmp) / "alone", shrunk(job_config(EXPERIMENT)), None)
    names = ("perplexity", "NLL", "wordpieces", "sentences", "sentences' NLL", "sentences' wordpieces")
    worst, where = 0.0, "none"
    for r in seen:
        for name, got, want in zip(names, r["perplexity"], alone):
            got = finite(got, f"rank {r['rank']}'s {name}")
            want = finite(want, f"one process's {name}")
            gap = abs(got / want - 1) if want else abs(got)
            if gap > worst:
                worst, where = gap, f"rank {r['rank']}'s {name} {got:.6g}, one process's {want:.6g}"
    return Measurement(worst, detail=(f"{WORLD} ranks against one process on {alone[3]:.0f} sentences, "
                                      f"{alone[2]:.0f} wordpieces (perplexity {alone[0]:.4f}); largest difference: {where}"))


@checker("run.shard_order")
def shard_order(claim: Claim, ctx: CheckContext) -> Measurement:
    """A sharded evaluation (:func:`repro.eval.sharding.map_sharded`, as BLEU's search runs over a
    job's ranks) puts the ranks' outputs back in input order: each rank tags its outputs; rank 0's
    list must be the inputs in order, item i from rank i mod W. Measured: True when it is."""
    own(ctx)
    seen, _ = _observed(ctx.seed)
    got = seen[0]["shards"]
    want = [f"{i % WORLD}:{i}" for i in range(SHARD_ITEMS)]
    same = all(r["shards"] == got for r in seen)
    return Measurement(got == want and same, detail=f"rank 0 holds {got}" + ("" if same else "; the ranks differ"))
