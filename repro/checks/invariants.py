"""Invariants every correct Transformer satisfies, measured on every attention path the model runs.

The paper does not state them; they follow from Eq. 1 and Section 3.1 (masking), and a model
that breaks one gives different numbers in training and evaluation than the paper's:

* a sentence's output does not depend on the padding in its batch (padding masks on the
  encoder's self-attention, the encoder-decoder attention and the decoder);
* decoding incrementally over the key/value cache gives the logits of a full recomputation,
  one position at a time or several at once;
* each encoder position attends to every source position (Section 3.2.3: "Each position in the
  encoder can attend to all positions in the previous layer of the encoder").
"""

from __future__ import annotations

import torch

from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement, NotApplicable

SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)


def _tokens(gen: torch.Generator, rows: int, length: int) -> torch.Tensor:
    return torch.randint(4, SIZE["vocab_size"], (rows, length), generator=gen)


@checker("model.padding_invariance")
def padding_invariance(claim: Claim, ctx: CheckContext) -> Measurement:
    """The logits of a sentence alone vs in a batch with a longer one (so that it is padded on
    the source and the target side): max |difference| over its real target positions."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = 0.0, []
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
        err = (alone - batched).abs().max().item()
        worst = max(worst, err)
        details.append(f"{path}: {err:.1e}")
    return Measurement(worst, detail="max |logits alone - logits padded in a batch|: " + ", ".join(details))


@checker("model.incremental")
def incremental(claim: Claim, ctx: CheckContext) -> Measurement:
    """Logits from the incremental decoder (through its cache) against a full recomputation,
    feeding the target one position at a time and in chunks of several positions."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = 0.0, []
    for path, parts in ctx.target.model_paths(**SIZE).items():
        if parts.incremental is None:
            raise NotApplicable(f"{ctx.target.name} exposes no incremental decoder (ModelParts.incremental)")
        src, tgt = _tokens(gen, 2, 7), _tokens(gen, 2, 10)
        with torch.no_grad():
            full = parts.forward(src, tgt)
            require_informative(full, f"the logits ({path})")
            for chunks in ([1] * 10, [3, 1, 4, 2], [2, 5, 3]):
                err = (parts.incremental(src, tgt, chunks) - full).abs().max().item()
                worst = max(worst, err)
                details.append(f"{path} {chunks}: {err:.1e}")
    return Measurement(worst, detail="max |incremental - recomputed| logits; " + "; ".join(details))


@checker("model.encoder_all_positions")
def encoder_all_positions(claim: Claim, ctx: CheckContext) -> Measurement:
    """Perturbation test on the encoder stack: changing source token j must move the encoder's
    output at every position i. Measured: (i, j) pairs where it does not (0 in the paper)."""
    gen = torch.Generator().manual_seed(ctx.seed)
    blind, details = 0, []
    for path, parts in ctx.target.model_paths(**SIZE).items():
        if parts.encode is None:
            raise NotApplicable(f"{ctx.target.name} does not expose its encoder stack (ModelParts.encode)")
        src = _tokens(gen, 1, 8)
        path_blind = 0
        with torch.no_grad():
            base = parts.encode(src)
            require_informative(base, f"the encoder's outputs ({path})")
            for j in range(src.size(1)):
                changed = src.clone()
                changed[0, j] = 4 + (changed[0, j] - 4 + 11) % (SIZE["vocab_size"] - 4)
                delta = (parts.encode(changed) - base).abs().amax(dim=-1)[0]
                path_blind += int((delta <= 1e-6).sum())
        blind += path_blind
        details.append(f"{path}: {path_blind}")
    return Measurement(blind, detail="(i, j) pairs where encoder output i ignores source token j: " + ", ".join(details))
