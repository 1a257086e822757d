"""Section 5's recipe observed on the code that runs the paper's experiments (repro's own).

The job specs of ``repro submit`` (the table2-base-ende job on the paper's 8 P100) feed the
batcher, the training objective and the model the loop builds; these checkers run those pieces
on real data and measure what they do: tokens per update, batching by length, one vocabulary
for both languages, the right shift of the decoder's input, the smoothing the objective hands to
its loss, and the dropout rate of each job's model.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache
from unittest import mock

import torch

import repro.train.loss as loss_module
from repro.checks.dropout import evaluating, observe
from repro.checks.jobs import PAPER_PROFILE, SIZE, job_config, job_spec, own, shrunk
from repro.checks.loop_batches import indices, loop_updates
from repro.checks.positional import reference_encoding
from repro.checks.sinusoids import NotSinusoidPairs, find_pairs
from repro.checks.training_data import SOURCE_WORDS, TARGET_WORDS, disjoint_run
from repro.cluster.profiles import load_profile
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs, max_abs_diff
from repro.claims.outcome import CheckContext, Inconclusive, Measurement, NotRun
from repro.data.batching import TokenBatcher, collate
from repro.data.buckets import BucketBatcher
from repro.data.corpus import read_parallel
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import BOS, EOS, SharedVocab
from repro.errors import DataError
from repro.files.reader import iter_lines
from repro.eval.perplexity import perplexity
from repro.train.config import TrainConfig
from repro.train.data import encode_pairs
from repro.train.loop import batcher_for, build
from repro.train.probes import last_update
from repro.train.update_step import accumulate
from repro.train.update_plan import plan_update

#: Real WMT 2014 EN-DE sentence pairs (10000; tensor2tensor-style tokenized) from the data directory.
SAMPLE = "opennmt-wmt-ende-sample"


@lru_cache(maxsize=2)
def sample_examples(vocab_size: int) -> list[tuple[list[int], list[int]]]:
    """The WMT sample encoded with a joint BPE learned on it (cached: several claims use it)."""
    try:
        src, tgt = get_dataset(SAMPLE, resolve_data_dir()).split("train")
    except DataError as err:
        raise NotRun(f"needs the data directory's {SAMPLE} ({err})") from None
    pairs = read_parallel(src, tgt).pairs
    vocab = SharedVocab.train([s for s, _ in pairs] + [t for _, t in pairs], vocab_size)
    return encode_pairs(vocab, pairs, max_len=256)[0]


@checker("run.tokens_per_update")
def tokens_per_update(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's update on a cluster profile (``profile``, default the paper's 8 P100): the batcher
    the training loop builds for every rank (:func:`repro.train.loop.batcher_for`, ranks simulated by
    shards) and the accumulation it plans, read as the loop reads them (its batch source,
    :mod:`repro.checks.loop_batches`: the CPU's, and the GPU's prefetcher must give rank 0 the same
    updates), on real WMT text. Measured: mean [source, target] real
    tokens per update over ``updates`` updates (the padded sizes are given in the detail); a pass
    that holds more padded tokens than the device's cap fails the claim. ``max_tokens_per_device``
    (optional): a device that holds fewer padded tokens per pass than the profile's (it must accumulate)."""
    own(ctx)
    profile = load_profile(claim.params.get("profile", PAPER_PROFILE))
    cfg = job_config(claim.params.get("experiment", "table2-base-ende"), profile=profile.name)
    if "max_tokens_per_device" in claim.params:
        bound = int(claim.params["max_tokens_per_device"])
        cfg = cfg.replace(max_tokens_per_device=min(cfg.max_tokens_per_device, bound))
    world = profile.world_size
    plan = plan_update(cfg.tokens_per_batch, world, cfg.max_tokens_per_device)
    examples = sample_examples(claim.params.get("vocab_size", 8000))
    updates = min(len(examples) // 64, claim.params.get("updates", 20))
    # every rank's updates as the loop's own batch source gives them (the CPU's: a process's own batches)
    ranks = [loop_updates(batcher_for(cfg, examples, world, rank), plan.accumulation, updates, on_gpu=False)
             for rank in range(world)]
    # and a GPU job's source (its prefetcher, one worker) must give rank 0 the same updates
    gpu = loop_updates(batcher_for(cfg, examples, world, 0), plan.accumulation, updates, on_gpu=True)
    sources = "" if indices(gpu) == indices(ranks[0]) else (
        f"the loop's batch sources disagree: passes per update {[len(u) for u in gpu[:4]]} (GPU) and "
        f"{[len(u) for u in ranks[0][:4]]} (CPU), the plan accumulates {plan.accumulation}")
    src, tgt, padded, largest = [], [], [], 0
    for step in range(updates):
        batches = [b for passes in ranks for b in passes[step]]
        src.append(sum(b.src_tokens for b in batches))
        tgt.append(sum(b.tgt_tokens for b in batches))
        padded.append((sum(b.src.numel() for b in batches), sum(b.tgt_out.numel() for b in batches)))
        largest = max(largest, *(max(b.src.numel(), b.tgt_out.numel()) for b in batches))
    measured = [round(statistics.mean(src)), round(statistics.mean(tgt))]
    over = largest > cfg.max_tokens_per_device  # a device's pass may hold no more than its cap, padding included
    split = shards_split_the_epoch(cfg, examples, world)
    return Measurement(measured, False if over or split or sources else None, (
        f"{plan.describe()}; {updates} updates of {SAMPLE}: real source {min(src)}-{max(src)}, target "
        f"{min(tgt)}-{max(tgt)} per update; padded {round(statistics.mean(p for p, _ in padded))} + "
        f"{round(statistics.mean(t for _, t in padded))}; the largest pass holds {largest} padded tokens"
        + (f" (over the device's cap of {cfg.max_tokens_per_device})" if over else "") + (f"; {split}" if split else "")
        + (f"; {sources}" if sources else "")))


def shards_split_the_epoch(cfg: TrainConfig, examples: list, world: int, epochs: int = 3) -> str:
    """What is wrong, if anything, with how the ranks' batchers share each epoch: together they must
    take every pass one process would cut at their budget, each once, and no other; a rank's share
    is padded with repeats only up to the same number of passes as the others' (``""``: nothing)."""
    ranks = [batcher_for(cfg, examples, world, rank) for rank in range(world)]
    one = ranks[0]
    whole = (BucketBatcher(examples, one.max_tokens, seed=one.seed, budget=one.budget, max_sentences=one.max_sentences,
                           step=one.step) if isinstance(one, BucketBatcher) else
             TokenBatcher(examples, one.max_tokens, shuffle=True, seed=one.seed, budget=one.budget,
                          max_sentences=one.max_sentences))
    for epoch in range(epochs):
        want = [tuple(b.tolist()) for b in whole.epoch_batches(epoch)]
        got = [[tuple(b.tolist()) for b in rank.epoch_batches(epoch)] for rank in ranks]
        share = -(-len(want) // world)
        if any(len(g) != share for g in got) or sorted({b for g in got for b in g}) != sorted(set(want)) \
                or sum(map(len, got)) - len(want) >= world:
            return (f"epoch {epoch}: the {world} ranks take {[len(g) for g in got]} passes, one process cuts "
                    f"{len(want)} (each rank must take {share}, together every pass once)")
    return ""


@checker("run.shared_vocabulary")
def shared_vocabulary(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.1: "a shared source-target vocabulary": the training data path learns one BPE on
    both sides, and encodes the pairs with it. On a corpus whose two sides share no word
    (:func:`repro.checks.training_data.disjoint_run`), the vocabulary it builds must hold merged
    word-pieces of each side, and the encoded pairs the loop trains on must be those pieces (each
    word of each side one piece: a sentence encoded otherwise than the vocabulary was learned, as a
    first word without the space BPE saw before it, is more). Measured: True when both hold."""
    own(ctx)
    vocab, examples = disjoint_run()
    whole = {w: len(vocab.tokens(w)) == 1 for w in SOURCE_WORDS + TARGET_WORDS}
    source_side = all(whole[w] for w in SOURCE_WORDS)
    target_side = all(whole[w] for w in TARGET_WORDS)
    pieces = sorted({(len(s), len(t)) for s, t in examples})
    encoded = pieces == [(len(SOURCE_WORDS), len(TARGET_WORDS))]
    return Measurement(source_side and target_side and encoded, detail=(
        f"one token each: source words {source_side}, target words {target_side} ({len(vocab)} entries); "
        f"the run's encoded pairs hold {pieces} pieces per side ({len(SOURCE_WORDS)} words each)"))


@checker("run.shifted_right")
def shifted_right(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: "the output embeddings are offset by one position": in the batches the loop
    trains on, the decoder's input at position t is the target at t - 1 (BOS first), so that the
    prediction at t sees only earlier targets. Measured: True when every batch is so."""
    own(ctx)
    examples = [([5, 6, 7], [8, 9, 10, 11]), ([5], [12, 13])]
    batch = collate(examples)
    ok = True
    for row, (_, target) in enumerate(examples):
        n = len(target)
        ok &= batch.tgt_in[row, 0].item() == BOS
        ok &= batch.tgt_in[row, 1:n + 1].tolist() == target and batch.tgt_out[row, :n].tolist() == target
        ok &= batch.tgt_out[row, n].item() == EOS
    return Measurement(bool(ok), detail=f"decoder input {batch.tgt_in.tolist()}, targets {batch.tgt_out.tolist()}")


def objective_epsilon(cfg: TrainConfig) -> list[float]:
    """The smoothing the training objective the loop builds for ``cfg`` (shrunk in size only)
    hands to its loss kernel, at each call of one training step."""
    trainer = build(shrunk(cfg), [([5, 6], [7, 8])], 40)
    seen: list[float] = []
    kernel = loss_module.projection_loss

    def spy(*args, **kwargs):
        seen.append(kwargs["epsilon"])
        return kernel(*args, **kwargs)

    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])])
    with mock.patch.object(loss_module, "projection_loss", spy):
        trainer.objective(batch.src, batch.tgt_in, batch.tgt_out, 1.0)
    return seen


@checker("run.objective_smoothing")
def objective_smoothing(claim: Claim, ctx: CheckContext) -> Measurement:
    """The label smoothing the training objective of the job hands to its loss kernel when the
    loop calls it (the kernel itself is checked by sec5.label-smoothing.loss)."""
    own(ctx)
    experiment = claim.params.get("experiment", "table2-base-ende")
    seen = objective_epsilon(job_config(experiment, claim.params.get("job")))
    if not seen:
        return Measurement(None, False, "the objective never called the loss kernel")
    job = claim.params.get("job") or experiment
    return Measurement(finite(seen[0], "the smoothing"), detail=(
        f"job {job}: epsilon passed to the loss by the objective the loop builds: {seen}"))


@checker("run.job_dropout")
def job_dropout(claim: Claim, ctx: CheckContext) -> Measurement:
    """P_drop of a job, observed: the model the loop builds for the job (shrunk in size only), in
    train mode, at every sub-layer output. Measured: the mean fraction zeroed."""
    own(ctx)
    spec = job_spec(claim.params["experiment"], claim.params.get("job"))
    cfg = shrunk(TrainConfig.from_dict(spec.train))
    trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"])
    model = trainer.model.train()
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(8, 16, SIZE["d_model"], generator=gen)
    fractions = []
    with torch.no_grad():
        for layer in model.encoder_layers:
            for sub in layer.sublayers:
                clean = layer.feed_forward(x)
                dropped = sub.dropout(clean)
                fractions.append(observe("sub-layer", dropped, clean, cfg.model_config().dropout or 0.5).dropped)
    mean = statistics.mean(fractions)
    return Measurement(round(mean, 2), detail=f"job {spec.name}: {len(fractions)} sub-layer outputs, "
                                              f"{mean:.3f} of their elements zeroed in train mode")


@checker("run.perplexity_per_wordpiece")
def perplexity_per_wordpiece(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 3: "Listed perplexities are per-wordpiece, according to our byte-pair encoding": the
    evaluation's perplexity (the one cluster jobs report for table3.ppl.*) against exp of the mean
    negative log-likelihood of every target wordpiece and EOS, computed here from the model's
    logits. Measured: |relative difference|."""
    own(ctx)
    gen = torch.Generator().manual_seed(ctx.seed)
    model = build(shrunk(job_config("table3", "table3-base")), [([5, 6], [7, 8])], SIZE["vocab_size"]).model
    if not model.cfg.dropout > 0:
        raise Inconclusive("the job's model has no dropout: a perplexity measured with dropout on could not differ")
    examples = [(torch.randint(4, SIZE["vocab_size"], (int(n),), generator=gen).tolist(),
                 torch.randint(4, SIZE["vocab_size"], (int(m),), generator=gen).tolist())
                for n, m in torch.randint(2, 12, (9, 2), generator=gen)]
    # Handed over as the training loop hands it over for its dev perplexity: in train mode, dropout
    # on. The evaluation is the one to switch dropout off (and back on for the training after it).
    measured = perplexity(model.train(), examples).ppl
    if not model.training:
        return Measurement(None, False, "the evaluation left the model in eval mode: training would go on without dropout")
    nll, tokens = 0.0, 0
    with torch.no_grad(), evaluating(model):
        for src, tgt in examples:
            batch = collate([(src, tgt)])
            logp = model(batch.src, batch.tgt_in).log_softmax(-1)[0]
            nll -= logp.gather(1, batch.tgt_out[0][:, None]).sum().item()
            tokens += len(tgt) + 1
    want = math.exp(nll / tokens)
    return Measurement(abs(measured / want - 1), detail=f"evaluation {measured:.4f}, exp(NLL / {tokens} wordpieces) {want:.4f}")


@checker("run.job_positions")
def job_positions(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.5 and Table 3 row (E): what a job's model adds to the embeddings, observed on the
    model its training loop builds (shrunk in size only, dropout off): the first encoder layer's
    input minus the scaled embedding. It is ``learned`` when a parameter other than the embedding
    receives a gradient through it, ``sinusoidal`` when it is Section 3.5's table (to 1e-5) and
    no parameter does, else ``other``. Measured: that word."""
    own(ctx)
    experiment, job = claim.params["experiment"], claim.params.get("job")
    kind, how = added_positions(job_config(experiment, job), ctx.seed)
    return Measurement(kind, detail=f"job {job or experiment}: the encoder's input minus the scaled embedding {how}")


def added_positions(cfg: TrainConfig, seed: int = 0) -> tuple[str, str]:
    """(``learned``, ``sinusoidal`` or ``other``, what was seen) for what the model the loop
    builds for ``cfg`` adds to the embeddings (:func:`job_positions`)."""
    model = build(shrunk(cfg), [([5, 6], [7, 8])], SIZE["vocab_size"]).model.eval()
    tokens = torch.randint(4, SIZE["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(seed))
    embedding = model.src_embed(tokens)
    added = model._embed(tokens, model.src_embed, model.src_pos) - embedding
    finite(added, "what the model adds to the embeddings")
    others = [(name, p) for name, p in model.named_parameters() if p is not model.src_embed.weight]
    grads = torch.autograd.grad(added.sum(), [p for _, p in others], allow_unused=True)
    learned = sorted({name.rsplit(".", 1)[0] for (name, _), g in zip(others, grads) if g is not None and g.abs().sum() > 0})
    table = reference_encoding(12, SIZE["d_model"])
    sinusoid = (added[0].detach().double() - table).abs().max().item() <= 1e-5
    kind = "learned" if learned else "sinusoidal" if sinusoid else "other"
    how = (f"moves parameters {', '.join(learned)}" if learned else "depends on no parameter") + (
        "; it is Section 3.5's sinusoid table" if sinusoid else "")
    return kind, how


@checker("run.job_steps")
def job_steps(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.2's training steps, observed: the last update the training loop makes when it
    runs the job's settings (params.experiment, .job), found by resuming it from relabelled
    checkpoints (:func:`repro.train.probes.last_update`, at most one update per probe). The paper's
    figure only says where to look first (after update S - 1 an update, after S none); where the
    loop does otherwise, a bisection finds where it stops."""
    own(ctx)
    experiment, job = claim.params["experiment"], claim.params.get("job")
    last = last_update(job_config(experiment, job), guess=int(claim.expected))
    return Measurement(last, detail=f"job {job or experiment}: resumed after update {last - 1} the loop makes one "
                                    f"more update; resumed after update {last} it stops")


@checker("run.lengths_below_width")
def lengths_below_width(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 4: self-attention is faster than recurrence "when the sequence length n is smaller
    than the representation dimensionality d, which is most often the case with sentence
    representations used by state-of-the-art models in machine translations, such as word-piece
    and byte-pair representations". On real WMT 2014 EN-DE text encoded with a joint BPE by the
    training data path, against d_model of the base job's model: the fraction of sentence pairs
    whose longer side has n < d. Measured: that fraction."""
    own(ctx)
    d = job_config(claim.params.get("experiment", "table2-base-ende")).model_config().d_model
    examples = sample_examples(claim.params.get("vocab_size", 8000))
    lengths = [max(len(s), len(t)) for s, t in examples]
    below = sum(n < d for n in lengths) / len(lengths)
    return Measurement(round(below, 4), detail=(
        f"{len(lengths)} pairs of {SAMPLE}: {below:.2%} have n < d = {d} wordpieces (median n "
        f"{statistics.median(lengths):.0f}, longest {max(lengths)})"))


@checker("run.parser_training_size", audits=False)
def parser_training_size(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 6.3's training sets ("the Wall Street Journal (WSJ) portion of the Penn Treebank,
    about 40K training sentences"; semi-supervised "approximately 17M sentences"): the sentences
    of the training split the parser job (params.experiment) trains on, counted where its
    prepared folder is on this machine; "not run" where it is not (the corpora are the user's)."""
    own(ctx)
    cfg = job_config(claim.params["experiment"])
    try:
        dataset = get_dataset(cfg.dataset, resolve_data_dir(cfg.data_dir))
        source, _ = dataset.split("train")
    except DataError as err:
        raise NotRun(f"needs the job's training data on this machine ({err})") from None
    count = sum(1 for _ in iter_lines(source, "training corpus", error=DataError))
    return Measurement(count, detail=f"job {claim.params['experiment']}: {count} sentences in {source}")


def _one_step_error(table: torch.Tensor, seen: int) -> float:
    """max |PE(p + 1) - M PE(p)| over the positions p >= ``seen``, with M fitted on the positions
    below ``seen`` only: the table's columns are grouped into (sine, cosine) pairs on those
    positions (:func:`repro.checks.sinusoids.find_pairs`) and a 2 x 2 map fitted per pair; a table
    that is no set of such pairs on the seen positions cannot be continued (infinite error)."""
    try:
        pairs = find_pairs(table[:seen])
    except NotSinusoidPairs:
        return float("inf")
    worst = 0.0
    for columns in zip(pairs.sine, pairs.cosine):
        cols = list(columns)
        m = torch.linalg.lstsq(table[: seen - 1, cols], table[1:seen, cols]).solution
        worst = max(worst, float((table[seen:-1, cols] @ m - table[seen + 1:, cols]).abs().max()))
    return worst


@checker("run.position_extrapolation")
def position_extrapolation(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.5: "We chose the sinusoidal version because it may allow the model to extrapolate
    to sequence lengths longer than the ones encountered during training." Observed on what the
    base job's model adds to its embeddings (the model its loop builds, shrunk in width): the
    linear map from one position's encoding to the next, fitted on the positions a training
    sequence can reach (the job's max_len), must still hold on positions up to four times
    further. Measured: its worst error there. The detail gives the same for the learned positions
    of Table 3's row (E), which carry no such structure beyond what training touches."""
    own(ctx)
    cfg = job_config(claim.params.get("experiment", "table2-base-ende"))
    seen = min(cfg.max_len, 256)
    errors = {}
    for name, job_cfg in (("sinusoids", cfg), ("learned (row E)", job_config("table3", "table3-E-learned"))):
        model = build(shrunk(job_cfg), [([5, 6], [7, 8])], SIZE["vocab_size"]).model.eval()
        length = min(4 * seen, model.cfg.max_positions)
        tokens = torch.full((1, length), 5, dtype=torch.long)
        with torch.no_grad():
            table = finite((model._embed(tokens, model.src_embed, model.src_pos) - model.src_embed(tokens))[0],
                           "what the model adds to its embeddings").double()
        errors[name] = _one_step_error(table, seen)
    learned = errors["learned (row E)"]
    return Measurement(finite(errors["sinusoids"], "the extrapolation error"), detail=(
        f"PE(p + 1) = M PE(p), M fitted on positions < {seen} (the job's max_len caps training sequences), "
        f"applied up to {length}: worst error {errors['sinusoids']:.1e} with the base job's sinusoids, "
        + (f"{learned:.2g}" if learned != float("inf") else "no continuation (no sine/cosine pairs)")
        + " with row (E)'s learned positions at initialisation"))


@checker("run.update_gradient")
def update_gradient(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.1: "each training batch contained a set of sentence pairs containing approximately
    25000 source tokens and 25000 target tokens": one update is one batch, however the loop splits
    it into passes to fit a device. The gradient the loop's ``accumulate`` forms for the job's
    objective (a small model of its settings, dropout off) over nine pairs taken in one pass, and
    over the same pairs split into passes of unequal token counts. Measured: the largest difference
    relative to the largest gradient (0: the gradient of the mean loss over all of the update's
    target tokens)."""
    own(ctx)
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende")))
    gen = torch.Generator().manual_seed(ctx.seed)
    examples = [(torch.randint(4, SIZE["vocab_size"], (int(n),), generator=gen).tolist(),
                 torch.randint(4, SIZE["vocab_size"], (int(m),), generator=gen).tolist())
                for n, m in torch.randint(2, 14, (9, 2), generator=gen)]
    gradients = {}
    for split in ((9,), (3, 3, 3), (1, 2, 6)):
        trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"])  # seeded: the same initial model each time
        trainer.model.eval()
        bounds = [sum(split[:i]) for i in range(len(split) + 1)]
        micro = [collate(examples[a:b]) for a, b in zip(bounds, bounds[1:])]
        trainer.optimizer.zero_grad(set_to_none=True)
        accumulate(trainer.objective, micro, trainer.device, step=1, precision=trainer.precision)
        gradients[split] = torch.cat([p.grad.flatten().double() for p in trainer.model.parameters() if p.grad is not None])
    whole = gradients[(9,)]
    scale = max_abs(whole, "the update's gradient")
    if scale == 0:
        return Measurement(None, False, "the update's gradient is zero: nothing was compared")
    worst = max(max_abs_diff(g, whole, f"the gradient over passes {split}") for split, g in gradients.items()) / scale
    return Measurement(worst, detail=f"9 pairs ({sum(len(t) + 1 for _, t in examples)} target tokens) in one pass, in "
                                     f"3 + 3 + 3 and in 1 + 2 + 6: largest difference {worst:.1e} of the largest gradient")
