"""Section 4's comparisons of layer costs, measured with PyTorch's FLOP counter on the layers of
:mod:`repro.complexity.layer_types` (Table 1's are in :mod:`repro.checks.table1`):

* "self-attention layers are faster than recurrent layers when the sequence length n is smaller
  than the representation dimensionality d";
* "Convolutional layers are generally more expensive than recurrent layers, by a factor of k";
* "Separable convolutions ... decrease the complexity considerably, to O(k n d + n d^2). Even
  with k = n, however, the complexity of a separable convolution is equal to the combination of a
  self-attention layer and a point-wise feed-forward layer".
"""

from __future__ import annotations

import math

import torch

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.complexity.flops import count_flops
from repro.complexity.layer_types import (
    ConvolutionalLayer,
    FeedForwardLayer,
    RecurrentLayer,
    SelfAttentionLayer,
    SeparableConvolutionalLayer,
)


def _flops(layer: torch.nn.Module, n: int, d: int) -> int:
    """FLOPs of one forward pass on (1, n, d), the layer's own (position-wise projections apart)."""
    with torch.device("meta"):
        return count_flops(layer, torch.randn(1, n, d))[0]


def _build(cls, *args):
    with torch.device("meta"):
        return cls(*args)


@checker("section4.attention_vs_recurrent", audits=False)
def attention_vs_recurrent(claim: Claim, ctx: CheckContext) -> Measurement:
    """The sequence length at which a self-attention layer stops being cheaper than a recurrent
    one, over the width d (interpolated in log n between grid points). Measured: crossover n / d,
    and whether self-attention is cheaper at every n < d (and dearer at every n > d)."""
    ratios, consistent = [], True
    for d in claim.params.get("d", [32, 64, 128]):
        lengths = [d // 8, d // 4, d // 2, 2 * d, 4 * d, 8 * d]
        cost = {n: _flops(_build(SelfAttentionLayer, d), n, d) / _flops(_build(RecurrentLayer, d), n, d)
                for n in lengths}
        finite(list(cost.values()), f"the FLOP ratios at d = {d}")
        consistent &= all((cost[n] < 1) == (n < d) for n in lengths)
        below, above = max(n for n in lengths if cost[n] < 1), min(n for n in lengths if cost[n] >= 1)
        t = -math.log(cost[below]) / (math.log(cost[above]) - math.log(cost[below]))
        ratios.append(math.exp(math.log(below) + t * (math.log(above) - math.log(below))) / d)
    value = round(max(ratios, key=lambda r: abs(math.log(r))), 3)
    return Measurement(value, None if consistent else False,
                       f"crossover n/d per d: {', '.join(f'{r:.2f}' for r in ratios)}; cheaper exactly when n < d: "
                       f"{consistent}")


@checker("section4.convolution_factor_k", audits=False)
def convolution_factor_k(claim: Claim, ctx: CheckContext) -> Measurement:
    """FLOPs of a convolution of width k over those of a recurrent layer, fitted against k.
    Measured: the exponent of k (the paper: the factor grows as k, exponent 1)."""
    n, d = claim.params.get("n", 32), claim.params.get("d", 64)
    kernels = claim.params.get("k", [2, 3, 5, 9, 17])
    rnn = _flops(_build(RecurrentLayer, d), n, d)
    ratios = finite([_flops(_build(ConvolutionalLayer, d, k), n, d) / rnn for k in kernels], "the FLOP ratios")
    xs, ys = [math.log(k) for k in kernels], [math.log(r) for r in ratios]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return Measurement(round(slope, 4), detail=", ".join(f"k={k}: {r:.2f}x" for k, r in zip(kernels, ratios)))


def _two_term_residual(points: list[tuple[int, int, float]]) -> float:
    """Largest relative residual of fitting FLOPs = a n^2 d + b n d^2 (least squares)."""
    design = torch.tensor([[n * n * d, n * d * d] for n, d, _ in points], dtype=torch.float64)
    y = torch.tensor([f for _, _, f in points], dtype=torch.float64).unsqueeze(1)
    coef = torch.linalg.lstsq(design, y).solution
    return ((design @ coef - y).abs() / y).max().item()


@checker("section4.separable_convolution", audits=False)
def separable_convolution(claim: Claim, ctx: CheckContext) -> Measurement:
    """A separable convolution with k = n, and a self-attention layer plus a point-wise
    feed-forward layer, both fitted as a n^2 d + b n d^2 over a grid of n and d: both must be
    exactly of that form (the same complexity). Measured: the larger relative residual."""
    grid = [(n, d) for n in claim.params.get("n", [8, 16, 32, 64]) for d in claim.params.get("d", [16, 32, 64])]
    separable = [(n, d, _flops(_build(SeparableConvolutionalLayer, d, n), n, d)) for n, d in grid]
    combined = [(n, d, _flops(_build(SelfAttentionLayer, d), n, d) + _flops(_build(FeedForwardLayer, d, 4 * d), n, d))
                for n, d in grid]
    finite([f for *_, f in separable + combined], "the FLOP counts")
    res_sep, res_comb = _two_term_residual(separable), _two_term_residual(combined)
    return Measurement(max(res_sep, res_comb), detail=(
        f"relative residual of a n^2 d + b n d^2: separable convolution (k = n) {res_sep:.1e}, "
        f"self-attention + feed-forward {res_comb:.1e} over {len(grid)} (n, d) points"))
