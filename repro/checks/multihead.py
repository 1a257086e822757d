"""Checker for Section 3.2.2's composition of the heads: MultiHead(Q, K, V) = Concat(head_1, ...,
head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

Every projection acts on each position alone and Eq. 1 mixes positions only through the weights of
the keys, so the whole module keeps positions where they are, whatever its weights: permuting the
queries permutes the outputs, and permuting the keys and values together changes nothing. A head
split or merge that reshapes (batch, n, h, d) as (batch, h, n, d), a transpose left out, or any
other exchange of the position axis with the head axis, moves outputs to other positions and
breaks this. Measured through the protocol's calls alone, so it holds for any implementation.
"""

from __future__ import annotations

import torch

from repro.checks.invariants import LAYER_LENGTHS
from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.claims.compare import Worst, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement, NotApplicable


def _moved(call, q: torch.Tensor, kv: torch.Tensor | None, gen: torch.Generator, what: str) -> dict[str, float]:
    """The departures of one call from keeping positions in place: self-attention (``kv`` None)
    against f(P x) = P f(x); cross-attention against f(P q, k, v) = P f(q, k, v) and
    f(q, R k, R v) = f(q, k, v)."""
    perm = torch.randperm(q.size(1), generator=gen)
    with torch.no_grad():
        if kv is None:
            base = call(q, q, q)
            require_informative(base, what)
            return {"queries permuted": max_abs_diff(call(q[:, perm], q[:, perm], q[:, perm]), base[:, perm], what)}
        base = call(q, kv, kv)
        require_informative(base, what)
        rows = torch.randperm(kv.size(1), generator=gen)
        return {"queries permuted": max_abs_diff(call(q[:, perm], kv, kv), base[:, perm], what),
                "keys and values permuted": max_abs_diff(call(q, kv[:, rows], kv[:, rows]), base, what)}


@checker("attention.multihead_positions")
def multihead_positions(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.2.2: the heads are "attended in parallel, concatenated and projected", each on the
    same positions. On the implementation's multi-head module (``multi_head_attention``, called as
    self-attention, and ``multi_head_cross_attention`` where offered), for each number of heads in
    params.heads: the worst |f(P x) - P f(x)| over a random permutation P of the query positions,
    and for cross-attention also |f(q, R k, R v) - f(q, k, v)|; self-attention also on one sequence
    of :data:`~repro.checks.invariants.LAYER_LENGTHS`' longest length (a sliding-window attention keeps
    positions on a sentence inside its window, not beyond). Outputs that do not vary are
    inconclusive. Measured: the worst departure."""
    d_model = int(claim.params.get("d_model", 64))
    gen, long_gen = torch.Generator().manual_seed(ctx.seed), torch.Generator().manual_seed(ctx.seed + 1)
    worst, seen, skipped, n_long = Worst(), [], [], LAYER_LENGTHS[-1]
    for heads in claim.params.get("heads", [1, 8]):
        calls = {"multi_head_attention": (ctx.target.multi_head_attention, False),
                 "multi_head_cross_attention": (ctx.target.multi_head_cross_attention, True)}
        for name, (build, cross) in calls.items():
            try:
                call = build(d_model, heads)
            except NotApplicable as why:
                skipped.append(str(why))
                continue
            q = torch.randn(2, 7, d_model, generator=gen) * 2
            kv = torch.randn(2, 9, d_model, generator=gen) * 2 if cross else None
            for how, err in _moved(call, q, kv, gen, f"the outputs of {name} (h={heads})").items():
                worst.add(err, f"{name}, h={heads}, {how}")
                seen.append(f"{name} h={heads} {how}: {err:.1e}")
            if not cross:
                x = torch.randn(1, n_long, d_model, generator=long_gen) * 2
                what = f"the outputs of {name} (h={heads}, n={n_long})"
                for how, err in _moved(call, x, None, long_gen, what).items():
                    worst.add(err, f"{name}, h={heads}, n={n_long}, {how}")
                    seen.append(f"{name} h={heads} n={n_long} {how}: {err:.1e}")
    if not seen:
        raise NotApplicable(f"{ctx.target.name} exposes no multi-head attention module: {'; '.join(skipped)}")
    return Measurement(worst.value, detail=f"worst {worst.value:.1e} ({worst.where}); " + ", ".join(seen))
