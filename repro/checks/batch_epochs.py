"""Section 5.1's batches as the jobs' batchers cut them, epoch after epoch: "Sentence pairs were
batched together by approximate sequence length. Each training batch contained a set of sentence
pairs containing approximately 25000 source tokens and 25000 target tokens."

Each checker builds the batcher the training loop builds (:func:`~repro.train.loop.batcher_for`) for
every recipe that trains on text (the paper's jobs: length buckets; the local job and the scaled
Table 3 rows: one sorted epoch cut), one per distinct batching setting, on the real WMT sample:

* the batches' order is drawn again every epoch (issue 42, as tensor2tensor and fairseq do): a pair's
  place among its epoch's batches tells nothing of its place in the next epoch;
* each pass holds about the plan's tokens per side (``tokens_per_micro_batch``: the paper's 25000 on
  one process), source and target each counted;
* the pairs of a pass are of about one length: its padding is a small share of the padding of passes
  of the same sizes drawn at random, and no padded side exceeds the recipe's tokens per device.
"""

from __future__ import annotations

import statistics
from itertools import islice

import numpy as np

from repro.checks.jobs import own
from repro.checks.recipe_runs import SAMPLE, sample_examples
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.data.buckets import BucketBatcher
from repro.recipes import RECIPES
from repro.train.config import TrainConfig
from repro.train.loop import Batcher, batcher_for
from repro.train.update_plan import plan_update

#: Recipes left out: the smoke job's synthetic copy task (its 32-token passes cannot hold a real pair).
NOT_ON_TEXT = ("smoke",)
#: The order is watched at this many tokens per side at most: the 10k-pair sample holds ~10 of the
#: paper's 25000-token passes an epoch (after ~3 epochs of the buckets' pre-roll), too few places to
#: tell an order apart; at 2000 it holds ~100-190 (the batcher and its settings are the job's).
ORDER_BUDGET = 2000
#: Consecutive epoch pairs compared (from the first epoch that yields passes), and passes counted.
EPOCH_PAIRS, PASSES = 5, 40


def watched_settings(budget_at_most: int | None = None) -> dict[tuple, tuple[list[str], TrainConfig]]:
    """The recipes' distinct batching settings (batching, bucket step, seed, tokens per update and per
    pass), each with the recipes that share it and the first one's training config; with
    ``budget_at_most``, the token budgets are lowered to it."""
    found: dict[tuple, tuple[list[str], TrainConfig]] = {}
    for name, recipe in RECIPES.items():
        if name in NOT_ON_TEXT:
            continue
        cfg = recipe.train
        if budget_at_most is not None:
            cfg = cfg.replace(tokens_per_batch=min(cfg.tokens_per_batch, budget_at_most),
                              max_tokens_per_device=min(cfg.max_tokens_per_device, budget_at_most))
        key = (cfg.batching, cfg.bucket_step, cfg.seed, cfg.tokens_per_batch, cfg.max_tokens_per_device)
        found.setdefault(key, ([], cfg))[0].append(name)
    return found


def _label(names: list[str], cfg: TrainConfig) -> str:
    shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
    return f"{cfg.batching} {cfg.tokens_per_batch}/{cfg.max_tokens_per_device} ({shown})"


def places(batches: list[np.ndarray]) -> dict[int, float]:
    """Each pair's place in an epoch: the position of the first pass that holds it, from 0 to 1."""
    last = max(len(batches) - 1, 1)
    found: dict[int, float] = {}
    for j, batch in enumerate(batches):
        for i in batch.tolist():
            found.setdefault(i, j / last)
    return found


def epoch_problem(batcher: Batcher, epochs: list[list[np.ndarray]], pairs: int) -> str:
    """What breaks the batcher's promise about which pairs each epoch batches (``""``: nothing). Sorted
    epochs: every pair exactly once an epoch. Length buckets: each epoch streams every pair once, and
    a pair may wait in its bucket for later epochs (and a bucket filled over several epochs may hold
    it twice, :mod:`repro.data.buckets`), so over E epochs no pair is batched more than E times."""
    counts = np.zeros(pairs, dtype=np.int64)
    for e, batches in enumerate(epochs):
        held = np.concatenate([np.zeros(0, dtype=np.int64), *batches])
        if not isinstance(batcher, BucketBatcher) and not np.array_equal(np.sort(held), np.arange(pairs)):
            return f"epoch {e}: its passes hold {len(held)} pairs ({len(np.unique(held))} distinct) of {pairs}, each once"
        np.add.at(counts, held, 1)
    if counts.max() > len(epochs):
        return f"a pair is batched {counts.max()} times in {len(epochs)} epochs (each epoch streams it once)"
    return ""


def waiting_problem(batcher: Batcher, pairs: int) -> str:
    """What breaks the length buckets' other promise (``""``: nothing, or not a bucket batcher): a pair
    may wait in its bucket, but every pair streamed in epoch 0 is batched by epoch ``2 * MAX_WAIT``
    (:mod:`repro.data.buckets`); a batcher that drops what waits, or lets it wait on, never trains on
    some pairs. Counted over epochs 0 to ``max_empty_epochs``."""
    if not isinstance(batcher, BucketBatcher):
        return ""
    last = batcher.max_empty_epochs
    seen = np.zeros(pairs, dtype=bool)
    for epoch in range(last + 1):
        for batch in batcher.epoch_batches(epoch):
            seen[batch] = True
    if seen.all():
        return ""
    never = np.flatnonzero(~seen)
    return (f"{len(never)} of {pairs} pairs (the first: {never[:5].tolist()}) are in no pass of epochs 0-{last}, "
            f"although each waits at most {last} epochs")


def order_correlation(batcher: Batcher, pairs: int) -> tuple[float, str, int]:
    """The mean, over :data:`EPOCH_PAIRS` pairs of consecutive epochs from the first that yields passes,
    of the correlation of the pairs' places in the two epochs (0: reshuffled; 1: the same order), what
    breaks the epochs' promise (:func:`epoch_problem`, :func:`waiting_problem`), and the passes per epoch
    (the first)."""
    first = next(e for e in range(BucketBatcher.max_empty_epochs + 1) if batcher.epoch_batches(e))
    epochs = [batcher.epoch_batches(first + k) for k in range(EPOCH_PAIRS + 1)]
    found = []
    for a, b in zip(epochs, epochs[1:]):
        pa, pb = places(a), places(b)
        common = [i for i in pa if i in pb]
        x, y = np.array([pa[i] for i in common]), np.array([pb[i] for i in common])
        same = x.std() == 0 or y.std() == 0   # one pass an epoch: no order to draw (counts as unshuffled)
        found.append(1.0 if same else float(np.corrcoef(x, y)[0, 1]))
    problem = epoch_problem(batcher, epochs, pairs) or waiting_problem(batcher, pairs)
    return statistics.mean(found), problem, len(epochs[0])


@checker("run.batch_order")
def batch_order(claim: Claim, ctx: CheckContext) -> Measurement:
    """Batches by length "with the order still random across epochs" (issue 42): for every recipe's
    batching (:func:`watched_settings`, budgets lowered to :data:`ORDER_BUDGET`), the batcher the
    loop builds on one process, over the WMT sample, seeded with the recipe's seed (the verdict is
    the same on every run). Measured: the largest, over the settings, of the mean correlation of a
    pair's place in one epoch with its place in the next; a batcher whose epochs do not hold the
    pairs it promises (:func:`epoch_problem`) fails the claim."""
    own(ctx)
    examples = sample_examples(claim.params.get("vocab_size", 8000))
    worst, problems, parts = -1.0, [], []
    for names, cfg in watched_settings(ORDER_BUDGET).values():
        corr, problem, passes = order_correlation(batcher_for(cfg, examples, 1, 0), len(examples))
        worst = max(worst, corr)
        parts.append(f"{_label(names, cfg)}: {corr:.3f} ({passes} passes an epoch)")
        if problem:
            problems.append(f"{_label(names, cfg)}: {problem}")
    return Measurement(round(worst, 3), False if problems else None, (
        f"{SAMPLE}, {EPOCH_PAIRS} pairs of consecutive epochs, correlation of the pairs' places: " + "; ".join(parts)
        + ("; " + "; ".join(problems) if problems else "")))


@checker("run.batch_side_tokens")
def batch_side_tokens(claim: Claim, ctx: CheckContext) -> Measurement:
    """"Approximately 25000 source tokens and 25000 target tokens", each side counted: for every
    recipe's batching (:func:`watched_settings`, each at its own budget), the first :data:`PASSES`
    passes of the batcher the loop builds on one process over the WMT sample, the real tokens each
    reports per side (targets with EOS, as the loop counts them) against the plan's tokens per side
    (``tokens_per_micro_batch``; the paper's 25000 at the paper's scale). Measured: the largest
    departure, over the settings and the two sides, of the median pass from the plan's budget, as a
    share of it."""
    own(ctx)
    examples = sample_examples(claim.params.get("vocab_size", 8000))
    worst, parts = 0.0, []
    for names, cfg in watched_settings().values():
        budget = plan_update(cfg.tokens_per_batch, 1, cfg.max_tokens_per_device).tokens_per_micro_batch
        passes = list(islice(iter(batcher_for(cfg, examples, 1, 0)), PASSES))
        src = statistics.median(b.src_tokens for b in passes) / budget
        tgt = statistics.median(b.tgt_tokens for b in passes) / budget
        worst = max(worst, abs(src - 1), abs(tgt - 1))
        parts.append(f"{_label(names, cfg)}: median source {src:.3f}, target {tgt:.3f} of {budget}")
    return Measurement(round(worst, 3), detail=f"{SAMPLE}, {PASSES} passes each: " + "; ".join(parts))


@checker("run.batch_by_length")
def batch_by_length(claim: Claim, ctx: CheckContext) -> Measurement:
    """"Sentence pairs were batched together by approximate sequence length": for every recipe's
    batching (:func:`watched_settings`, each at its own budget), the first :data:`PASSES` passes of the
    batcher the loop builds on one process over the WMT sample (and over the sample turned round, the
    source the longer side). Measured: the largest, over the settings, of the padding those passes
    carry as a share of the padding of passes of the same sizes drawn at random (seeded with the
    recipe's seed); a pass of several pairs whose padded source or target (EOS counted) exceeds the
    recipe's tokens per device fails the claim."""
    own(ctx)
    examples = sample_examples(claim.params.get("vocab_size", 8000))
    worst, parts = 0.0, []
    for names, cfg in watched_settings().values():
        for pairs, way in ((examples, "EN-DE"), ([(t, s) for s, t in examples], "DE-EN")):
            passes = list(islice(iter(batcher_for(cfg, pairs, 1, 0)), PASSES))
            over = [b for b in passes if b.src.size(0) > 1
                    and max(b.src.numel(), b.tgt_out.numel()) > cfg.max_tokens_per_device]
            if over:
                b = over[0]
                return Measurement(None, False, (
                    f"{_label(names, cfg)}, {way}: {len(over)} of {len(passes)} passes exceed the recipe's "
                    f"{cfg.max_tokens_per_device} padded tokens a side, the first {tuple(b.src.shape)} source / "
                    f"{tuple(b.tgt_out.shape)} target"))
            rng = np.random.default_rng(cfg.seed)
            # a pass may hold more pairs than a tiny corpus (buckets repeat pairs there): drawn with replacement then
            drawn = [collate([pairs[i] for i in rng.choice(len(pairs), n, replace=n > len(pairs))])
                     for n in (b.src.size(0) for b in passes)]
            ours, random = _padding(passes), _padding(drawn)
            ratio = ours / max(random, 1e-12)
            worst = max(worst, ratio)
            parts.append(f"{_label(names, cfg)}, {way}: padding {ours:.1%} against {random:.1%} at random ({ratio:.3f})")
    return Measurement(round(worst, 3), detail=f"{SAMPLE}, {PASSES} passes each: " + "; ".join(parts))


def _padding(passes: list) -> float:
    """PAD positions over all positions of the passes' source and target tensors."""
    real = sum(b.src_tokens + b.tgt_tokens for b in passes)
    return 1 - real / sum(b.src.numel() + b.tgt_out.numel() for b in passes)
