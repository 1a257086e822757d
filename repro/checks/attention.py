"""Checkers for Section 3.2: Eq. 1, footnote 4, multi-head cost, the decoder's causal mask."""

from __future__ import annotations

import math

import torch

from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.complexity.flops import flop_counter


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Eq. 1 in float64, written independently of the implementation under test."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    return torch.einsum("...ij,...jd->...id", torch.softmax(scores, dim=-1), v)


def random_attention_case(gen: torch.Generator, *, scale: float = 3.0) -> tuple[torch.Tensor, ...]:
    """Random (q, k, v, mask) with a padding mask that keeps at least one key per row."""
    batch, heads = (int(x) for x in torch.randint(1, 4, (2,), generator=gen))
    n_q, n_k = (int(x) for x in torch.randint(1, 12, (2,), generator=gen))
    d_k, d_v = (int(x) for x in torch.randint(1, 40, (2,), generator=gen))
    q = torch.randn(batch, heads, n_q, d_k, generator=gen) * scale
    k = torch.randn(batch, heads, n_k, d_k, generator=gen) * scale
    v = torch.randn(batch, heads, n_k, d_v, generator=gen)
    keep = torch.rand(batch, 1, 1, n_k, generator=gen) > 0.3
    keep[..., 0] = True
    return q, k, v, keep


@checker("attention.eq1")
def eq1(claim: Claim, ctx: CheckContext) -> Measurement:
    """Max |Attention(Q,K,V) - softmax(QK^T/sqrt(d_k))V| over random shapes and padding masks."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst = 0.0
    trials = int(claim.params.get("trials", 50))
    for _ in range(trials):
        q, k, v, mask = random_attention_case(gen)
        with torch.no_grad():
            got = ctx.target.attention(q, k, v, mask)
        if got.shape != v.shape[:-2] + (q.shape[-2], v.shape[-1]):
            return Measurement(float("inf"), False, f"output shape {tuple(got.shape)} is wrong")
        worst = max(worst, (got.double() - reference_attention(q, k, v, mask)).abs().max().item())
    return Measurement(worst, detail=f"max abs error {worst:.2e} over {trials} random cases")


@checker("attention.footnote4", audits=False)
def footnote4(claim: Claim, ctx: CheckContext) -> Measurement:
    """Footnote 4: for q, k with independent N(0, 1) components, q.k has mean 0 and variance d_k.
    Measured by sampling; reports the worst |var/d_k - 1| and |mean|/sqrt(d_k)."""
    gen = torch.Generator().manual_seed(ctx.seed)
    samples = int(claim.params.get("samples", 20000))
    worst_var, worst_mean = 0.0, 0.0
    for d_k in claim.params.get("d_k", [16, 64, 256, 1024]):
        q = torch.randn(samples, d_k, generator=gen, dtype=torch.float64)
        k = torch.randn(samples, d_k, generator=gen, dtype=torch.float64)
        dots = (q * k).sum(-1)
        worst_var = max(worst_var, abs(dots.var().item() / d_k - 1))
        worst_mean = max(worst_mean, abs(dots.mean().item()) / math.sqrt(d_k))
    # Sampling error of a variance estimate is about sqrt(2/samples); allow 5 sigma.
    bound = 5 * math.sqrt(2 / samples)
    return Measurement(
        round(1 + worst_var, 4), worst_var <= bound and worst_mean <= bound,
        f"var(q.k)/d_k within {worst_var:.3f} of 1 and |mean|/sqrt(d_k) <= {worst_mean:.3f} (bound {bound:.3f})",
    )


class InvisibleAttention(RuntimeError):
    """The FLOP counter saw no term quadratic in n: the attention products ran in a kernel it
    cannot see into, and a ratio of the projections alone would pass on partial evidence."""


def _flops(module, x: torch.Tensor) -> int:
    """FLOPs of module(x, x, x): the protocol calls ``multi_head_attention``'s module as
    self-attention, query = key = value."""
    with flop_counter() as counter, torch.no_grad():
        module(x, x, x)
    return counter.get_total_flops()


@checker("attention.multihead_cost")
def multihead_cost(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.2.2: FLOPs of h-head attention with d_k = d_model/h over single-head attention
    with full dimensionality, counted by PyTorch's FLOP counter on the implementation (taught
    the fused attention kernels it misses, :func:`repro.complexity.flops.flop_counter`).

    The count must include Eq. 1's products, not only the projections: the part quadratic in
    n, F(2n) - 2 F(n), must be positive for both modules, else the check refuses to measure."""
    d_model, n = claim.params.get("d_model", 512), claim.params.get("length", 64)
    heads = claim.params.get("heads", 8)
    gen = torch.Generator().manual_seed(ctx.seed)
    x, x2 = torch.randn(2, n, d_model, generator=gen), torch.randn(2, 2 * n, d_model, generator=gen)
    counts = {}
    for h in (heads, 1):
        module = ctx.target.multi_head_attention(d_model, h)
        counts[h] = (_flops(module, x), _flops(module, x2))
    multi, single = counts[heads][0], counts[1][0]
    if single == 0:
        return Measurement(float("nan"), False, "the FLOP counter saw no matrix products")
    quadratic = {h: (f2 - 2 * f) // 2 for h, (f, f2) in counts.items()}  # = the attention products at n
    if min(quadratic.values()) <= 0:
        raise InvisibleAttention(
            f"the FLOP counter saw no term quadratic in n (h={heads}: {quadratic[heads]:,}, h=1: {quadratic[1]:,}): "
            "the attention products ran in a kernel it cannot count, so the cost cannot be compared"
        )
    detail = (f"{multi:,} vs {single:,} FLOPs at n={n}, d_model={d_model}; of which attention products "
              f"{quadratic[heads]:,} vs {quadratic[1]:,}")
    return Measurement(multi / single, detail=detail)


@checker("attention.causal_mask")
def causal_mask(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: the decoder's output at i depends only on target positions <= i, on every
    attention path the model runs.

    Perturbation test: change the target token at j; logits at every i < j must not move,
    and (to show the probe can see a dependency) logits at i >= j must. Measured: the number
    of (i, j) pairs where a future position leaked into an earlier output."""
    gen = torch.Generator().manual_seed(ctx.seed)
    leaks, blind, paths = 0, 0, []
    for path, parts in ctx.target.model_paths(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2).items():
        src = torch.randint(4, 40, (2, 7), generator=gen)
        tgt = torch.randint(4, 40, (2, 9), generator=gen)
        with torch.no_grad():
            base = parts.forward(src, tgt)
            require_informative(base, f"the logits ({path})")
            for j in range(tgt.size(1)):
                changed = tgt.clone()
                changed[:, j] = 4 + (changed[:, j] - 4 + 7) % 36
                out = parts.forward(src, changed)
                delta = (out - base).abs().amax(dim=(0, 2))
                leaks += int((delta[:j] > 1e-6).sum())
                blind += int(delta[j] <= 1e-6)
        paths.append(path)
    detail = (f"{leaks} leaking (i < j) pairs; {blind} positions insensitive to their own input "
              f"(attention paths: {', '.join(paths)})")
    return Measurement(leaks, passed=leaks == 0 and blind == 0, detail=detail)


@checker("attention.eq1_paths")
def eq1_paths(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 1 on every attention function the model can run (a reference path and a fused kernel,
    say), with padding masks and the decoder's causal mask: the worst error over all of them."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = 0.0, []
    for path, fn in ctx.target.attention_paths().items():
        path_worst = 0.0
        for trial in range(int(claim.params.get("trials", 30))):
            q, k, v, mask = random_attention_case(gen)
            if trial % 2:  # the decoder's self-attention: square, causal
                k, v = q.clone(), torch.randn(*q.shape[:-1], v.size(-1), generator=gen)
                mask = torch.ones(q.size(-2), q.size(-2), dtype=torch.bool).tril()[None, None]
            with torch.no_grad():
                got = fn(q, k, v, mask)
            path_worst = max(path_worst, (got.double() - reference_attention(q, k, v, mask)).abs().max().item())
        worst = max(worst, path_worst)
        details.append(f"{path}: {path_worst:.1e}")
    return Measurement(worst, detail="max abs error per path: " + ", ".join(details))


def _affinity_in_values(call, q: torch.Tensor, k: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor, a: float,
                        what: str) -> float:
    """max |f(q, k, a v1 + (1 - a) v2) - (a f(q, k, v1) + (1 - a) f(q, k, v2))| for one call."""
    with torch.no_grad():
        one, two = call(q, k, v1), call(q, k, v2)
        require_informative(one, what)
        mixed = call(q, k, a * v1 + (1 - a) * v2)
    return (mixed - (a * one + (1 - a) * two)).abs().max().item()


@checker("attention.weighted_sum")
def weighted_sum(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.2: "The output is computed as a weighted sum of the values, where the weight
    assigned to each value is computed by a compatibility function of the query with the
    corresponding key." With the queries and keys fixed, attention is then affine in the values:
    f(q, k, a v1 + (1 - a) v2) = a f(q, k, v1) + (1 - a) f(q, k, v2).

    Measured only through calls the protocol defines with values apart from keys: the attention
    function (Eq. 1's, ``attention``) and, where the adapter offers it, a multi-head module
    called with keys and values apart (``multi_head_cross_attention``). ``multi_head_attention``
    is self-attention only (query = key = value) and is never called otherwise. Outputs that do
    not vary are inconclusive (:mod:`repro.checks.vacuity`). Measured: the worst departure from
    that, over random inputs and every call offered."""
    d_model, heads = claim.params.get("d_model", 64), claim.params.get("heads", 8)
    d_k = d_model // heads
    gen = torch.Generator().manual_seed(ctx.seed)
    calls = {
        "attention": (lambda q, k, v: ctx.target.attention(q, k, v, None), (2, heads, 7, d_k), (2, heads, 9, d_k)),
        "multi_head_cross_attention": (None, (2, 7, d_model), (2, 9, d_model)),
    }
    worst, measured, skipped = 0.0, [], []
    for name, (call, q_shape, kv_shape) in calls.items():
        try:
            if call is None:
                call = ctx.target.multi_head_cross_attention(d_model, heads)
            path_worst = 0.0
            for _ in range(5):
                q, k = torch.randn(*q_shape, generator=gen), torch.randn(*kv_shape, generator=gen)
                v1, v2 = torch.randn(*kv_shape, generator=gen), torch.randn(*kv_shape, generator=gen)
                a = float(torch.rand(1, generator=gen)) * 3 - 1
                path_worst = max(path_worst, _affinity_in_values(call, q, k, v1, v2, a, f"the outputs of {name}"))
        except NotApplicable as why:
            skipped.append(str(why))
            continue
        worst = max(worst, path_worst)
        measured.append(f"{name}: {path_worst:.1e}")
    if not measured:
        raise NotApplicable(f"{ctx.target.name} exposes no call that takes values apart from keys (attention, "
                            f"multi_head_cross_attention): {'; '.join(skipped)}")
    return Measurement(worst, detail="max |f(q, k, a v1 + (1-a) v2) - (a f(q, k, v1) + (1-a) f(q, k, v2))|: "
                                     + ", ".join(measured))


@checker("attention.constant_compute")
def constant_compute(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 3 rows (A) vary h and d_k = d_v = d_model / h "keeping the amount of computation
    constant": FLOPs of multi-head attention at each h, counted by PyTorch's FLOP counter.
    Measured: the largest over the smallest."""
    d_model, n = claim.params.get("d_model", 512), claim.params.get("length", 64)
    x = torch.randn(2, n, d_model)
    counts = {h: _flops(ctx.target.multi_head_attention(d_model, h), x) for h in claim.params.get("heads", [1, 4, 8, 16, 32])}
    if min(counts.values()) == 0:
        return Measurement(float("nan"), False, "the FLOP counter saw no matrix products")
    ratio = max(counts.values()) / min(counts.values())
    return Measurement(ratio, detail=", ".join(f"h={h}: {c:,}" for h, c in counts.items()))
