"""Section 5.4, residual dropout, observed in train mode: "We apply dropout to the output of each
sub-layer, before it is added to the sub-layer input and normalized. In addition, we apply
dropout to the sums of the embeddings and the positional encodings in both the encoder and
decoder stacks."

Dropout with rate p zeroes each element with probability p and scales the rest by 1/(1-p). At
each place the paper names, the checkers take what the model actually adds or passes on and the
same quantity without that dropout, and measure the fraction of elements zeroed and whether the
others are scaled by 1/(1-p). What they assume about the layout, and what they answer when it
does not hold:

* the residual stream is found from where the layer's norms are measured to sit
  (:mod:`repro.checks.placement`): post-norm (the paper's) or pre-norm (T5's), on the layer's own
  rows where its norms see several streams in one tensor; what a sub-layer adds is the next
  norm's input (or the layer's output) minus the stream it was added to. A layer whose norms are
  neither (or that gives another number of norms than sub-layers) is named in the reason with
  what was seen, and the other layers are still measured (inconclusive where those all hold);
* what a sub-layer adds is compared with the sub-layer's own output on the same input, in train
  mode: element by element where the sub-layer is deterministic; where it is itself random in
  train mode (dropout on the attention weights or the feed-forward layer's hidden units, as T5
  applies) by the least-squares scale of the kept elements against its own train-mode mean
  (:func:`observe_random`), which holds whatever follows the inner dropout (a linear map, or a
  norm as in sandwich-norm layers, where the eval-mode output is off by several per cent);
* what each stack receives is compared with the same call with the model in eval mode (dropout
  off), so no positional table is assumed: a model without one (T5) is measured as it is, and
  the paper's sinusoids are never put in for a table the implementation does not expose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repro.checks.placement import OTHER, Placement, norm_placement, residual_stream, trace_layer
from repro.checks.positional import stack_table
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import Absent, CheckContext, Inconclusive, Measurement, NotApplicable

SIZE = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2)

#: Allowed relative error of the least-squares scale of a random sub-layer's kept elements.
SCALE_TOLERANCE = 0.05
#: Traced calls pooled for a layer whose sub-layers are random in train mode.
REPEATS = 32
#: Train-mode calls of a random sub-layer averaged into each of the two independent estimates of its mean.
HALF = 2


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


def observe(name: str, observed: Tensor, clean: Tensor, p: float) -> Site:
    """The site where ``observed`` should be ``clean`` with dropout: the fraction zeroed, and the
    worst kept element's distance from clean / (1 - p)."""
    finite(observed, f"the {name}")
    finite(clean, f"the {name} without dropout")
    live = clean.abs() > 1e-6
    zeroed = (observed.abs() <= 1e-7) & live
    kept = live & ~zeroed
    scale = (observed[kept] - clean[kept] / (1 - p)).abs().max().item() if kept.any() else (
        float("inf") if live.any() else 0.0)
    return Site(name, zeroed.sum().item() / max(live.sum().item(), 1), _not_nan(scale))


def observe_random(name: str, observed: Tensor, sample_a: Tensor, sample_b: Tensor, p: float) -> Site:
    """The site of a sub-layer that is random in train mode (dropout inside it), from pooled calls:
    ``observed`` what it added to the residual stream, ``sample_a`` and ``sample_b`` two more
    train-mode outputs of the sub-layer on the same inputs, each with its own inner dropout.

    Kept elements are checked by their least-squares scale against the sub-layer's own train-mode
    mean m, E[observed] = m / (1 - p): sum(observed * a) / sum(a * b) estimates 1 / (1 - p) without
    bias, since the three draws are independent (E[a b] = m^2). The eval-mode output is no such
    reference: it is the train-mode mean only when a linear map follows the inner dropout, and a
    norm after it (sandwich norms) shifts the scale by several per cent.

    An element counts (``live``) where either estimate of the mean is non-zero: one that is zero in
    every draw is no site. Requiring both non-zero would bias the scale wherever the sub-layer's
    own output is dropped now and then (torch's ``_sa_block`` / ``_ff_block`` end with the layer's
    residual dropout): E[b | b != 0] > m, 9 % at p = 0.3. A zero in ``sample_a`` or ``sample_b``
    adds nothing to either sum, and which of ``observed``'s elements are kept is independent of them."""
    for what, t in (("", observed), (" (a second train-mode call)", sample_a), (" (a third)", sample_b)):
        finite(t, f"the {name}{what}")
    live = (sample_a.abs() > 1e-6) | (sample_b.abs() > 1e-6)
    zeroed = (observed.abs() <= 1e-7) & live
    kept = live & ~zeroed
    if kept.any():
        o, a, b = (t[kept].double() for t in (observed, sample_a, sample_b))
        scale = abs((o * a).sum().item() / (a * b).sum().item() * (1 - p) - 1)
    else:
        scale = float("inf") if live.any() else 0.0
    return Site(name, zeroed.sum().item() / max(live.sum().item(), 1), _not_nan(scale), exact=False)


def _not_nan(value: float) -> float:
    return float("inf") if value != value else value  # NaN: never a pass


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
                     f"elements against the sub-layer's own train-mode mean off 1/(1-p) by at most "
                     f"{100 * max(fitted):.1f}% (allowed {100 * SCALE_TOLERANCE:.0f}%)")
    tolerance = claim.tolerance.get("abs", 0.06)
    passed = worst <= tolerance and all(s.scaled for s in sites)
    return Measurement(round(worst, 4), passed, f"P_drop {p}: {detail}; {'; '.join(scale)}{notes}")


#: Least share of a stream's elements at which the norm received exactly a x, for a to be read as the residual's weight.
WEIGHT_SHARE = 0.05


def residual_weight(received: Tensor, stream: Tensor) -> float:
    """The weight a of the stream in what its norm receives, a x + dropout(Sublayer(x)): 1 in the
    paper; DeepNet's DeepNorm up-weights x by alpha > 1. Read where dropout zeroed the sub-layer's
    output, the elements at which received / x is one value exactly (a share of at least
    :data:`WEIGHT_SHARE`); 1 where no positive value is shared so (no dropout there, or dropout
    elsewhere: then the sites fail as they would at a = 1)."""
    live = stream.abs() > 1e-3
    ratio = (received[live].double() / stream[live].double())
    if ratio.numel() == 0:
        return 1.0
    values, counts = (ratio * 1e4).round().unique(return_counts=True)
    mode = values[counts.argmax()].item() / 1e4
    near = ratio[(ratio - mode).abs() <= 2e-4]
    if near.numel() < WEIGHT_SHARE * ratio.numel() or mode <= 0.05 or abs(mode - 1) <= 1e-3:
        return 1.0
    return near.median().item()


def _reweighted(received: Tensor, stream: Tensor, weight: float) -> Tensor:
    """What the sub-layer added when the norm received ``weight`` x + added; elements equal to
    weight x to float32 rounding added nothing (zeroed by dropout)."""
    scaled = weight * stream.double()
    added = received.double() - scaled
    return added.masked_fill((added.abs() <= 1e-6 * scaled.abs()), 0.0).to(received.dtype)


def _random_in_train_mode(fn: Callable[..., Tensor], *args: Tensor) -> bool:
    return not torch.equal(fn(*args), fn(*args))


class NotRead(NotApplicable):
    """One layer whose residual stream could not be followed (its layout is not one the check
    reads): said in the reason, its sites left out, the other layers' kept."""


def _layer_sites(name: str, layer_call: Callable[[], Tensor], x: Tensor, norms, sublayers: list[tuple[str, Callable]],
                 p: float) -> tuple[list[Site], Placement]:
    """The dropout sites of one layer (one per sub-layer), from traced calls in train mode: one
    call when its sub-layers are deterministic (each compared element by element with the
    sub-layer's own output on the input it was given), :data:`REPEATS` pooled calls when one is
    random (:func:`observe_random`)."""
    finite(layer_call(), f"the output of {name}")  # NaN follows no residual stream: a failure, not "not read"
    if len(norms) != len(sublayers):
        raise NotRead(f"{name} gives {len(norms)} norms for {len(sublayers)} sub-layers")
    traces = [trace_layer(layer_call, x, norms)]
    placement = norm_placement(traces[0], norms)
    if placement.kind == OTHER:
        raise NotRead(f"{name}: its norms are neither after each residual sum (post-norm) nor before each sub-layer "
                      f"(pre-norm), as measured ({placement.seen}), so the residual stream cannot be followed (see "
                      "sec3.sublayer.post-norm)")
    first = residual_stream(traces[0], norms, placement)
    random = [_random_in_train_mode(sublayer, sub_input) for (_, sublayer), (_, _, sub_input) in zip(sublayers, first)]
    streams = [first] + [residual_stream(trace_layer(layer_call, x, norms), norms, placement)
                         for _ in range(REPEATS - 1 if any(random) else 0)]
    weights = [residual_weight(added + stream, stream) for added, stream, _ in first]
    sites = []
    for k, (label, sublayer) in enumerate(sublayers):
        if weights[k] == 1.0:
            added = torch.cat([stream[k][0] for stream in streams])
        else:
            label = f"{label} (residual x{weights[k]:.3g})"
            added = torch.cat([_reweighted(s[k][0] + s[k][1], s[k][1], weights[k]) for s in streams])
        sample = torch.cat([sublayer(stream[k][2]) for stream in streams])
        if random[k]:
            sample = torch.stack([sample] + [torch.cat([sublayer(stream[k][2]) for stream in streams])
                                             for _ in range(2 * HALF - 1)])
            sites.append(observe_random(f"{name} {label}", added, sample[:HALF].mean(0), sample[HALF:].mean(0), p))
        else:
            sites.append(observe(f"{name} {label}", added, sample, p))
    return sites, placement


@checker("dropout.residual")
def residual(claim: Claim, ctx: CheckContext) -> Measurement:
    """Every sub-layer output of every layer, in train mode: what the sub-layer added to the
    residual stream (found where the layer's norms are measured to sit, post- or pre-norm, on the
    layer's own rows where its norms see several streams), against the sub-layer's own train-mode
    output on the same input. Measured: the worst |fraction zeroed - P_drop| over all sub-layers;
    the kept elements must be scaled by 1/(1-p).

    A layer whose stream cannot be followed is named in the reason with what was seen, and the
    other layers' sites are kept: a departure at any of them fails the claim; where all of them
    hold but some layer could not be read, the claim is inconclusive, never a pass."""
    p = claim.params.get("p", 0.3)
    parts = ctx.target.training_model(**SIZE, dropout=p)
    if parts.encoder_layers is None or parts.decoder_layers is None:
        raise NotApplicable(f"{ctx.target.name} does not expose its layers (ModelParts.encoder_layers, decoder_layers)")
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(4, 16, SIZE["d_model"], generator=gen)
    z = torch.randn(4, 10, SIZE["d_model"], generator=gen)
    layers = [(f"encoder {i}", lambda layer=layer: layer.layer(x), layer.norms,
               [("self-attention", layer.self_attention), ("feed-forward", layer.feed_forward)])
              for i, layer in enumerate(parts.encoder_layers)]
    layers += [(f"decoder {i}", lambda layer=layer: layer.layer(x, z), layer.norms,
                [("self-attention", layer.self_attention),
                 ("encoder-decoder attention", lambda h, layer=layer: layer.cross_attention(h, z)),
                 ("feed-forward", layer.feed_forward)])
               for i, layer in enumerate(parts.decoder_layers)]
    sites: list[Site] = []
    placements: set[str] = set()
    streams: list[str] = []
    unread: list[str] = []
    with torch.no_grad():
        for name, call, norms, sublayers in layers:
            try:
                found, placement = _layer_sites(name, call, x, norms, sublayers, p)
            except NotApplicable as why:
                unread.append(str(why))
                continue
            sites += found
            placements.add(placement.kind)
            if placement.streams:
                streams.append(f"{name}: {placement.streams}")
    if not sites:
        raise NotApplicable("no dropout site could be observed: " + "; ".join(unread))
    notes = f"; layers measured {' and '.join(sorted(placements))}"
    notes += "".join(f"; {s}" for s in streams)
    measured = _measure(sites, p, claim, notes)
    if unread:
        measured.detail += f"; not read ({len(unread)} of {len(layers)} layers): " + "; ".join(unread)
        if measured.passed:
            raise Inconclusive(f"the {len(sites)} sites measured hold ({measured.detail}), but not every layer "
                               "could be read, so the claim is not established")
    return measured


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
