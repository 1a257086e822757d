"""Eq. 1 inside the model: the scores its attention normalises, against the queries and keys its own
projections form.

``sec3.eq1.scaled-dot-product`` and ``sec3.eq1.every-path`` hand the attention function queries and
keys; they cannot see a scale applied before it, in the module that forms Q = x W^Q and K = x W^K (a
query scaled by d_k^-0.5 in its projection, as fairseq does, *and* the scores divided by sqrt(d_k)
again: softmax(Q K^T / d_k)). Here the model's first encoder self-attention runs on random inputs
under a dispatch mode that keeps the outputs of every matrix product over the positions (the
projections) and the input of every softmax over the keys (or the query, key and scale a fused
kernel takes). Some pair of those projections, split into the model's h heads of d_k = d_model / h,
must give the scores exactly as Q K^T / sqrt(d_k); wherever the implementation puts the scale (on
the query, on the product, on the scores) it must count once.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import Worst, finite
from repro.claims.outcome import Absent, CheckContext, Measurement, NotApplicable
from repro.claims.seeding import claim_seed, seeded
from repro.complexity.products import FUSED_ATTENTION, SOFTMAX

aten = torch.ops.aten
#: the products a linear layer runs as (a 2-D view of the positions times the weight)
_LINEAR = {aten.addmm, aten.mm, aten.linear}


def _adds_a_bias(args: tuple) -> bool:
    """A bias added to a product's output apart from it (FSMT's ``mm`` then ``add``)."""
    return (len(args) == 2 and all(isinstance(a, torch.Tensor) for a in args) and args[1].dim() == 1
            and args[0].dim() >= 2 and args[0].size(-1) == args[1].size(0))


class _ScoresAndProjections(TorchDispatchMode):
    """Keeps each product's output over the ``positions`` rows (batch x length), with its bias where
    one is added apart, and each set of
    scores over ``length`` keys: a softmax's input, or what a fused kernel's q, k, scale and bias give."""

    def __init__(self, positions: int, length: int) -> None:
        super().__init__()
        self.positions, self.length = positions, length
        self.projections: list[torch.Tensor] = []
        self.scores: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if (packet in _LINEAR or packet is aten.add and _adds_a_bias(args)) and isinstance(out, torch.Tensor) \
                and out.dim() >= 2:
            self._projection(out.detach().double().reshape(-1, out.size(-1)))
        elif packet is aten.bmm and out.size(0) == 1:
            # a batch-1 product: ``einsum("bnd,dk->bnk", x, W_i)``, one head's projection at a time
            self._projection(out.detach().double()[0])
        elif packet is aten.convolution and _pointwise(args[1]) and out.dim() == 3:
            # a 1x1 convolution over (batch, channels, time): a projection of each position's channels
            self._projection(out.detach().double().transpose(1, 2).reshape(-1, out.size(1)))
        elif packet in SOFTMAX and args[0].dim() >= 3 and args[0].shape[-2:] == (self.length, self.length):
            self.scores.append(args[0].detach().double())
        elif packet in FUSED_ATTENTION and args[0].size(-2) == self.length:
            q, k = args[0].detach().double(), args[1].detach().double()
            scale = kwargs.get("scale")
            scores = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(q.size(-1)))
            bias = kwargs.get("attn_mask", args[3] if packet is aten._scaled_dot_product_efficient_attention
                              and len(args) > 3 else None)
            if isinstance(bias, torch.Tensor) and bias.dtype != torch.bool:
                scores = scores + bias.detach().double()
            self.scores.append(scores)
        return out

    def _projection(self, flat: torch.Tensor) -> None:
        if flat.size(0) == self.positions:
            self.projections.append(flat)


def _pointwise(weight: torch.Tensor) -> bool:
    """A convolution's weight (out, in, *kernel) whose kernel is one position wide."""
    return weight.dim() >= 3 and all(k == 1 for k in weight.shape[2:])


def _heads(projection: torch.Tensor, batch: int, length: int, heads: int, batch_first: bool) -> torch.Tensor:
    """(batch x length, heads x d) as (batch, heads, length, d); its rows batch-major or, as
    ``nn.MultiheadAttention`` lays out (length, batch, d_model), length-major."""
    if batch_first:
        return projection.view(batch, length, heads, -1).transpose(1, 2)
    return projection.view(length, batch, heads, -1).permute(1, 2, 0, 3)


def scores_against_projections(scores: torch.Tensor, projections: list[torch.Tensor], batch: int, length: int,
                               heads: int, d_k: int) -> tuple[float, float, str]:
    """The pair of projection chunks (each ``heads`` x ``d_k`` wide) whose per-head Q K^T best explains
    ``scores`` up to one factor c: (relative residual of that fit, c sqrt(d_k), which pair). The scores
    are laid out (batch, heads, ...) or, where the heads lead (an attention over (h, batch, n, d_k)),
    (heads, batch, ...): both are tried."""
    layouts = {"batch": scores.reshape(batch, heads, length, length),
               "heads": scores.reshape(heads, batch, length, length).transpose(0, 1)}
    width = heads * d_k
    chunks = [(f"product {i} [{j}:{j + width}]", p[:, j:j + width]) for i, p in enumerate(projections)
              if p.size(1) % width == 0 for j in range(0, p.size(1), width)]
    best: tuple[float, float, str] | None = None
    for (name_q, q), (name_k, k), batch_first, (lead, s) in itertools.product(chunks, chunks, (True, False),
                                                                            layouts.items()):
        queries, keys = (_heads(x, batch, length, heads, batch_first) for x in (q, k))
        raw = queries @ keys.transpose(-1, -2)
        c = float((s * raw).sum() / (raw * raw).sum().clamp(min=1e-300))
        residual = float((s - c * raw).abs().max() / s.abs().max().clamp(min=1e-300))
        if best is None or residual < best[0]:
            best = (residual, c * math.sqrt(d_k), f"Q from {name_q}, K from {name_k}, rows "
                    f"{'batch' if batch_first else 'length'}-major" + (", heads leading" if lead == "heads" else ""))
    if best is None:
        raise NotApplicable(f"no product over the positions is a multiple of h x d_k = {width} wide: the queries "
                            "and keys the scores are made of were not seen")
    return best


def _fit(seen: _ScoresAndProjections, batch: int, length: int, heads: int, d_k: int) -> tuple[float, float, str]:
    """:func:`scores_against_projections` on the first scores seen; where they are one head's (the heads
    computed one after another, each with its own softmax), on each of the first h, each head's own
    Q and K among the products: the worst residual and the scale furthest from 1."""
    if heads == 1 or seen.scores[0].numel() != batch * length * length or len(seen.scores) < heads:
        return scores_against_projections(seen.scores[0], seen.projections, batch, length, heads, d_k)
    fits = [scores_against_projections(s, seen.projections, batch, length, 1, d_k) for s in seen.scores[:heads]]
    scale = max((f[1] for f in fits), key=lambda c: abs(c - 1.0))
    return max(f[0] for f in fits), scale, f"{heads} heads one after another, each fitted apart; head 1: {fits[0][2]}"


@checker("attention.scores_in_model")
def scores_in_model(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 1's scale on the path the model runs: for each h in params.heads, the model (d_model =
    params.d_model, d_k = d_model / h) is built at initialisation and its first encoder
    self-attention run on random inputs; the scores its softmax (or fused kernel) normalises are
    compared with Q K^T / sqrt(d_k) for the pair of its own projections that explains them best.
    Measured: the worst departure, max(relative residual, |c sqrt(d_k) - 1|) where the scores are
    c Q K^T; 0 when the scale counts exactly once."""
    d_model = int(claim.params.get("d_model", 64))
    batch, length = 2, 7
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, lines = Worst(), []
    for heads in claim.params.get("heads", [1, 8]):
        with seeded(claim_seed(ctx.seed, claim.id, heads)):   # the model's weights from a seed of its own
            parts = ctx.target.model(vocab_size=40, d_model=d_model, n_heads=heads, d_ff=64, n_layers=1)
            attend = (parts.encoder_layers[0].self_attention if parts.encoder_layers
                      else (lambda x, m=ctx.target.multi_head_attention(d_model, heads): m(x, x, x)))
        x = torch.randn(batch, length, d_model, generator=gen)
        fast_path = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)   # torch's fused inference kernel hides its scores
        try:
            with _ScoresAndProjections(batch * length, length) as seen, torch.no_grad():
                finite(attend(x), "the self-attention's output")
        finally:
            torch.backends.mha.set_fastpath_enabled(fast_path)
        if not seen.scores:
            raise Absent(f"{ctx.target.name}'s self-attention normalises no scores over its {length} positions "
                         "(no softmax over the keys, no fused attention kernel): no Eq. 1 to measure")
        d_k = d_model // heads
        residual, scale, pair = _fit(seen, batch, length, heads, d_k)
        finite([residual, scale], f"the scores at h = {heads}")
        departure = max(residual, abs(scale - 1.0))
        worst.add(departure, f"h = {heads}")
        lines.append(f"h {heads} (d_k {d_k}): scores = {scale:.4f} x Q K^T / sqrt(d_k), residual {residual:.1e} "
                     f"({pair})")
    return Measurement(worst.value, detail="; ".join(lines) + "; the model at initialisation, its first encoder "
                       "self-attention on random inputs")
