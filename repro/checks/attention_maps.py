"""Figures 3-5 (Section 4, "self-attention could yield more interpretable models"): the attention
of the trained model, from the run.

The report draws the encoder self-attention of a run's checkpoint for the sentences of Figures 3
to 5 (:func:`repro.report.figures.draw`). This claim ties those pictures to a run: it reads the
stored result of the local run (its ``run_dir`` and the checkpoint it decoded with), loads that
checkpoint with the run's vocabulary where it is on this machine, and measures the attention the
figures show: every head's weights over the sentence (each row a distribution), and how much the
heads of the last layer differ from each other ("many of the attention heads exhibit behaviour
that seems related to the structure of the sentence": heads that all attended alike would show
one picture h times). Without the run on this machine it reads "not run".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement, NotApplicable, NotRun
from repro.claims.seeding import claim_seed, seeded
from repro.data.vocab import SharedVocab
from repro.decode.translate import model_of
from repro.model import Transformer
from repro.train.checkpoint import load_checkpoint

#: The input sentences of the paper's Figure 3 and of Figures 4 and 5.
FIGURE_SENTENCES = {
    "Figure 3": ("It is in this spirit that a majority of American governments have passed new laws since 2009 "
                 "making the registration or voting process more difficult ."),
    "Figures 4-5": "The Law will never be perfect , but its application should be just - this is what we are missing , "
                   "in my opinion .",
}


#: The encoder layer Figures 3-5 show: the paper's layer 5 of 6, a run's last.
FIGURE_LAYER = -1


def encoder_attention(model: Transformer, ids: Sequence[int], layer: int = FIGURE_LAYER) -> torch.Tensor:
    """(heads, n, n) encoder self-attention weights of ``layer`` for one sentence, with dropout off
    (the model's mode is restored after): what the report's Figures 3-5 draw
    (:func:`repro.report.figures.attention_figure`) and the claims measure."""
    attn = model.encoder_layers[layer].self_attn
    was_training, attn.record_weights = model.training, True
    try:
        model.eval()
        with torch.no_grad():
            model.encode(torch.tensor([list(ids)], dtype=torch.long))
        return attn.last_weights[0].double()
    finally:
        attn.record_weights, attn.last_weights = False, None
        model.train(was_training)


@checker("run.attention_maps", audits=False, reads_results=True)
def attention_maps(claim: Claim, ctx: CheckContext) -> Measurement:
    """The attention the report's Figures 3-5 draw, measured on the run's checkpoint (module
    docstring). Measured: the smallest mean total-variation distance between two heads of the last
    encoder layer, over the figures' sentences (0: two heads attend identically)."""
    source = claim.params.get("run_claim", "local.multi30k.bleu")
    stored = ctx.results.get(source)
    if stored is None:
        raise NotRun(f"needs the stored result of {source} (repro reproduce), which names its run")
    extra = stored.provenance.extra
    run_dir, checkpoint = Path(str(extra.get("run_dir", ""))), Path(str(extra.get("checkpoint", "")))
    if not checkpoint.is_file() or not (run_dir / "vocab.json").is_file():
        raise NotRun(f"the run of {source} ({run_dir}, {checkpoint.name}) is not on this machine; the report draws "
                     "Figures 3-5 from it where it is")
    model = model_of(load_checkpoint(checkpoint), checkpoint)
    vocab = SharedVocab.load(run_dir / "vocab.json")
    closest, lines = None, []
    for figure, sentence in FIGURE_SENTENCES.items():
        weights = finite(encoder_attention(model, vocab.encode(sentence)), f"the attention of {figure}")
        if (weights.sum(-1) - 1).abs().max() > 1e-5:
            return Measurement(None, False, f"{figure}: attention rows that do not sum to 1")
        heads = weights.size(0)
        distances = [0.5 * (weights[a] - weights[b]).abs().sum(-1).mean().item()
                     for a in range(heads) for b in range(a + 1, heads)]
        if not distances:
            return Measurement(None, False, f"{figure}: a single head; nothing to compare")
        closest = min(distances) if closest is None else min(closest, min(distances))
        lines.append(f"{figure}: {heads} heads over {weights.size(-1)} wordpieces, head distances "
                     f"{min(distances):.2f}-{max(distances):.2f}")
    return Measurement(round(closest, 3), detail=f"{checkpoint} of {run_dir}: " + "; ".join(lines))


@checker("figures.attention_drawn", audits=False)
def attention_drawn(claim: Claim, ctx: CheckContext) -> Measurement:
    """What the report draws as Figures 3-5 (:func:`encoder_attention`, through which the report's
    figure and the run's claim read the weights), measured on a model built for training (dropout
    0.3, in train mode, three layers): it must be the last encoder layer's self-attention with dropout
    off, the same each time it is drawn. The reference is every layer's weights, recorded while the
    model encodes the sentence in eval mode. Measured: the largest |drawn - last layer's| over two
    drawings (the detail names the layer the drawing matches, if any)."""
    with seeded(claim_seed(ctx.seed, claim.id)):
        parts = ctx.target.training_model(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=3, dropout=0.3)
    model = getattr(parts.module, "inner", parts.module)   # built on a device: the module itself
    if not isinstance(model, Transformer):
        raise NotApplicable(f"{ctx.target.name}'s model is not one the report draws Figures 3-5 of")
    model = model.cpu()   # the report draws on the host, from the checkpoint loaded there
    gen = torch.Generator().manual_seed(ctx.seed)
    ids = torch.randint(4, 40, (9,), generator=gen).tolist()
    with seeded(claim_seed(ctx.seed, claim.id, 1)):
        drawn = [finite(encoder_attention(model, ids), "the drawn attention") for _ in range(2)]
    layers = [layer.self_attn for layer in model.encoder_layers]
    model.eval()
    try:
        for attn in layers:
            attn.record_weights = True
        with torch.no_grad():
            model.encode(torch.tensor([ids], dtype=torch.long))
        reference = [attn.last_weights[0].double() for attn in layers]
    finally:
        for attn in layers:
            attn.record_weights, attn.last_weights = False, None
        model.train()
    what = "the drawn attention against the recorded one"
    matches = [i for i, ref in enumerate(reference) if max_abs_diff(drawn[0], ref, what) <= 1e-9]
    worst = max(max_abs_diff(d, reference[-1], what) for d in drawn)
    return Measurement(worst, detail=(
        f"drawn twice from a model in train mode (dropout 0.3, {len(layers)} layers): "
        + (f"the weights of layer {matches[0] + 1} with dropout off" if matches else "no layer's weights with dropout off")
        + f"; largest difference from the last layer's {worst:.3g}"))
