"""Section 5.4, residual dropout, observed in train mode: "We apply dropout to the output of each
sub-layer, before it is added to the sub-layer input and normalized. In addition, we apply
dropout to the sums of the embeddings and the positional encodings in both the encoder and
decoder stacks."

Dropout with rate p zeroes each element with probability p and scales the rest by 1/(1-p). At
each place the paper names, the checkers take what the model actually adds or passes on and the
same quantity without dropout, and measure the fraction of elements zeroed and whether the others
are scaled by 1/(1-p). They assume no layout of their own:

* the residual stream is found from where the layer's norms are measured to sit
  (:mod:`repro.checks.placement`): post-norm (the paper's) or pre-norm (T5's); what a sub-layer
  adds is the next norm's input (or the layer's output) minus the stream it was added to;
* the clean quantity is the same call with the model in eval mode (dropout off), so no
  positional table is assumed: a model without one (T5) is measured as it is, and the paper's
  sinusoids are never put in for a table the implementation does not expose.

A sub-layer that is itself random in train mode (dropout inside it: on the attention weights or
the feed-forward layer's hidden units, as T5 applies) cannot match its clean output element by
element; its kept elements are then checked by their least-squares scale against the clean
output, which inverted dropout leaves unbiased.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repro.checks.placement import OTHER, norm_modules, norm_placement, residual_stream, trace_layer
from repro.checks.positional import stack_table
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import Absent, CheckContext, Measurement, NotApplicable

SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)

#: Allowed relative error of the least-squares scale of a random sub-layer's kept elements.
SCALE_TOLERANCE = 0.05
#: Traced calls pooled for a layer whose sub-layers are random in train mode.
REPEATS = 32


@dataclass
class Site:
    """One place dropout should act: the fraction of elements it zeroed, and how far the kept
    ones are from clean / (1 - p): the worst element (``exact``) or the least-squares scale."""

    name: str
    dropped: float
    scale_error: float
    exact: bool = True

    @property
    def scaled(self) -> bool:
        return self.scale_error <= (1e-4 if self.exact else SCALE_TOLERANCE)


def observe(name: str, observed: Tensor, clean: Tensor, p: float, exact: bool = True) -> Site:
    finite(observed, f"the {name}")
    finite(clean, f"the {name} without dropout")
    live = clean.abs() > 1e-6
    zeroed = (observed.abs() <= 1e-7) & live
    kept = live & ~zeroed
    if not kept.any():
        scale = float("inf") if live.any() else 0.0
    elif exact:
        scale = (observed[kept] - clean[kept] / (1 - p)).abs().max().item()
    else:
        o, c = observed[kept].double(), clean[kept].double()
        scale = abs((o * c).sum().item() / (c * c).sum().item() * (1 - p) - 1)
    if scale != scale:  # NaN: never a pass
        scale = float("inf")
    return Site(name, zeroed.sum().item() / max(live.sum().item(), 1), scale, exact)


@contextmanager
def evaluating(module: nn.Module | None) -> Iterator[None]:
    """Dropout off for the block: ``module`` (and every sub-module) in eval mode, each module's
    own mode restored after."""
    if module is None:
        yield
        return
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def _measure(sites: list[Site], p: float, claim: Claim, notes: str = "") -> Measurement:
    if not sites:
        raise NotApplicable("no dropout site could be observed")
    worst = max(abs(s.dropped - p) for s in sites)
    if worst != worst:
        worst = float("inf")
    detail = "; ".join(f"{s.name}: {s.dropped:.3f} zeroed" for s in sites)
    exact = [s.scale_error for s in sites if s.exact]
    fitted = [s.scale_error for s in sites if not s.exact]
    scale = []
    if exact:
        scale.append(f"kept elements off clean/(1-p) by at most {max(exact):.1e}")
    if fitted:
        scale.append(f"sub-layers random in train mode (dropout inside them): least-squares scale of the kept "
                     f"elements off 1/(1-p) by at most {100 * max(fitted):.1f}% (allowed {100 * SCALE_TOLERANCE:.0f}%)")
    tolerance = claim.tolerance.get("abs", 0.06)
    passed = worst <= tolerance and all(s.scaled for s in sites)
    return Measurement(round(worst, 4), passed, f"P_drop {p}: {detail}; {'; '.join(scale)}{notes}")


def _random_in_train_mode(fn: Callable[..., Tensor], *args: Tensor) -> bool:
    return not torch.equal(fn(*args), fn(*args))


def _layer_sites(name: str, layer_call: Callable[[], Tensor], x: Tensor, norms, sublayers: list[tuple[str, Callable]],
                 module: nn.Module | None, p: float) -> tuple[list[Site], str]:
    """The dropout sites of one layer (one per sub-layer), from traced calls in train mode: one
    call when its sub-layers are deterministic, :data:`REPEATS` pooled calls when one is random
    (its scale is then a statistical estimate, and more elements make it precise)."""
    norms = norm_modules(norms)
    finite(layer_call(), f"the output of {name}")  # NaN follows no residual stream: a failure, not "not applicable"
    if len(norms) != len(sublayers):
        raise NotApplicable(f"{name} gives {len(norms)} norms for {len(sublayers)} sub-layers")
    traces = [trace_layer(layer_call, x, norms)]
    placement = norm_placement(traces[0], norms)
    if placement == OTHER:
        raise NotApplicable(
            f"{name}: its norms are neither after each residual sum (post-norm) nor before each sub-layer "
            "(pre-norm), as measured, so the residual stream cannot be followed (see sec3.sublayer.post-norm)"
        )
    first = residual_stream(traces[0], norms, placement)
    random = [_random_in_train_mode(sublayer, sub_input) for (_, sublayer), (_, _, sub_input) in zip(sublayers, first)]
    if any(random) and module is None:
        raise NotApplicable(f"{name} has sub-layers that are random in train mode and ModelParts.module is None: no "
                            "clean output to compare with (the model cannot be put in eval mode)")
    streams = [first] + [residual_stream(trace_layer(layer_call, x, norms), norms, placement)
                         for _ in range(REPEATS - 1 if any(random) else 0)]
    sites = []
    for k, (label, sublayer) in enumerate(sublayers):
        added = torch.cat([stream[k][0] for stream in streams])
        with evaluating(module):
            clean = torch.cat([sublayer(stream[k][2]) for stream in streams])
        sites.append(observe(f"{name} {label}", added, clean, p, exact=not random[k]))
    return sites, placement


def _seeded(check: Callable[[Claim, CheckContext], Measurement]) -> Callable[[Claim, CheckContext], Measurement]:
    """Run ``check`` with the global random state (model initialisation, dropout masks) seeded from
    the claim's seed, and restored after: the same audit gives the same fractions."""

    def run(claim: Claim, ctx: CheckContext) -> Measurement:
        with torch.random.fork_rng():
            torch.manual_seed(ctx.seed)
            return check(claim, ctx)

    run.__doc__, run.__name__ = check.__doc__, check.__name__
    return run


@checker("dropout.residual")
@_seeded
def residual(claim: Claim, ctx: CheckContext) -> Measurement:
    """Every sub-layer output of every layer, in train mode: what the sub-layer added to the
    residual stream (found where the layer's norms are measured to sit, post- or pre-norm),
    against the sub-layer's output with dropout off. Measured: the worst |fraction zeroed -
    P_drop| over all sub-layers; the kept elements must be scaled by 1/(1-p)."""
    p = claim.params.get("p", 0.3)
    parts = ctx.target.training_model(**SIZE, dropout=p)
    if parts.encoder_layers is None or parts.decoder_layers is None:
        raise NotApplicable(f"{ctx.target.name} does not expose its layers (ModelParts.encoder_layers, decoder_layers)")
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(4, 16, SIZE["d_model"], generator=gen)
    z = torch.randn(4, 10, SIZE["d_model"], generator=gen)
    sites: list[Site] = []
    placements: set[str] = set()
    with torch.no_grad():
        for i, layer in enumerate(parts.encoder_layers):
            found, placement = _layer_sites(
                f"encoder {i}", lambda: layer.layer(x), x, layer.norms,
                [("self-attention", layer.self_attention), ("feed-forward", layer.feed_forward)], parts.module, p)
            sites += found
            placements.add(placement)
        for i, layer in enumerate(parts.decoder_layers):
            found, placement = _layer_sites(
                f"decoder {i}", lambda: layer.layer(x, z), x, layer.norms,
                [("self-attention", layer.self_attention), ("encoder-decoder attention", lambda h: layer.cross_attention(h, z)),
                 ("feed-forward", layer.feed_forward)], parts.module, p)
            sites += found
            placements.add(placement)
    return _measure(sites, p, claim, f"; layers measured {' and '.join(sorted(placements))}")


def _sum_note(ctx: CheckContext, parts, tokens: Tensor, clean: dict[str, Tensor]) -> str:
    """Whether what each stack receives (dropout off) is the bare sum of its embedding and its
    positions, as far as the adapter declares them; a fact for the reader (sec3.pe.both-stacks
    owns it), not part of this verdict."""
    embed = {"encoder": parts.embed_source, "decoder": parts.embed_target}
    off, without = {}, []
    for stack, received in clean.items():
        if embed[stack] is None:
            return ""
        try:
            table = stack_table(ctx, parts, stack, tokens.size(1), SIZE["d_model"])
        except Absent:
            table, _ = 0.0, without.append(stack)
        except Exception:  # noqa: BLE001 - not exposed or broken: the positional claims report it, not this one
            return ""
        with evaluating(parts.module), torch.no_grad():
            off[stack] = (received.double() - embed[stack](tokens).double() - table).abs().max().item()
    what = "the embedding (the model adds no positions)" if without else "the sum of the embedding and the positions"
    if max(off.values()) <= 1e-5:
        return f"; what is dropped is {what}"
    return (f"; what is dropped is not {what} (off by " + ", ".join(f"{k} {v:.2g}" for k, v in off.items())
            + "; see sec3.pe.both-stacks)")


@checker("dropout.embeddings")
@_seeded
def embeddings(claim: Claim, ctx: CheckContext) -> Measurement:
    """The input of each stack's first layer, in train mode, against the same with dropout off
    (the model in eval mode; without ``ModelParts.module``, the scaled embedding plus the table
    the implementation declares, or the embedding alone where it declares positions absent).
    Measured: the worst |fraction zeroed - P_drop| over the two stacks."""
    p = claim.params.get("p", 0.3)
    parts = ctx.target.training_model(**SIZE, dropout=p)
    if parts.encoder_input is None or parts.decoder_input is None:
        raise NotApplicable(f"{ctx.target.name} does not expose encoder_input, decoder_input (ModelParts)")
    gen = torch.Generator().manual_seed(ctx.seed)
    tokens = torch.randint(4, SIZE["vocab_size"], (8, 24), generator=gen)
    inputs = {"encoder": parts.encoder_input, "decoder": parts.decoder_input}
    with torch.no_grad():
        observed = {stack: fn(tokens) for stack, fn in inputs.items()}
        if parts.module is not None:
            with evaluating(parts.module):
                clean = {stack: fn(tokens) for stack, fn in inputs.items()}
        else:
            clean = _declared_sums(ctx, parts, tokens)
    sites = [observe(f"{stack} input", observed[stack], clean[stack], p) for stack in inputs]
    return _measure(sites, p, claim, _sum_note(ctx, parts, tokens, clean) if parts.module is not None else "")


def _declared_sums(ctx: CheckContext, parts, tokens: Tensor) -> dict[str, Tensor]:
    """The clean stack inputs of a model that cannot be put in eval mode: its scaled embeddings
    plus the positional table it declares (none where it declares them absent). A table it does
    not expose is never replaced by the paper's sinusoids: not applicable."""
    embed = {"encoder": parts.embed_source, "decoder": parts.embed_target}
    if any(fn is None for fn in embed.values()):
        raise NotApplicable(f"{ctx.target.name} gives no ModelParts.module to switch dropout off and no "
                            "embed_source/embed_target to form the inputs without it")
    sums = {}
    for stack, fn in embed.items():
        try:
            table = stack_table(ctx, parts, stack, tokens.size(1), SIZE["d_model"])
        except Absent:
            table = 0.0
        except NotApplicable as why:
            raise NotApplicable(f"{ctx.target.name} gives no ModelParts.module to switch dropout off and no "
                                f"positional table to form the inputs without it ({why})") from None
        sums[stack] = (fn(tokens).double() + table).float()
    return sums
