"""Invariants every correct Transformer satisfies, measured on every attention path the model runs.

The paper does not state them; they follow from Eq. 1 and Section 3.1 (masking), and a model
that breaks one gives different numbers in training and evaluation than the paper's:

* a sentence's output does not depend on the padding in its batch (padding masks on the
  encoder's self-attention, the encoder-decoder attention and the decoder);
* decoding incrementally over the key/value cache gives the logits of a full recomputation,
  one position at a time or several at once, and beam search over the cache (whose rows are
  reordered as hypotheses survive) returns what the same search returns recomputing every prefix;
* each encoder position attends to every source position (Section 3.2.3: "Each position in the
  encoder can attend to all positions in the previous layer of the encoder").
"""

from __future__ import annotations

import torch

from repro.checks.noise import NoiseFloor, batch_mate_changed, noise_text
from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.checks.zero_parameters import opened
from repro.claims.claim import Claim
from repro.claims.compare import Worst, finite, max_abs_diff
from repro.claims.outcome import Absent, CheckContext, Inconclusive, Measurement, NotApplicable
from repro.claims.seeding import claim_seed, seeded

SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)


def _tokens(gen: torch.Generator, rows: int, length: int) -> torch.Tensor:
    return torch.randint(4, SIZE["vocab_size"], (rows, length), generator=gen)


@checker("model.padding_invariance")
@opened
def padding_invariance(claim: Claim, ctx: CheckContext) -> Measurement:
    """The logits of a sentence alone vs in a batch with a longer one (so that it is padded on
    the source and the target side): max |difference| over its real target positions."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = Worst(), []
    for path, parts in ctx.target.model_paths(**SIZE).items():
        pad = parts.pad_id
        short_src, short_tgt = _tokens(gen, 1, 5), _tokens(gen, 1, 4)
        long_src, long_tgt = _tokens(gen, 1, 9), _tokens(gen, 1, 8)
        src = torch.full((2, 9), pad, dtype=torch.long)
        tgt = torch.full((2, 8), pad, dtype=torch.long)
        src[0, :5], tgt[0, :4], src[1], tgt[1] = short_src[0], short_tgt[0], long_src[0], long_tgt[0]
        with torch.no_grad():
            alone = parts.forward(short_src, short_tgt)[0]
            require_informative(alone, f"the logits ({path})")
            batched = parts.forward(src, tgt)[0, :4]
        err = worst.add(max_abs_diff(batched, alone, f"the logits of path {path}"), path)
        details.append(f"{path}: {err:.1e}")
    return Measurement(worst.value, detail="max |logits alone - logits padded in a batch|: " + ", ".join(details))


@checker("model.incremental")
def incremental(claim: Claim, ctx: CheckContext) -> Measurement:
    """Logits from the incremental decoder (through its cache) against a full recomputation,
    feeding the target one position at a time and in chunks of several positions; and beam
    search over the cache, whose rows the search reorders as hypotheses survive, against the same
    search recomputing every prefix (:func:`beam_over_cache`). Measured: the worst logit
    difference; any sentence the two searches decode differently (beyond a tie) fails the claim."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = Worst(), []
    for path, parts in ctx.target.model_paths(**SIZE).items():
        if parts.incremental is None:
            raise NotApplicable(f"{ctx.target.name} exposes no incremental decoder (ModelParts.incremental)")
        src, tgt = _tokens(gen, 2, 7), _tokens(gen, 2, 10)
        with torch.no_grad():
            full = parts.forward(src, tgt)
            require_informative(full, f"the logits ({path})")
            for chunks in ([1] * 10, [3, 1, 4, 2], [2, 5, 3]):
                err = worst.add(max_abs_diff(parts.incremental(src, tgt, chunks), full, f"the logits of path {path}"))
                details.append(f"{path} {chunks}: {err:.1e}")
    differ, beam = beam_over_cache(claim, ctx, gen)
    if differ is None and claim.within(worst.value):
        raise Inconclusive("the logits through the cache match a full recomputation (max "
                           f"{worst.value:.1e}: {'; '.join(details)}), but {beam}: the beam half cannot show a difference")
    return Measurement(worst.value, None if not differ else False,
                       "max |incremental - recomputed| logits; " + "; ".join(details) + f"; {beam}")


#: The search of the beam half: Section 6.1's width and penalty, a short output limit (cost).
BEAM = dict(beam_size=4, alpha=0.6, max_len_offset=6)


#: Models whose beam outputs are compared (each built from its own seed), and how many models may be
#: built to find them: a random model that ends every sentence at once shows nothing. Three: a cache
#: that keeps its first rows instead of the surviving hypotheses' went unseen on two models for 1
#: seed in 12 (the hypotheses kept their order), on three for none of 12.
BEAM_MODELS, BEAM_ATTEMPTS = 3, 6


def beam_over_cache(claim: Claim, ctx: CheckContext, gen: torch.Generator) -> tuple[int | None, str]:
    """(sentences decoded differently, a line saying what was seen): the implementation's beam
    search over models of its own, through its key/value cache and recomputing every prefix
    (``use_cache=False``), on a padded batch of sentences of several lengths.

    Each model is built under its own seed (the global random state restored after), so the
    verdict does not depend on what ran before; :data:`BEAM_MODELS` models whose outputs are not
    all empty are compared (up to :data:`BEAM_ATTEMPTS` built). Two outputs that differ only by a
    tie (the same GNMT score, recomputed by a full forward pass, to 1e-4) are not counted. A search
    that outputs nothing on every model proves nothing: ``None`` sentences compared (inconclusive,
    never a pass: a random model that starts from its end id, as fairseq's, with tied embeddings
    ends every sentence at once). Not measured (said so) when the
    implementation has no beam search or cannot run it without its cache."""
    params = {**BEAM, **claim.params.get("beam", {})}
    lengths = [3, 8, 5, 7, 4, 6]
    differ, ties, compared, sentences = 0, 0, 0, 0
    for attempt in range(BEAM_ATTEMPTS):
        if compared == BEAM_MODELS:
            break
        with seeded(claim_seed(ctx.seed, claim.id, attempt)):
            try:
                parts = ctx.target.model(**SIZE)
                src = torch.full((len(lengths), max(lengths)), parts.pad_id, dtype=torch.long)
                for row, n in enumerate(lengths):
                    src[row, :n] = _tokens(gen, 1, n)[0]
                uncached = ctx.target.beam_search(parts, src, use_cache=False, **params)
            except NotApplicable as why:
                return 0, f"beam search over the cache not measured ({why})"
            except TypeError as err:
                if "use_cache" not in str(err):
                    raise
                return 0, f"beam search over the cache not measured ({ctx.target.name}'s beam_search takes no use_cache)"
            try:
                cached = ctx.target.beam_search(parts, src, **params)
            except (RuntimeError, IndexError) as err:  # the same search without the cache ran: the cache broke it
                return len(lengths), f"beam search over the cache raised {type(err).__name__}: {str(err)[:160]}"
        if not any(len(out) for out in cached + uncached):
            continue
        compared += 1
        sentences += len(cached)
        for row, (a, b) in enumerate(zip(cached, uncached)):
            if a == b:
                continue
            if abs(_score(parts, src[row:row + 1], a, params["alpha"])
                   - _score(parts, src[row:row + 1], b, params["alpha"])) < 1e-4:
                ties += 1
            else:
                differ += 1
    if not compared:
        return None, f"beam search over the cache: every output is empty on {BEAM_ATTEMPTS} models, so nothing was compared"
    tied = (f" ({ties} differ by a tie of equal scores, scored from start id {parts.special_ids()[0]} to end id "
            f"{parts.special_ids()[1]}: {parts.special_ids()[2]})" if ties else "")
    return differ, (f"beam search (width {params['beam_size']}) over the cache vs recomputing every prefix: "
                    f"{differ} of {sentences} sentences decoded differently on {compared} models{tied}")


def _score(parts, src: torch.Tensor, output: list[int], alpha: float) -> float:
    """GNMT's log P(Y | X) / lp(Y) of ``output`` (+ the end id), by a full forward pass from the
    start id: the model's own special ids (``ModelParts.bos_id`` / ``eos_id``), else the protocol's."""
    bos, eos, _ = parts.special_ids()
    target = torch.tensor([output + [eos]])
    tgt_in = torch.cat([torch.tensor([[bos]]), target[:, :-1]], dim=1)
    with torch.no_grad():
        logp = finite(parts.forward(src, tgt_in), "the logits").double().log_softmax(-1)
    total = logp[0].gather(1, target[0][:, None]).sum().item()
    return total / ((5 + target.size(1)) / 6) ** alpha


#: Lengths at which each encoder layer's reach is measured: every (i, j) pair at the first, the
#: two end positions against every other at the second, longer than the windows of the local
#: attentions in use (Longformer/LED's default one-sided 512, LongT5's radius 127): a stack of
#: windowed layers reaches every position of a short sentence, a single layer does not.
LAYER_LENGTHS = (8, 640)


def _stack_blind(parts, gen: torch.Generator, path: str) -> tuple[int, NoiseFloor, float]:
    """Source-token perturbations through the encoder stack: (i, j) pairs where output i of the
    first sentence does not move, the floor, and the median move seen."""
    src = _tokens(gen, 2, 8)
    what = f"the encoder output of path {path}"
    blind, reached = 0, []
    with torch.no_grad():
        base = parts.encode(src)
        require_informative(base, f"the encoder's outputs ({path})")
        noise = NoiseFloor({
            "the same call again": max_abs_diff(parts.encode(src), base, what),
            "the other sentence changed": max_abs_diff(
                parts.encode(batch_mate_changed(src, 1, 4, SIZE["vocab_size"], gen))[0], base[0], what),
        })
        for j in range(src.size(1)):
            perturbed = src.clone()
            perturbed[0, j] = 4 + (perturbed[0, j] - 4 + 11) % (SIZE["vocab_size"] - 4)
            out = parts.encode(perturbed)[0]
            blind += int((~noise.moved(out, base[0], -1, what)).sum())
            reached.append((out - base[0]).abs().amax(-1))
    return blind, noise, torch.cat(reached).double().median().item()


def _layer_blind(layer, gen: torch.Generator, what: str) -> tuple[int, NoiseFloor, float, str]:
    """One encoder layer on random states, one sentence at a time: at each of
    :data:`LAYER_LENGTHS`, the (i, j) pairs where output i does not move when input j does (every
    j at the short length, the two ends at the long one); the floor is the same call again."""
    blind, reached, noise, counts = 0, [], None, []
    with torch.no_grad():
        for n in LAYER_LENGTHS:
            x = torch.randn(1, n, SIZE["d_model"], generator=gen)
            base = layer(x)
            require_informative(base, what)
            probe = NoiseFloor({"the same call again": max_abs_diff(layer(x), base, what)})
            noise = probe if noise is None or probe.floor > noise.floor else noise
            here = 0
            for j in (range(n) if n <= LAYER_LENGTHS[0] else (0, n - 1)):
                moved_x = x.clone()
                moved_x[0, j] += torch.randn(SIZE["d_model"], generator=gen)
                out = layer(moved_x)[0]
                here += int((~probe.moved(out, base[0], -1, what)).sum())
                reached.append((out - base[0]).abs().amax(-1))
            counts.append(f"n={n}: {here}")
            blind += here
    return blind, noise, torch.cat(reached).double().median().item(), ", ".join(counts)


def _value_blind(ctx: CheckContext, gen: torch.Generator) -> tuple[int, str]:
    """Each attention function the model runs (:meth:`~repro.audit.adapter.Adapter.attention_paths`),
    unmasked and called as a self-attention calls it (keys = queries): the (head, i, j) triples where
    output i does not move when value j does. The layer's output moves through the query and the
    residual whatever the weights, so a function that keeps a position from its own value (Reformer's
    shared-QK attention suppresses the diagonal) or from far ones is seen here alone. The floor: the
    same call again. Functions the adapter does not expose are left out."""
    blind, seen = 0, []
    for name, fn in ctx.target.attention_paths().items():
        # small queries: scores near 0, so no weight underflows unless the function sets it apart
        # (a scale error saturating the softmax is Eq. 1's claim, not this one)
        q, v = torch.randn(1, 2, 8, 16, generator=gen) * 0.1, torch.randn(1, 2, 8, 16, generator=gen)
        what = f"the attention function {name}"
        try:
            with torch.no_grad():
                base = fn(q, q, v, None)
        except (NotApplicable, Absent):
            continue
        require_informative(base, what)
        with torch.no_grad():
            noise = NoiseFloor({"the same call again": max_abs_diff(fn(q, q, v, None), base, what)})
            here, reached = 0, []
            for j in range(v.size(2)):
                moved_v = v.clone()
                moved_v[..., j, :] += torch.randn(v.size(-1), generator=gen)
                out = fn(q, q, moved_v, None)
                here += int((~noise.moved(out, base, -1, what)).sum())
                reached.append((out - base).abs().amax(-1).flatten())
        typical = torch.cat(reached).double().median().item()
        if noise.floor > 0 and typical <= noise.threshold:
            seen.append(f"{name} not read (its output moves from call to call as much: {noise.text()})")
            continue
        blind += here
        seen.append(f"{name} {here}")
    return blind, ("; values that no output reads, per (head, i, j), on the attention functions: " + ", ".join(seen)
                   if seen else "")


@checker("model.encoder_all_positions")
@opened
def encoder_all_positions(claim: Claim, ctx: CheckContext) -> Measurement:
    """Perturbation test on the encoder: changing the input at position j must move the output at
    every position i, above the model's own noise floor (:mod:`repro.checks.noise`). Measured on
    the stack (source tokens; the floor: the same call again, the other sentence of the batch
    changed) and, where the model exposes them, on each encoder layer alone (the claim is about
    "the previous layer": a stack of local attentions reaches every token of a short sentence
    through its depth, one layer does not), at :data:`LAYER_LENGTHS`; and on each attention
    function, whether every output reads every value (:func:`_value_blind`). Measured: (i, j) pairs
    where output i does not move (0 in the paper); inconclusive where the noise is as large as the
    moves the test must see."""
    gen = torch.Generator().manual_seed(ctx.seed)
    blind, details, floors = 0, [], {}
    for path, parts in ctx.target.model_paths(**SIZE).items():
        if parts.encode is None:
            raise NotApplicable(f"{ctx.target.name} does not expose its encoder stack (ModelParts.encode)")
        probes = [("stack", *_stack_blind(parts, gen, path), "")]
        for k, layer in enumerate(parts.encoder_layers or ()):
            probes.append((f"layer {k}", *_layer_blind(layer.layer, gen, f"encoder layer {k} of path {path}")))
        seen = []
        for where, count, noise, typical, counts in probes:
            if noise.floor > 0 and typical <= noise.threshold:
                raise Inconclusive(f"path {path}, {where}: the model's noise is as large as the moves the test must "
                                   f"see (median move {typical:.1e}; {noise.text()}): a blind position cannot be told "
                                   "from it")
            floors[f"{path} {where}" if len(probes) > 1 else path] = noise
            blind += count
            seen.append(f"{where} {count}" + (f" ({counts})" if counts else ""))
        if len(probes) == 1:
            seen.append("its layers not exposed (ModelParts.encoder_layers): a layer's own reach not measured")
        details.append(f"{path}: " + ", ".join(seen))
    values, functions = _value_blind(ctx, gen)
    return Measurement(blind + values, detail="(i, j) pairs where encoder output i ignores input j: " + "; ".join(details)
                       + f"; {noise_text(floors)}{functions}")
