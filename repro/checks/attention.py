"""Checkers for Section 3.2: Eq. 1, footnote 4, multi-head cost, the decoder's causal mask."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from torch.utils._python_dispatch import TorchDispatchMode

from repro.claims.outcome import Absent, CheckContext, Inconclusive, Measurement, NotApplicable
from repro.checks.noise import SYSTEMATIC, NoiseFloor, batch_mate_changed, noise_text
from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.checks.zero_parameters import opened
from repro.claims.claim import Claim
from repro.claims.compare import Worst, finite, max_abs_diff
from repro.complexity.flops import flop_counter
from repro.complexity.products import BATCHED, FUSED_ATTENTION, contracts_positions, record_products


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
    worst = Worst()
    trials = int(claim.params.get("trials", 50))
    for _ in range(trials):
        q, k, v, mask = random_attention_case(gen)
        with torch.no_grad():
            got = ctx.target.attention(q, k, v, mask)
        if got.shape != v.shape[:-2] + (q.shape[-2], v.shape[-1]):
            return Measurement(float("inf"), False, f"output shape {tuple(got.shape)} is wrong")
        worst.add(max_abs_diff(got, reference_attention(q, k, v, mask), "the attention output"))
    return Measurement(worst.value, detail=f"max abs error {worst.value:.2e} over {trials} random cases")


class _ScoreOperands(TorchDispatchMode):
    """Keeps the operands of every attention score product over ``length`` positions run inside
    it: a batched product (B, n, d) @ (B, d, n) with n = ``length`` (``bmm``, or ``baddbmm`` as
    Megatron-LM scales its scores: alpha = 1 / sqrt(d) on the product; or (B, h n, d) @ (B, d, n),
    the heads folded into the query rows as multi-query attention's one key head serves them),
    whatever d (the heads' width is measured, not assumed: Keras' ``key_dim`` may be d_model
    itself), or the query and key of a
    fused attention kernel, its fewer key heads (grouped-query attention, ``enable_gqa``) repeated
    to the query heads they serve; in ``nn.MultiheadAttention``'s fused inference kernel (which
    TorchScript runs whatever ``torch.backends.mha`` says) the projections W^Q and W^K are inside,
    and the queries and keys are formed from its packed weights as the kernel forms them."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length, self.pairs, self.sums_over_positions = length, [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet in BATCHED:
            a, b = (args[1], args[2]) if packet is torch.ops.aten.baddbmm else (args[0], args[1])
            if a.shape[-2] == b.shape[-1] == self.length and a.shape[-1] == b.shape[-2]:
                self.pairs.append((a.detach().double(), b.detach().double().transpose(-1, -2)))
            elif b.shape[-1] == self.length and a.shape[-2] % self.length == 0 and a.shape[-1] == b.shape[-2]:
                # heads folded into the query rows (multi-query attention): (B, h n, d) @ (B, d, n)
                heads = a.shape[-2] // self.length
                q = a.detach().double().unflatten(-2, (heads, self.length)).flatten(0, 1)
                k = b.detach().double().transpose(-1, -2).repeat_interleave(heads, dim=0)
                self.pairs.append((q, k))
            elif a.shape[-1] == b.shape[-2] == self.length:
                self.sums_over_positions += 1
        elif packet in FUSED_ATTENTION:
            q, k = args[0], args[1]
            if k.shape[1] != q.shape[1]:
                k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            self.pairs.append((q.detach().double().flatten(0, 1), k.detach().double().flatten(0, 1)))
        elif packet is torch.ops.aten._native_multi_head_attention and args[0].shape[1] == self.length:
            self.pairs.append(_native_queries_keys(*args[:7]))
        return out


def _native_queries_keys(query, key, value, embed_dim, heads, qkv_weight, qkv_bias) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """The per-head queries and keys (batch x heads, n, d) that ``_native_multi_head_attention``
    forms from its packed (3 x embed_dim, d_model) projection."""
    w_q, w_k = qkv_weight.detach().double()[:embed_dim], qkv_weight.detach().double()[embed_dim:2 * embed_dim]
    b_q, b_k = ((0.0, 0.0) if qkv_bias is None
                else (qkv_bias.detach().double()[:embed_dim], qkv_bias.detach().double()[embed_dim:2 * embed_dim]))

    def heads_of(x: torch.Tensor, w: torch.Tensor, b) -> torch.Tensor:  # noqa: ANN001
        y = x.detach().double() @ w.T + b
        return y.view(y.size(0), y.size(1), heads, embed_dim // heads).transpose(1, 2).flatten(0, 1)

    return heads_of(query, w_q, b_q), heads_of(key, w_k, b_k)


def dot_products(ctx: CheckContext, d_model: int, heads: int, gen: torch.Generator,
                 rows: int = 256, length: int = 24) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The queries and keys the first encoder layer's self-attention of the implementation's model
    (built at d_model, h = ``heads``, at initialisation) forms from unit-variance inputs, and
    their dot products between different positions: (q, k, q.k). The queries' width is the
    width the model's heads have, which a caller compares with d_model / h."""
    parts = ctx.target.model(vocab_size=40, d_model=d_model, n_heads=heads, d_ff=64, n_layers=1)
    attend = (parts.encoder_layers[0].self_attention if parts.encoder_layers
              else (lambda x, m=ctx.target.multi_head_attention(d_model, heads): m(x, x, x)))
    x = torch.randn(rows, length, d_model, generator=gen)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # torch's fused inference kernel hides q and k
    try:
        with _ScoreOperands(length) as seen, torch.no_grad():
            finite(attend(x), "the self-attention's output")
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    if not seen.pairs and seen.sums_over_positions:
        raise Absent(f"{ctx.target.name}'s self-attention forms no q.k scores over the {length} positions: its "
                     f"{seen.sums_over_positions} product(s) over the positions sum them without an n x n score "
                     "matrix (a kernelised attention, phi(K)^T V), so there are no dot products whose variance to measure")
    if not seen.pairs:
        raise NotApplicable(f"{ctx.target.name}: no attention score product over the {length} positions was seen "
                            "in the self-attention's forward pass")
    q, k = seen.pairs[0]
    finite(q, "the queries")
    finite(k, "the keys")
    dots = q @ k.transpose(-1, -2)
    off_diagonal = ~torch.eye(dots.size(-1), dtype=torch.bool)
    return q, k, dots[:, off_diagonal]


@checker("attention.footnote4")
def footnote4(claim: Claim, ctx: CheckContext) -> Measurement:
    """Footnote 4, on the model's own attention inputs: "assume that the components of q and k are
    independent random variables with mean 0 and variance 1. Then their dot product has mean 0 and
    variance d_k". For each d_k (h = d_model / d_k), the model is built at initialisation and its
    first self-attention is fed unit-variance inputs; the queries and keys its projections form are
    read off the score product it runs, and their dot products between different positions
    measured. Value: the worst var(q.k) / (d_k var(q_i) var(k_i)) (1 in the footnote), and
    |mean(q.k)| / sd(q.k) must be near 0; the detail gives the raw var(q.k) / d_k."""
    gen = torch.Generator().manual_seed(ctx.seed)
    d_model = int(claim.params.get("d_model", 512))
    worst, worst_mean, lines = None, 0.0, []
    for d_k in claim.params.get("d_k", [16, 64, 256]):
        q, k, dots = dot_products(ctx, d_model, d_model // d_k, gen)
        law = dots.var().item() / (d_k * q.var().item() * k.var().item())
        if q.shape[-1] != d_k:
            lines.append(f"at h = {d_model // d_k} the heads are {q.shape[-1]} wide, not d_model / h = {d_k}: "
                         f"var(q.k)/({q.shape[-1]} var q var k) {dots.var().item() / (q.shape[-1] * q.var().item() * k.var().item()):.3f}")
        mean = abs(dots.mean().item()) / max(dots.std().item(), 1e-300)
        finite([law, mean], f"var(q.k) at d_k = {d_k}")
        worst = law if worst is None or abs(law - 1) > abs(worst - 1) else worst
        worst_mean = max(worst_mean, mean)
        lines.append(f"d_k {d_k}: var(q.k)/(d_k var q var k) {law:.3f}, raw var(q.k)/d_k {dots.var().item() / d_k:.3f}, "
                     f"|mean|/sd {mean:.3f} ({dots.numel()} products)")
    assert worst is not None
    bound = float(claim.params.get("mean_bound", 0.05))
    return Measurement(round(worst, 4), None if worst_mean <= bound else False,
                       "; ".join(lines) + "; the model's projections at initialisation, unit-variance inputs")


class InvisibleAttention(RuntimeError):
    """The FLOP counter saw no term quadratic in n: the attention products ran in a kernel it
    cannot see into, and a ratio of the projections alone would pass on partial evidence."""


def _flops(module, x: torch.Tensor, outputs: list | None = None) -> int:
    """FLOPs of module(x, x, x): the protocol calls ``multi_head_attention``'s module as
    self-attention, query = key = value. The output is kept in ``outputs`` (to be required finite)."""
    with flop_counter() as counter, torch.no_grad():
        out = module(x, x, x)
    if outputs is not None:
        outputs.append(out)
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
    counts, outputs, modules = {}, [], {}
    for h in (heads, 1):
        module = ctx.target.multi_head_attention(d_model, h)
        counts[h] = (_flops(module, x, outputs), _flops(module, x2, outputs))
        modules[h] = module
    multi, single = counts[heads][0], counts[1][0]
    if single == 0:
        return Measurement(float("nan"), False, "the FLOP counter saw no matrix products")
    finite(outputs, "the multi-head attention's output")  # a count of a module that returns NaN means nothing
    quadratic = {h: (f2 - 2 * f) // 2 for h, (f, f2) in counts.items()}  # = the attention products at n
    linear_in_n = ""
    if min(quadratic.values()) <= 0:
        if not all(contracts_positions(record_products(lambda m=m: m(x2, x2, x2)), 2 * n) for m in modules.values()):
            raise InvisibleAttention(
                f"the FLOP counter saw no term quadratic in n (h={heads}: {quadratic[heads]:,}, h=1: {quadratic[1]:,}): "
                "the attention products ran in a kernel it cannot count, so the cost cannot be compared"
            )
        linear_in_n = ("; no term quadratic in n: the products that mix positions run without an n x n score matrix "
                       "(a kernelised or windowed attention, linear in n, not Eq. 1's), counted as they run")
    detail = (f"{multi:,} vs {single:,} FLOPs at n={n}, d_model={d_model}; of which attention products "
              f"{quadratic[heads]:,} vs {quadratic[1]:,}{linear_in_n}")
    return Measurement(multi / single, detail=detail)


@dataclass
class _Perturbed:
    """One causal-mask perturbation run: its counts, the moves of later positions, its noise floor."""

    past: int
    systematic: int
    blind: int
    pairs: int
    reached: list[torch.Tensor]
    noise: NoiseFloor
    start_unread: bool


def _perturb_targets(parts, src: torch.Tensor, tgt: torch.Tensor, gen: torch.Generator, path: str) -> _Perturbed:  # noqa: ANN001
    """Change the target token at each j (in every sentence) and count, against the model's noise
    floor, the positions i < j that moved (in any sentence) and the (sentence, i > j) pairs that did
    not. A batch of one sentence has no batch mate to change: its floor is the same call again."""
    with torch.no_grad():
        base = parts.forward(src, tgt)
        require_informative(base, f"the logits ({path})")
        what = f"the logits of path {path}"
        probes = {"the same call again": max_abs_diff(parts.forward(src, tgt), base, what)}
        if src.size(0) > 1:
            probes["the other sentence changed"] = max(
                max_abs_diff(parts.forward(src, batch_mate_changed(tgt, 1 - row, 4, 40, gen))[row], base[row], what)
                for row in (0, 1))
        noise = NoiseFloor(probes)
        run = _Perturbed(0, 0, 0, 0, [], noise, False)
        for j in range(tgt.size(1)):
            perturbed = tgt.clone()
            perturbed[:, j] = 4 + (perturbed[:, j] - 4 + 7) % 36
            out = parts.forward(src, perturbed)
            moved = noise.moved(out, base, 2, what)
            if j == 0 and not moved.any():
                # position 0 holds the start token, no output: a decoder that starts from a fixed
                # vector (tensor2tensor's shift_right) reads it nowhere, its own output included
                run.start_unread = True
                continue
            run.past += int(moved.any(0)[:j].sum())             # positions i < j that moved in any sentence
            run.systematic += int(noise.systematic(out, base, 2).any(0)[:j].sum())
            run.blind += int((~moved[:, j + 1:]).sum())          # (sentence, i > j) where i did not move
            run.pairs += moved[:, j + 1:].numel()
            run.reached.append((out - base)[:, j + 1:].abs().amax(-1).flatten())
    return run


def _drowned(run: _Perturbed) -> float | None:
    """The median move of a later position where the noise is as large as it (a leak cannot be
    told from it), else None."""
    typical = torch.cat(run.reached).double().median().item()
    return typical if run.noise.floor > 0 and typical <= run.noise.threshold else None


@checker("attention.causal_mask")
@opened
def causal_mask(claim: Claim, ctx: CheckContext) -> Measurement:
    """Sections 3.1 and 3.2.3, both halves, on every attention path the model runs: the decoder's
    output at i depends only on target positions j <= i ("no leftward information flow"), and
    each position attends to all positions up to and including itself.

    Perturbation test: change the target token at j and watch the logits of every position.
    (1) No leak: the logits at every i < j must not move. (2) Every earlier position reaches:
    the logits at every i > j must move. The pair i = j proves nothing (the token reaches its own
    output through the residual connection, whatever the mask) and is left out; so is j = 0 where
    the start token reaches no output at all, its own included (a decoder that starts from a fixed
    vector, as tensor2tensor's ``shift_right_3d``: position 0 holds no output to depend on). "Move" is judged
    against the model's own noise floor (:mod:`repro.checks.noise`: the same call again, the
    other sentence of the batch changed), never an absolute constant: a correct model on the CPU
    repeats itself exactly, so any move of the past is a leak, however small. Where the sentences
    of a batch reach each other (an expert capacity shared by the batch, as mixture-of-experts
    layers have: a batch-mate's change moves a sentence) and that drowns the moves, each sentence
    is perturbed alone, in a batch of its own: leftward flow is a matter of one sentence, the
    coupling of sentences ``impl.padding-invariance``'s. Measured: the number of leaking (i < j)
    pairs (a leak in any sentence of the batch) plus blind (i > j) pairs (in each sentence);
    inconclusive where the noise is as large as the moves the test must see."""
    gen = torch.Generator().manual_seed(ctx.seed)
    leaks, blind, pairs, paths, floors, start_unread, alone = 0, 0, 0, [], [], [], []
    for path, parts in ctx.target.model_paths(vocab_size=40, d_model=32, n_heads=4, d_ff=64, n_layers=2).items():
        src = torch.randint(4, 40, (2, 7), generator=gen)
        tgt = torch.randint(4, 40, (2, 9), generator=gen)
        runs = [_perturb_targets(parts, src, tgt, gen, path)]
        if _drowned(runs[0]) is not None and runs[0].noise.probes["the same call again"] == 0:
            coupled = runs[0].noise.probes["the other sentence changed"]
            runs = [_perturb_targets(parts, src[r:r + 1], tgt[r:r + 1], gen, path) for r in range(src.size(0))]
            alone.append(f"{path} (a batch-mate's change moved a sentence by {coupled:.1e})")
        for run in runs:
            typical = _drowned(run)
            if typical is not None:
                raise Inconclusive(f"path {path}: the model's noise is as large as the moves the test must see (median "
                                   f"move of a later position {typical:.1e}; {run.noise.text()}): a leak cannot be told "
                                   "from it")
            earlier = tgt.size(1) * (tgt.size(1) - 1) // 2
            leaks += run.systematic if run.noise.floor > 0 and run.systematic > SYSTEMATIC * earlier else run.past
            blind, pairs = blind + run.blind, pairs + run.pairs
            if run.start_unread and path not in start_unread:
                start_unread.append(path)
        paths.append(path)
        floors.append(runs[-1].noise)
    detail = (f"{leaks} leaking (i < j) pairs; {blind} of {pairs} (i > j) pairs where changing target j leaves "
              f"output i unchanged (attention paths: {', '.join(paths)}); {noise_text(dict(zip(paths, floors)))}")
    if alone:
        detail += f"; each sentence perturbed alone, the batch couples its sentences: {', '.join(alone)}"
    if start_unread:
        detail += (f"; the start token (j = 0) reaches no output, its own included, on {', '.join(start_unread)}: "
                   "the decoder starts from a fixed vector, not the token's embedding (its pairs are not counted)")
    return Measurement(leaks + blind, detail=detail)


@checker("attention.eq1_paths")
def eq1_paths(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 1 on every attention function the model can run (a reference path and a fused kernel,
    say), with padding masks and the decoder's causal mask: the worst error over all of them."""
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, details = Worst(), []
    for path, fn in ctx.target.attention_paths().items():
        path_worst = Worst()
        for trial in range(int(claim.params.get("trials", 30))):
            q, k, v, mask = random_attention_case(gen)
            if trial % 2:  # the decoder's self-attention: square, causal
                k, v = q.clone(), torch.randn(*q.shape[:-1], v.size(-1), generator=gen)
                mask = torch.ones(q.size(-2), q.size(-2), dtype=torch.bool).tril()[None, None]
            with torch.no_grad():
                got = fn(q, k, v, mask)
            path_worst.add(max_abs_diff(got, reference_attention(q, k, v, mask), f"path {path}"))
        worst.add(path_worst.value, path)
        details.append(f"{path}: {path_worst.value:.1e}")
    return Measurement(worst.value, detail="max abs error per path: " + ", ".join(details))


def _affinity_in_values(call, q: torch.Tensor, k: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor, a: float,
                        what: str) -> float:
    """max |f(q, k, a v1 + (1 - a) v2) - (a f(q, k, v1) + (1 - a) f(q, k, v2))| for one call."""
    with torch.no_grad():
        one, two = call(q, k, v1), call(q, k, v2)
        require_informative(one, what)
        mixed = call(q, k, a * v1 + (1 - a) * v2)
    return max_abs_diff(mixed, a * one + (1 - a) * two, f"{what} at a mix of two values")


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
    worst, measured, skipped = Worst(), [], []
    for name, (call, q_shape, kv_shape) in calls.items():
        try:
            if call is None:
                call = ctx.target.multi_head_cross_attention(d_model, heads)
            path_worst = Worst()
            for _ in range(5):
                q, k = torch.randn(*q_shape, generator=gen), torch.randn(*kv_shape, generator=gen)
                v1, v2 = torch.randn(*kv_shape, generator=gen), torch.randn(*kv_shape, generator=gen)
                a = float(torch.rand(1, generator=gen)) * 3 - 1
                path_worst.add(_affinity_in_values(call, q, k, v1, v2, a, f"the outputs of {name}"))
        except NotApplicable as why:
            skipped.append(str(why))
            continue
        worst.add(path_worst.value, name)
        measured.append(f"{name}: {path_worst.value:.1e}")
    if not measured:
        raise NotApplicable(f"{ctx.target.name} exposes no call that takes values apart from keys (attention, "
                            f"multi_head_cross_attention): {'; '.join(skipped)}")
    return Measurement(worst.value, detail="max |f(q, k, a v1 + (1-a) v2) - (a f(q, k, v1) + (1-a) f(q, k, v2))|: "
                                     + ", ".join(measured))


@checker("attention.constant_compute")
def constant_compute(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 3 rows (A) vary h and d_k = d_v = d_model / h "keeping the amount of computation
    constant": FLOPs of multi-head attention at each h, counted by PyTorch's FLOP counter.
    Measured: the largest over the smallest."""
    d_model, n = claim.params.get("d_model", 512), claim.params.get("length", 64)
    x = torch.randn(2, n, d_model)
    outputs: list[torch.Tensor] = []
    counts = {h: _flops(ctx.target.multi_head_attention(d_model, h), x, outputs)
              for h in claim.params.get("heads", [1, 4, 8, 16, 32])}
    finite(outputs, "the multi-head attention's output")
    if min(counts.values()) == 0:
        return Measurement(float("nan"), False, "the FLOP counter saw no matrix products")
    ratio = max(counts.values()) / min(counts.values())
    return Measurement(ratio, detail=", ".join(f"h={h}: {c:,}" for h, c in counts.items()))
