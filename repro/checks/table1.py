"""Checkers for Table 1 (Section 4): complexity, sequential operations and path length, measured.

They measure the four layer types of :mod:`repro.complexity.layer_types`, not the implementation
under audit (``audits=False``). Each returns the fitted growth (exponents, or the slope against
log_k n) as its value and decides pass/fail itself, with the tolerance in the claim's params;
``extra`` holds the raw grid points and the fit, so the log-log plots can be drawn from stored
results.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator

import torch
from torch import nn

from repro.claims.outcome import CheckContext, Measurement
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.complexity.flops import fit_exponents, measure_complexity
from repro.complexity.layer_types import (
    ConvolutionalLayer,
    RecurrentLayer,
    RestrictedSelfAttentionLayer,
    SelfAttentionLayer,
)
from repro.complexity.path import (
    closed_form,
    max_path_length,
    one_thread,
    recurrent_path_lengths,
    required_pairs,
    stack_path_lengths,
)
from repro.complexity.sequential import measure_sequential

#: Builders by the names claims use; extra sizes (kernel k, neighbourhood r) as keywords.
LAYERS: dict[str, Callable[..., nn.Module]] = {
    "self-attention": lambda d: SelfAttentionLayer(d),
    "recurrent": lambda d: RecurrentLayer(d),
    "convolutional": lambda d, k: ConvolutionalLayer(d, k),
    "restricted": lambda d, r: RestrictedSelfAttentionLayer(d, r),
}


def _layer(claim: Claim) -> Callable[..., nn.Module]:
    name = claim.params["layer"]
    if name not in LAYERS:
        raise ValueError(f"claim {claim.id}: unknown layer type '{name}' (known: {', '.join(LAYERS)})")
    return LAYERS[name]


def _compare(claim: Claim, measured: dict[str, float]) -> tuple[bool, str]:
    """Each expected growth within ``params.tolerance`` of the measured one."""
    tol = float(claim.params.get("tolerance", 0.15))
    expected: dict[str, float] = claim.expected
    misses = [k for k in expected if k not in measured or abs(measured[k] - expected[k]) > tol]
    text = ", ".join(f"{k}: {measured.get(k, float('nan')):.3f} vs {expected[k]}" for k in expected)
    return not misses, f"{text} (tolerance ±{tol:g})"


@checker("table1.complexity", audits=False)
def complexity(claim: Claim, ctx: CheckContext) -> Measurement:
    """FLOPs of one layer over a product grid of n, d (and k or r), exponents fitted in log-log."""
    grid = claim.params["grid"]
    result = measure_complexity(_layer(claim), grid, seed=ctx.seed)
    measured = {k: round(v, 3) + 0.0 for k, v in result.fit.exponents.items()}  # + 0.0: no "-0"
    passed, text = _compare(claim, measured)
    detail = (
        f"FLOPs ∝ {' · '.join(f'{k}^{v:.3f}' for k, v in result.fit.exponents.items())} over "
        f"{len(result.points)} grid points (max log residual {result.fit.max_residual:.2g}); {text}"
    )
    extra = {
        "counted": "FlopCounterMode FLOPs of one forward pass, batch 1, without position-wise projections",
        "points": result.points,
        "fit": result.fit.to_dict(),
    }
    return Measurement(measured, passed, detail, unit="exponents of FLOPs", extra=extra)


@checker("table1.sequential", audits=False)
def sequential(claim: Claim, ctx: CheckContext) -> Measurement:
    """Critical-path depth of one forward pass at several n; the value is its exponent in n."""
    sizes = {k: v for k, v in claim.params.items() if k in ("k", "r")}
    d = int(claim.params.get("d", 8))
    build = _layer(claim)
    result = measure_sequential(lambda: build(d, **sizes), claim.params["n"], d, seed=ctx.seed)
    exponent = round(result.fit.exponents["n"], 3) + 0.0
    depths = ", ".join(f"n={p['n']}: {p['depth']}" for p in result.points)
    extra = {"points": result.points, "fit": result.fit.to_dict()}
    return Measurement(exponent, None, f"dependent operations {depths}; depth ∝ n^{exponent}", unit="exponent of n", extra=extra)


def _stack(kind: str, d: int, k: int | None, r: int | None) -> Iterator[nn.Module]:
    for level in itertools.count():
        if kind == "self-attention":
            yield SelfAttentionLayer(d)
        elif kind == "convolutional-contiguous":
            yield ConvolutionalLayer(d, k)
        elif kind == "convolutional-dilated":
            yield ConvolutionalLayer(d, k, dilation=k**level)
        elif kind == "restricted":
            yield RestrictedSelfAttentionLayer(d, r)
        else:
            raise ValueError(f"no stack of layer type '{kind}'")


def path_point(kind: str, n: int, d: int, seed: int, k: int | None = None, r: int | None = None) -> dict:
    """Measure the maximum path length of one configuration; compare with the closed form."""
    torch.manual_seed(seed)
    x = torch.randn(1, n, d)
    causal = kind == "recurrent" or kind.startswith("convolutional")
    with one_thread():
        if kind == "recurrent":
            lengths = recurrent_path_lengths(RecurrentLayer(d), x, seed=seed)
        else:
            lengths = stack_path_lengths(_stack(kind, d, k, r), x, causal=causal, max_depth=2 * n, seed=seed)
    required = required_pairs(n, causal)
    point = {"n": n, "max_path": max_path_length(lengths, causal), "unconnected": int(torch.isinf(lengths[required]).sum())}
    point.update({name: v for name, v in (("k", k), ("r", r)) if v is not None})
    point["closed_form"] = closed_form(kind, n, k=k, r=r)
    return point


@checker("table1.path", audits=False)
def path(claim: Claim, ctx: CheckContext) -> Measurement:
    """Maximum path length over every pair that must be connected, at each n (and k or r).

    Growth fitted: ``n`` (and ``r``) as log-log exponents, ``log_k(n)`` as the least-squares
    slope of the path length against log_k n. Passes when every fitted growth is within
    tolerance, every pair is connected and each point equals the closed form of :func:`repro.complexity.path.closed_form`."""
    p = claim.params
    kind, d = p["layer"], int(p.get("d", 4))
    cache: dict[tuple, dict] = {}

    def measure(n: int, k: int | None = None, r: int | None = None) -> dict:
        if (n, k, r) not in cache:
            cache[n, k, r] = path_point(kind, n, d, ctx.seed, k=k, r=r)
        return cache[n, k, r]

    # ``grid``: [{k = .., n = [..]}, ...] for kernels; else one list ``n`` (with ``r`` for restricted).
    grid = p.get("grid") or [{"n": p["n"]}]
    points = [measure(n, k=row.get("k"), r=p.get("r")) for row in grid for n in row["n"]]
    sweep = p.get("r_sweep")  # {n = .., r = [..]}: the dependence on r at fixed n
    r_points = [measure(sweep["n"], r=r) for r in sweep["r"]] if sweep else []
    every = points + [q for q in r_points if q not in points]
    if any(q["unconnected"] for q in every):
        bad = next(q for q in every if q["unconnected"])
        return Measurement(
            {"max_path": math.inf}, False, f"{bad['unconnected']} required pairs never connected at n={bad['n']}",
            extra={"points": every},
        )
    finite([q["max_path"] for q in every], "the measured path lengths")
    measured: dict[str, float] = {}
    fits: dict[str, dict] = {}
    if "log_k(n)" in claim.expected:
        xs = torch.tensor([math.log(q["n"]) / math.log(q["k"]) for q in points], dtype=torch.float64)
        ys = torch.tensor([q["max_path"] for q in points], dtype=torch.float64)
        design = torch.stack([torch.ones_like(xs), xs], dim=1)
        intercept, slope = torch.linalg.lstsq(design, ys.unsqueeze(1)).solution.squeeze(1).tolist()
        measured["log_k(n)"] = round(slope, 3) + 0.0
        fits["log_k(n)"] = {"slope": slope, "intercept": intercept}
    if "n" in claim.expected:
        fit = fit_exponents(points, ["n"], "max_path")
        measured["n"] = round(fit.exponents["n"], 3) + 0.0
        fits["n"] = fit.to_dict()
    if "r" in claim.expected:
        fit = fit_exponents(r_points, ["r"], "max_path")
        measured["r"] = round(fit.exponents["r"], 3) + 0.0
        fits["r"] = fit.to_dict()
    passed, text = _compare(claim, measured)
    off_form = [q for q in every if q["max_path"] != q["closed_form"]]
    listing = "; ".join(
        f"n={q['n']}{', k=%d' % q['k'] if 'k' in q else ''}{', r=%d' % q['r'] if 'r' in q else ''}: "
        f"{q['max_path']:g} (closed form {q['closed_form']})"
        for q in every
    )
    detail = f"max path {listing}; growth {text}"
    if off_form:
        detail += f"; {len(off_form)} points differ from the closed form"
    extra = {"points": every, "fit": fits}
    return Measurement(measured, passed and not off_form, detail, unit="growth of max path length", extra=extra)
