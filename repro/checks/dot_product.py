"""Section 3.2.1's case for scaled dot-product attention, measured on the implementation's own
attention function:

* "The two most commonly used attention functions are additive attention, and dot-product
  attention ... While the two are similar in theoretical complexity, dot-product attention is
  much faster and more space-efficient in practice, since it can be implemented using highly
  optimized matrix multiplication code": the implementation's attention against additive
  attention (:class:`repro.complexity.additive.AdditiveAttention`) on the same inputs, for the
  largest tensor each forms (space) and their wall time (speed);
* "We suspect that for large values of d_k, the dot products grow large in magnitude, pushing the
  softmax function into regions where it has extremely small gradients. To counteract this
  effect, we scale the dot products by 1/sqrt(d_k)": the Jacobian of the softmax the
  implementation's attention runs, read off that softmax's output (or, where no softmax over the
  keys is seen, as in a fused kernel, off the attention weights, values = the identity), with and
  without the scale.
"""

from __future__ import annotations

import math
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.complexity.additive import AdditiveAttention
from repro.complexity.products import SOFTMAX


class _LargestTensor(TorchDispatchMode):
    """The number of elements of the largest tensor any operation run inside it produced."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _inputs(claim: Claim, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, n, d_k = (int(claim.params.get(k, v)) for k, v in (("batch", 8), ("length", 128), ("d_k", 64)))
    return (torch.randn(batch, 1, n, d_k, generator=gen), torch.randn(batch, 1, n, d_k, generator=gen),
            torch.randn(batch, 1, n, d_k, generator=gen))


@checker("attention.additive_space")
def additive_space(claim: Claim, ctx: CheckContext) -> Measurement:
    """The largest tensor additive attention forms over the largest the implementation's attention
    forms, on the same (batch, n, d_k) inputs. Measured: that ratio (additive attention forms an
    n_q x n_k x d_k sum, dot-product attention an n_q x n_k matrix)."""
    gen = torch.Generator().manual_seed(ctx.seed)
    q, k, v = _inputs(claim, gen)
    additive = AdditiveAttention(q.size(-1), gen)
    sizes = {}
    for name, run in (("dot-product", lambda: ctx.target.attention(q, k, v, None)), ("additive", lambda: additive(q, k, v))):
        with _LargestTensor() as seen, torch.no_grad():
            finite(run(), f"the {name} attention's output")
        sizes[name] = seen.largest
    ratio = sizes["additive"] / max(sizes["dot-product"], 1)
    return Measurement(round(ratio, 2), detail=f"largest tensor formed: additive {sizes['additive']:,} elements, "
                                               f"the implementation's attention {sizes['dot-product']:,} (n = {q.size(-2)}, "
                                               f"d_k = {q.size(-1)})")


@checker("attention.additive_speed")
def additive_speed(claim: Claim, ctx: CheckContext) -> Measurement:
    """Compute time of additive attention over that of the implementation's attention on the same
    inputs: the least of ``repeats`` interleaved timings of each (one warm-up first), each the CPU
    time of this thread (``time.thread_time``) with torch on one thread, so that what other
    processes do on the machine takes none of it (wall time under load is not a verdict). Measured:
    that ratio (a claim about practice on this machine's CPU; the detail gives both times)."""
    gen = torch.Generator().manual_seed(ctx.seed)
    q, k, v = _inputs(claim, gen)
    additive = AdditiveAttention(q.size(-1), gen)
    runs = {"dot-product": lambda: ctx.target.attention(q, k, v, None), "additive": lambda: additive(q, k, v)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # all the work on this thread, whose CPU time is what is read
    try:
        with torch.no_grad():
            for name, run in runs.items():
                finite(run(), f"the {name} attention's output")
            for _ in range(int(claim.params.get("repeats", 7))):
                for name, run in runs.items():
                    start = time.thread_time()
                    run()
                    times[name].append(time.thread_time() - start)
    finally:
        torch.set_num_threads(threads)
    fastest = {name: min(t) for name, t in times.items()}
    ratio = fastest["additive"] / max(fastest["dot-product"], 1e-9)
    return Measurement(round(ratio, 2), detail=f"least CPU time of {len(times['additive'])} (one thread): additive "
                                               f"{1e3 * fastest['additive']:.2f} ms, the implementation's attention "
                                               f"{1e3 * fastest['dot-product']:.2f} ms (medians "
                                               f"{1e3 * statistics.median(times['additive']):.2f} and "
                                               f"{1e3 * statistics.median(times['dot-product']):.2f} ms)")


class _Softmaxes(TorchDispatchMode):
    """The output of every softmax over ``n`` keys run inside it."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.outputs = n, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._overloadpacket in SOFTMAX and out.dim() >= 2 and out.size(-1) == self.n:
            self.outputs.append(out.detach())
        return out


def _jacobian_norms(ctx: CheckContext, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """||d softmax / d scores||_F per query of the softmax the implementation's attention runs: read
    off that softmax's output where one over the keys is seen (an attention that mixes its heads'
    weights after the softmax, as talking heads do, gives weights that are not a softmax's), else
    off the attention weights it gives with the identity as values (its output is then its weights:
    a fused kernel's softmax)."""
    n = k.size(-2)
    eye = torch.eye(n).expand(*k.shape[:-2], n, n)
    with torch.no_grad(), _Softmaxes(n) as seen:
        weights = finite(ctx.target.attention(q, k, eye, None), "the attention weights").double()
    if seen.outputs:
        weights = torch.cat([finite(p, "the softmax's output").double().reshape(-1, n) for p in seen.outputs])
    jacobian = torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]
    return jacobian.flatten(-2).norm(dim=-1)


@checker("attention.saturation")
def saturation(claim: Claim, ctx: CheckContext) -> Measurement:
    """For q, k of unit-variance components and d_k from 16 to 1024: the median norm of the
    softmax's Jacobian in the implementation's attention (scaled by 1/sqrt(d_k) as the model
    runs it) and with the dot products unscaled (q fed as q sqrt(d_k)). Measured: unscaled over
    scaled at the largest d_k (the paper: extremely small); the scaled one must stay within a
    factor ``params.stable`` across d_k, and the unscaled one must fall as d_k grows."""
    gen = torch.Generator().manual_seed(ctx.seed)
    scaled, unscaled, lines = [], [], []
    d_ks = claim.params.get("d_k", [16, 64, 256, 1024])
    for d_k in d_ks:
        q = torch.randn(8, 2, 32, d_k, generator=gen)
        k = torch.randn(8, 2, 32, d_k, generator=gen)
        scaled.append(_jacobian_norms(ctx, q, k).median().item())
        unscaled.append(_jacobian_norms(ctx, q * math.sqrt(d_k), k).median().item())
        lines.append(f"d_k {d_k}: {scaled[-1]:.3g} scaled, {unscaled[-1]:.3g} unscaled")
    ratio = unscaled[-1] / max(scaled[-1], 1e-300)
    stable = max(scaled) / max(min(scaled), 1e-300) <= float(claim.params.get("stable", 1.5))
    falling = all(b < a for a, b in zip(unscaled, unscaled[1:]))
    problems = ([] if stable else ["the scaled softmax's gradient changes with d_k (is the 1/sqrt(d_k) applied?)"]) + (
        [] if falling else ["the unscaled softmax's gradient does not fall as d_k grows"])
    return Measurement(float(f"{ratio:.3g}"), None if not problems else False,
                       "median ||d softmax / d scores||: " + "; ".join(lines) + ("; " + "; ".join(problems) if problems else ""))
