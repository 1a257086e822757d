"""Table 1, "Complexity per layer": FLOPs counted over a grid of sizes, exponents fitted.

What is counted: the floating-point operations PyTorch's ``FlopCounterMode`` attributes to one
forward pass of a layer on one sequence (batch 1): matrix products, batched matrix products and
convolutions, 2 FLOPs per multiply-add, and the fused attention kernels it does not know
(``F.scaled_dot_product_attention`` on the CPU, ``nn.MultiheadAttention``'s fast path), counted
analytically (:func:`flop_counter`). Element-wise work (softmax, tanh, bias adds, masking) is
not counted; it is O(n d) or O(r n) for every layer here, below each layer's leading term.
The position-wise projections of the attention layers (W^Q, W^K, W^V, W^O, O(n d^2)) are left
out, as the paper leaves them out of Table 1 (see :mod:`repro.complexity.layer_types`); their FLOPs
are still recorded beside the count.

The fit: least squares of log FLOPs on log n, log d (and log k or log r) over a full product
grid, log F = c + a log n + b log d + ...; on a product grid this is the mean of the one-axis
slopes, and a pure monomial leaves residuals of zero. The residual is reported, so a count that
is not a monomial in the grid (e.g. n^2 d + n d^2 mixed) shows itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

aten = torch.ops.aten


@dataclass
class LogLogFit:
    """log y = log_coefficient + sum_v exponents[v] * log v, fitted by least squares."""

    exponents: dict[str, float]
    log_coefficient: float
    max_residual: float  # largest |log y - fitted log y| over the points, in natural log units

    def to_dict(self) -> dict:
        return {
            "exponents": {k: round(v, 6) for k, v in self.exponents.items()},
            "log_coefficient": round(self.log_coefficient, 6),
            "max_residual": round(self.max_residual, 6),
        }


def fit_exponents(points: Sequence[Mapping[str, float]], variables: Sequence[str], target: str) -> LogLogFit:
    """Fit ``target`` ~ C * prod(v ** e_v) over ``points`` (dicts holding each variable and the
    target, all positive) by least squares in log-log."""
    if len(points) <= len(variables):
        raise ValueError(f"{len(points)} points cannot determine {len(variables)} exponents and a constant")
    for p in points:
        if any(p[v] <= 0 for v in (*variables, target)):
            raise ValueError(f"log-log fit needs positive values, got {dict(p)}")
    design = torch.tensor([[1.0, *(math.log(p[v]) for v in variables)] for p in points], dtype=torch.float64)
    y = torch.tensor([math.log(p[target]) for p in points], dtype=torch.float64).unsqueeze(1)
    coef = torch.linalg.lstsq(design, y).solution.squeeze(1)
    residual = (design @ coef - y.squeeze(1)).abs().max().item()
    return LogLogFit({v: coef[i + 1].item() for i, v in enumerate(variables)}, coef[0].item(), residual)


def _sdpa_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    """Eq. 1's two products, QK^T and (weights)V, of a fused attention kernel: 2 FLOPs per
    multiply-add, as the counter's own formula for the GPU kernels (masking and softmax are
    element-wise and not counted)."""
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _sdpa_backward_flops(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _native_mha_flops(query_shape, key_shape, value_shape, embed_dim, num_heads, *args, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    """``nn.MultiheadAttention``'s inference fast path, one opaque kernel: the four projections
    (W^Q, W^K, W^V, W^O) and Eq. 1 on batch-first (batch, n, d_model) inputs."""
    batch, n_q, d_model = query_shape
    n_k = key_shape[1]
    projections = 2 * batch * d_model * embed_dim * (n_q + 2 * n_k) + 2 * batch * n_q * embed_dim * d_model
    d_head = embed_dim // num_heads
    heads = (batch, num_heads)
    return projections + sdpa_flop_count((*heads, n_q, d_head), (*heads, n_k, d_head), (*heads, n_k, d_head))


#: Kernels the PyTorch FLOP counter does not know, counted analytically. Without them the fused
#: attention of ``F.scaled_dot_product_attention`` on the CPU counts 0 FLOPs.
OPAQUE_KERNELS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_flops,
    aten._scaled_dot_product_fused_attention_overrideable: _sdpa_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_backward_flops,
    aten._native_multi_head_attention: _native_mha_flops,
}


def flop_counter() -> FlopCounterMode:
    """PyTorch's FLOP counter, taught the fused attention kernels it misses (:data:`OPAQUE_KERNELS`)."""
    return FlopCounterMode(display=False, custom_mapping=OPAQUE_KERNELS)


def count_flops(layer: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """(FLOPs of the layer without its position-wise projections, FLOPs of those projections)."""
    with flop_counter() as counter, torch.no_grad():
        layer(x)
    total = counter.get_total_flops()
    names = set(getattr(layer, "positionwise", ()))
    projections = sum(
        sum(ops.values()) for module, ops in counter.get_flop_counts().items() if module.split(".")[-1] in names
    )
    return total - projections, projections


@dataclass
class ComplexityMeasurement:
    """The grid points (one dict per point: sizes, ``flops``, ``projection_flops``) and the fit."""

    points: list[dict[str, int]]
    fit: LogLogFit
    variables: list[str] = field(default_factory=list)


def measure_complexity(
    build: Callable[..., nn.Module], grid: Mapping[str, Sequence[int]], seed: int = 0, device: str = "meta"
) -> ComplexityMeasurement:
    """Count FLOPs of ``build(**sizes)`` on a (1, n, d) input at every point of the product
    ``grid`` (which must name ``n`` and ``d``; other axes, e.g. ``k`` or ``r``, go to ``build``),
    then fit the exponent of every axis that varies."""
    torch.manual_seed(seed)
    axes = list(grid)
    points = []
    for values in itertools.product(*(grid[a] for a in axes)):
        sizes = dict(zip(axes, values))
        layer_args = {a: v for a, v in sizes.items() if a != "n"}
        # The count needs shapes, not values: on the meta device nothing is computed.
        with torch.device(device):
            layer, x = build(**layer_args), torch.randn(1, sizes["n"], sizes["d"])
            flops, projections = count_flops(layer, x)
        points.append({**sizes, "flops": flops, "projection_flops": projections})
    varying = [a for a in axes if len(set(grid[a])) > 1]
    return ComplexityMeasurement(points, fit_exponents(points, varying, "flops"), varying)
