"""Checkers for Table 3's parameter counts, counted on the model itself."""

from __future__ import annotations

import torch

from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.model import Transformer, count_parameters, get_preset


def parameters_of(row: str, vocab_size: int) -> int:
    """Trainable parameters of a Table 3 row with one shared vocabulary of ``vocab_size``.
    Built on the meta device: the count needs shapes, not memory."""
    cfg = get_preset(row).model.replace(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)
    with torch.device("meta"):
        return count_parameters(Transformer(cfg))


def _own_model_only(ctx: CheckContext) -> None:
    if not ctx.target.has_repro_presets:
        raise NotApplicable(f"{ctx.target.name}: Table 3's rows are counted on repro's presets")


@checker("table3.params")
def params(claim: Claim, ctx: CheckContext) -> Measurement:
    """Parameters of a row, in 10^6, at the vocabulary the claim names."""
    _own_model_only(ctx)
    vocab = claim.params["vocab_size"]
    count = parameters_of(claim.params["row"], vocab) / 1e6
    return Measurement(round(count, 2), unit="10^6", detail=f"{count:.3f}M at a shared vocabulary of {vocab}")


@checker("table3.params_difference")
def params_difference(claim: Claim, ctx: CheckContext) -> Measurement:
    """Parameters of a row minus those of another, in 10^6: independent of the vocabulary when
    both rows share d_model, so it tests the architecture without the vocabulary question."""
    _own_model_only(ctx)
    vocab = claim.params.get("vocab_size", 37000)
    a, b = claim.params["row"], claim.params["minus"]
    diff = (parameters_of(a, vocab) - parameters_of(b, vocab)) / 1e6
    return Measurement(round(diff, 2), unit="10^6", detail=f"{a} - {b} = {diff:.3f}M")


@checker("table3.implied_vocabulary")
def implied_vocabulary(claim: Claim, ctx: CheckContext) -> Measurement:
    """The shared vocabulary size that best fits the paper's counts of the given rows (least
    squares over a grid): what the paper's figures imply, to set beside Section 5.1's ~37000."""
    _own_model_only(ctx)
    rows: dict[str, float] = claim.params["paper_counts"]
    lo, hi, step = claim.params.get("grid", [30000, 50000, 50])
    best_vocab, best_err = None, float("inf")
    base = {row: parameters_of(row, 1) for row in rows}  # with a 1-word vocabulary
    width = {row: get_preset(row).model.d_model for row in rows}
    for vocab in range(lo, hi + 1, step):
        err = sum(((base[r] + (vocab - 1) * width[r]) / 1e6 - rows[r]) ** 2 for r in rows)
        if err < best_err:
            best_vocab, best_err = vocab, err
    return Measurement(best_vocab, detail=f"best fit {best_vocab} words (sum of squared errors {best_err:.2f})")
