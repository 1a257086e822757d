"""Section 5.4, residual dropout, observed in train mode: "We apply dropout to the output of each
sub-layer, before it is added to the sub-layer input and normalized. In addition, we apply
dropout to the sums of the embeddings and the positional encodings in both the encoder and
decoder stacks."

Dropout with rate p zeroes each element with probability p and scales the rest by 1/(1-p). At
each place the paper names, the checkers take what the model actually adds or passes on (the
input of the layer normalisation minus the residual; the input of the first layer) and the same
quantity without dropout, and measure the fraction of elements zeroed and whether the others are
scaled by 1/(1-p).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repro.checks.positional import model_table, require_stack_inputs
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement, NotApplicable

SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)


@dataclass
class Site:
    """One place dropout should act: the fraction of elements it zeroed, and how far the kept
    ones are from clean / (1 - p)."""

    name: str
    dropped: float
    scale_error: float


def observe(name: str, observed: Tensor, clean: Tensor, p: float) -> Site:
    finite(observed, f"the {name}")
    finite(clean, f"the {name} without dropout")
    live = clean.abs() > 1e-6
    zeroed = (observed.abs() <= 1e-7) & live
    kept = live & ~zeroed
    scale = (observed[kept] - clean[kept] / (1 - p)).abs().max().item() if kept.any() else 0.0
    return Site(name, zeroed.sum().item() / max(live.sum().item(), 1), scale)


class _Inputs:
    """Records the input of every module it hooks (the layer norms), in call order."""

    def __init__(self, modules: list[nn.Module]) -> None:
        self.seen: dict[int, Tensor] = {}
        self.handles = [m.register_forward_pre_hook(self._hook(i)) for i, m in enumerate(modules)]

    def _hook(self, i: int):
        def hook(module: nn.Module, args: tuple) -> None:
            self.seen[i] = args[0].detach()
        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def _norm_modules(norms) -> list[nn.Module]:
    if not all(isinstance(n, nn.Module) for n in norms):
        raise NotApplicable("the layer norms are not torch modules: their inputs cannot be observed")
    return list(norms)


def _measure(sites: list[Site], p: float, claim: Claim) -> Measurement:
    if not sites:
        raise NotApplicable("no dropout site could be observed")
    worst = max(abs(s.dropped - p) for s in sites)
    scale = max(s.scale_error for s in sites)
    detail = "; ".join(f"{s.name}: {s.dropped:.3f} zeroed" for s in sites)
    tolerance = claim.tolerance.get("abs", 0.06)
    return Measurement(round(worst, 4), worst <= tolerance and scale <= 1e-4,
                       f"P_drop {p}: {detail}; kept elements off clean/(1-p) by at most {scale:.1e}")


@checker("dropout.residual")
def residual(claim: Claim, ctx: CheckContext) -> Measurement:
    """Every sub-layer output of every layer, in train mode: the part of the layer norm's input
    that is not the residual, against the sub-layer's output. Measured: the worst |fraction
    zeroed - P_drop| over all sub-layers."""
    p = claim.params.get("p", 0.3)
    parts = ctx.target.training_model(**SIZE, dropout=p)
    if parts.encoder_layers is None or parts.decoder_layers is None:
        raise NotApplicable(f"{ctx.target.name} does not expose its layers (ModelParts.encoder_layers, decoder_layers)")
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(4, 16, SIZE["d_model"], generator=gen)
    z = torch.randn(4, 10, SIZE["d_model"], generator=gen)
    sites: list[Site] = []
    with torch.no_grad():
        for i, layer in enumerate(parts.encoder_layers):
            norms = _norm_modules(layer.norms)
            inputs = _Inputs(norms)
            try:
                layer.layer(x)
            finally:
                inputs.close()
            h = norms[0](inputs.seen[0])
            sites.append(observe(f"encoder {i} self-attention", inputs.seen[0] - x, layer.self_attention(x), p))
            sites.append(observe(f"encoder {i} feed-forward", inputs.seen[1] - h, layer.feed_forward(h), p))
        for i, layer in enumerate(parts.decoder_layers):
            norms = _norm_modules(layer.norms)
            inputs = _Inputs(norms)
            try:
                layer.layer(x, z)
            finally:
                inputs.close()
            h1 = norms[0](inputs.seen[0])
            h2 = norms[1](inputs.seen[1])
            sites.append(observe(f"decoder {i} self-attention", inputs.seen[0] - x, layer.self_attention(x), p))
            sites.append(observe(f"decoder {i} encoder-decoder attention", inputs.seen[1] - h1,
                                 layer.cross_attention(h1, z), p))
            sites.append(observe(f"decoder {i} feed-forward", inputs.seen[2] - h2, layer.feed_forward(h2), p))
    return _measure(sites, p, claim)


@checker("dropout.embeddings")
def embeddings(claim: Claim, ctx: CheckContext) -> Measurement:
    """The input of each stack's first layer, in train mode, against the scaled embedding plus the
    positional encoding. Measured: the worst |fraction zeroed - P_drop| over the two stacks."""
    p = claim.params.get("p", 0.3)
    parts = ctx.target.training_model(**SIZE, dropout=p)
    require_stack_inputs(ctx, parts)
    gen = torch.Generator().manual_seed(ctx.seed)
    tokens = torch.randint(4, SIZE["vocab_size"], (8, 24), generator=gen)
    table = model_table(ctx, tokens.size(1), SIZE["d_model"]).float()
    with torch.no_grad():
        sites = [observe("encoder input", parts.encoder_input(tokens), parts.embed_source(tokens) + table, p),
                 observe("decoder input", parts.decoder_input(tokens), parts.embed_target(tokens) + table, p)]
    return _measure(sites, p, claim)
