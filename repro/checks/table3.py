"""Checkers for Table 3's parameter counts, counted on the model itself.

repro's rows are its presets (:mod:`repro.model.presets`); any other implementation's rows are
built through its adapter's ``model()`` and counted (:mod:`repro.checks.census`)."""

from __future__ import annotations

import torch

from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.checks.census import row_parameters
from repro.checks.jobs import own
from repro.model import Transformer, count_parameters, get_preset
from repro.model.presets import TABLE3_ROWS
from repro.train.config import TrainConfig
from repro.train.optimizer import optimizer_for


def parameters_of(row: str, vocab_size: int) -> int:
    """Trainable parameters of a Table 3 row with one shared vocabulary of ``vocab_size``.
    Built on the meta device: the count needs shapes, not memory."""
    cfg = get_preset(row).model.replace(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)
    with torch.device("meta"):
        return count_parameters(Transformer(cfg))


def _count(ctx: CheckContext, row: str, vocab_size: int, with_embeddings: bool = True) -> int:
    """Parameters of a row: repro's preset, or the row built through the adapter."""
    if ctx.target.has_repro_presets:
        return parameters_of(row, vocab_size)
    return row_parameters(ctx.target, row, vocab_size, with_embeddings=with_embeddings)


def _source(ctx: CheckContext) -> str:
    return "repro's preset" if ctx.target.has_repro_presets else f"built through {ctx.target.name}'s model()"


@checker("table3.params")
def params(claim: Claim, ctx: CheckContext) -> Measurement:
    """Parameters of a row, in 10^6, at the vocabulary the claim names."""
    vocab = claim.params["vocab_size"]
    count = _count(ctx, claim.params["row"], vocab) / 1e6
    return Measurement(round(count, 2), unit="10^6",
                       detail=f"{count:.3f}M at a shared vocabulary of {vocab} ({_source(ctx)})")


@checker("table3.params_difference")
def params_difference(claim: Claim, ctx: CheckContext) -> Measurement:
    """Parameters of a row minus those of another, in 10^6: independent of the vocabulary when
    both rows share d_model, so it tests the architecture without the vocabulary question."""
    vocab = claim.params.get("vocab_size", 37000)
    a, b = claim.params["row"], claim.params["minus"]
    diff = (_count(ctx, a, vocab, False) - _count(ctx, b, vocab, False)) / 1e6
    return Measurement(round(diff, 2), unit="10^6", detail=f"{a} - {b} = {diff:.3f}M ({_source(ctx)})")


@checker("table3.implied_vocabulary")
def implied_vocabulary(claim: Claim, ctx: CheckContext) -> Measurement:
    """The shared vocabulary size that best fits the paper's counts of the given rows (least
    squares over a grid): what the paper's figures imply, to set beside Section 5.1's ~37000.

    A row's count is affine in the vocabulary, a + b * V; a and b are read off two counts
    (b is d_model for tied embeddings, more where they are not). Rows the implementation
    cannot build (row B through an adapter) are left out of the fit, and said so."""
    rows: dict[str, float] = claim.params["paper_counts"]
    lo, hi, step = claim.params.get("grid", [30000, 50000, 50])
    v1, v2 = (1, 2) if ctx.target.has_repro_presets else (1000, 2000)
    lines, skipped = {}, []
    for row in rows:
        try:
            c1, c2 = _count(ctx, row, v1), _count(ctx, row, v2)
        except NotApplicable:
            skipped.append(row)
            continue
        slope = (c2 - c1) / (v2 - v1)
        lines[row] = (c1 - slope * v1, slope)
    if len(lines) < 2:
        raise NotApplicable(f"{ctx.target.name}: fewer than two of the rows {', '.join(rows)} can be built")
    best_vocab, best_err = None, float("inf")
    for vocab in range(lo, hi + 1, step):
        err = sum(((a + b * vocab) / 1e6 - rows[r]) ** 2 for r, (a, b) in lines.items())
        if err < best_err:
            best_vocab, best_err = vocab, err
    left_out = f"; rows left out: {', '.join(skipped)}" if skipped else ""
    # The least-squares vocabulary without the grid (each count is affine in it): where the grid's
    # best is one of its ends, this is where the counts point, and the grid's value is no fit.
    free = sum(b * (rows[r] * 1e6 - a) for r, (a, b) in lines.items()) / sum(b * b for _, b in lines.values())
    if best_vocab in (lo, hi) and round(free) != best_vocab:
        edge = "lower" if best_vocab == lo else "upper"
        return Measurement(best_vocab, detail=(
            f"no fit inside the search grid ({lo} to {hi} words): its best, {best_vocab} (sum of squared errors "
            f"{best_err:.2f}), is the grid's {edge} edge; the counts are best fitted at {free:.0f} words, "
            f"{'below' if edge == 'lower' else 'above'} it (least squares without the grid){left_out}"))
    return Measurement(best_vocab, detail=f"best fit {best_vocab} words (sum of squared errors {best_err:.2f}; "
                                          f"{free:.0f} without the grid){left_out}")


@checker("table3.params_trained")
def params_trained(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 3's counts are counts of what training updates: for every row (repro's presets, built
    on the meta device at the claim's vocabulary), the count the table prints against the scalars
    the training loop's Adam (:func:`repro.train.optimizer.optimizer_for`) steps. Measured: the
    largest difference, in parameters; a count that leaves out biases or norms, counts a shared
    matrix twice or counts a buffer differs."""
    own(ctx)
    vocab = claim.params.get("vocab_size", 37000)
    worst, where, rows = 0, "", claim.params.get("rows") or list(TABLE3_ROWS)
    for row in rows:
        cfg = get_preset(row).model.replace(src_vocab_size=vocab, tgt_vocab_size=vocab)
        with torch.device("meta"):
            model = Transformer(cfg)
        stepped = sum(p.numel() for group in optimizer_for(TrainConfig(), model).param_groups for p in group["params"])
        diff = abs(count_parameters(model) - stepped)
        if diff >= worst:
            worst, where = diff, f"{row}: counted {count_parameters(model)}, Adam steps {stepped}"
    return Measurement(worst, detail=f"largest difference over {len(rows)} rows ({where})")
