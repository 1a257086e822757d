"""Checkers for Sections 3.1, 3.3, 3.4: post-norm sub-layers, Eq. 2, embeddings, base dimensions."""

from __future__ import annotations

import math

import torch

from repro.checks.census import TRACE_VOCAB, buildable, forward_dimensions, job_dimensions
from repro.checks.jobs import job_config, own, watches_jobs
from repro.checks.norm_parameters import norm_parameters
from repro.checks.registry import checker
from repro.checks.stack_embedding import received_factor
from repro.checks.vacuity import require_informative
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs_diff
from repro.claims.outcome import Absent, CheckContext, Measurement, NotApplicable


@checker("layers.feed_forward")
def feed_forward(claim: Claim, ctx: CheckContext) -> Measurement:
    """Eq. 2 applied at each position: max |FFN(x) - (max(0, x W1 + b1) W2 + b2)|.

    A bias the adapter declares absent (``None`` in FeedForwardParts, e.g. T5's) is a departure
    from Eq. 2: the rest of the equation is still measured and reported, and the claim fails.
    A bias that is all zeros (as many libraries initialise them) is given random values for the
    measurement (and restored), so that a layer that ignores it cannot pass."""
    d_model, d_ff = claim.params.get("d_model", 64), claim.params.get("d_ff", 256)
    parts = ctx.target.feed_forward(d_model, d_ff)
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(3, 11, d_model, generator=gen)
    biases = {"b_1": parts.b_1, "b_2": parts.b_2}
    saved = [(b, b.detach().clone()) for b in biases.values() if b is not None and not b.detach().any()]
    try:
        with torch.no_grad():
            before = parts.module(x).double() if saved else None
            for b, _ in saved:
                b.copy_(torch.randn(b.shape, generator=gen, dtype=b.dtype))
            got = parts.module(x).double()
            w_1, w_2 = parts.w_1.detach().cpu().double(), parts.w_2.detach().cpu().double()
            b_1, b_2 = (b.detach().cpu().double() if b is not None else 0.0 for b in biases.values())
            want = torch.clamp(x.double() @ w_1 + b_1, min=0) @ w_2 + b_2
    finally:
        with torch.no_grad():
            for b, value in saved:
                b.copy_(value)
    err = max_abs_diff(got, want, "FFN(x)")
    missing = [name for name, b in biases.items() if b is None]
    perturbed = f"; zero biases given random values for the check ({len(saved)})" if saved else ""
    if before is not None and torch.equal(before, got):
        perturbed += ("; the layer's output did not move when they changed: they are not biases the layer adds "
                      "(give the layer's own bias tensors, or None for a bias it does not have)")
    if missing:
        return Measurement(err, False, f"absent: {', '.join(missing)} (no bias in the layer); max abs error of "
                                       f"Eq. 2 without {'them' if len(missing) > 1 else 'it'} {err:.2e}{perturbed}")
    return Measurement(err, detail=f"max abs error {err:.2e}{perturbed}")


def layer_norms(norms: tuple, what: str) -> tuple:
    """A layer's norms as its parts give them; none (``norms=()``, as ReZero's layers have) is a
    layer without normalisation, a departure from Section 3.1 (absent), not a broken adapter."""
    if not norms:
        raise Absent(f"{what} has no layer normalisation (its parts give norms=()): Section 3.1 normalises the "
                     "output of each sub-layer, LayerNorm(x + Sublayer(x))")
    return tuple(norms)


def perturb_norms(norms: tuple, d_model: int, gen: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Give each norm's parameters (a LayerNorm's gain and bias, a module's or those a norm function
    applies: :func:`~repro.checks.norm_parameters.norm_parameters`) random values of their own, in
    place; returns (parameter, saved value) to restore. At their initial values (1 and 0) two
    LayerNorms compute the same function, and swapping them could not be seen."""
    saved, seen = [], set()
    for norm in norms:
        for p in norm_parameters(norm, d_model):
            if id(p) in seen:
                continue
            seen.add(id(p))
            saved.append((p, p.detach().clone()))
            with torch.no_grad():
                p.add_((torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5).to(p.device))
    return saved


@checker("layers.post_norm")
def post_norm(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: each sub-layer's output is LayerNorm(x + Sublayer(x)).

    The layer's own sub-layer functions and norms are composed as the paper writes them and
    compared with the layer's output; a pre-norm layer (x + Sublayer(LayerNorm(x))), one
    that normalises before the residual sum, or one whose norms are applied in the other order
    does not match. The two norms' weights and biases are set to distinct random values first,
    so that the order of the norms shows; norms whose parameters cannot be found (neither modules
    nor functions over parameters they hold) cannot be perturbed, and when they then compute the
    same function the order cannot be checked (not applicable)."""
    d_model = claim.params.get("d_model", 64)
    parts = ctx.target.encoder_layer(d_model, claim.params.get("heads", 4), 128)
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(2, 9, d_model, generator=gen) * 2 + 0.5
    norm_1, norm_2 = layer_norms(parts.norms, "the encoder layer")
    saved = perturb_norms((norm_1, norm_2), d_model, gen)
    try:
        with torch.no_grad():
            h = norm_1(x + parts.self_attention(x))
            want = norm_2(h + parts.feed_forward(h))
            got = parts.layer(x)
            require_informative(got, "the layer's outputs")
            same_norms = max_abs_diff(norm_1(x), norm_2(x), "the norms' outputs") < 1e-6
    finally:
        with torch.no_grad():
            for p, value in saved:
                p.copy_(value)
    err = max_abs_diff(got, want, "the encoder layer's output")
    if same_norms:
        raise NotApplicable(
            f"{ctx.target.name}: the two norms of EncoderLayerParts compute the same function and hold no "
            "parameters the check could find and perturb, so their order cannot be checked"
        )
    perturbed = f"; norm weights and biases perturbed ({len(saved)} tensors)" if saved else ""
    return Measurement(err, detail=f"max |layer(x) - LN(h + FFN(h))|, h = LN(x + SelfAttn(x)): {err:.2e}{perturbed}")


@checker("embedding.scale")
def embedding_scale(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.4: the factor between the embedding the encoder receives and the weight's rows;
    the paper's is sqrt(d_model). Measured on what the encoder's first layer receives where the
    model exposes it (:mod:`repro.checks.stack_embedding`: a scale applied in the stack, as
    Pegasus does, is read there whatever ``embed_source`` gives), else, and where that input is no
    multiple of the rows (a norm on the sum with the positions), on ``ModelParts.embed_source``."""
    d_model = claim.params.get("d_model", 64)
    parts = ctx.target.model(vocab_size=50, d_model=d_model, n_heads=4, d_ff=128, n_layers=1)
    if parts.embed_source is None or parts.source_embedding is None:
        raise NotApplicable(f"{ctx.target.name} exposes no source embedding (ModelParts.embed_source)")
    tokens = torch.arange(1, 50)
    with torch.no_grad():
        emb = finite(parts.embed_source(tokens[None])[0].double(), "the embedding")
        raw = finite(parts.source_embedding.detach().cpu()[tokens].double(), "the embedding matrix")
    factor = finite(((emb * raw).sum() / (raw * raw).sum()).item(), "embedding / weight")
    residual = max_abs_diff(emb, factor * raw, "the embedding")
    detail = f"embedding = {factor:.4f} x weight (residual {residual:.1e}); sqrt(d_model) = {math.sqrt(d_model):.4f}"
    gen = torch.Generator().manual_seed(ctx.seed)
    stack = received_factor(parts, "encoder", torch.randint(4, 50, (2, 7), generator=gen), gen)
    if stack is not None and stack.factor is not None:
        if abs(stack.factor - factor) > 1e-4 * max(1.0, abs(factor)):
            detail = (f"{stack.seen}; sqrt(d_model) = {math.sqrt(d_model):.4f}; ModelParts.embed_source gives "
                      f"{factor:.4f} x weight: not what the stack receives (it scales in the stack)")
        else:
            detail += f"; {stack.seen}"
        return Measurement(stack.factor, detail=detail)
    if stack is not None:
        detail += f"; read from ModelParts.embed_source: {stack.seen}"
    # Not a multiple of the weight at all: fail whatever the factor.
    return Measurement(factor, False if residual >= 1e-5 else None, detail)


@checker("embedding.shared")
def embedding_shared(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.4: one weight matrix for both embeddings and the pre-softmax projection."""
    parts = ctx.target.model(vocab_size=50, d_model=32, n_heads=4, d_ff=64, n_layers=1)
    tensors = {
        "source embedding": parts.source_embedding,
        "target embedding": parts.target_embedding,
        "output projection": parts.output_projection,
    }
    missing = [k for k, t in tensors.items() if t is None]
    if missing:  # as for every claim: a part the adapter does not expose makes the claim not applicable
        raise NotApplicable(
            f"{ctx.target.name} exposes no {', '.join(missing)} (ModelParts.source_embedding, "
            "target_embedding, output_projection)"
        )
    ptrs = {k: t.data_ptr() for k, t in tensors.items()}
    shared = len(set(ptrs.values())) == 1 and len({tuple(t.shape) for t in tensors.values()}) == 1
    groups = "one matrix" if shared else f"{len(set(ptrs.values()))} distinct matrices"
    return Measurement(shared, detail=f"{groups} among {', '.join(tensors)}")


@checker("model.base_dimensions")
def base_dimensions(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3: the base model's dimensions, read off the matrix products of one forward pass
    (:mod:`repro.checks.census`): for repro, of the model the base job's training loop builds
    (params.experiment, :func:`repro.checks.census.job_dimensions`); for another implementation,
    of the model its adapter builds at the base sizes."""
    if watches_jobs(ctx, "model"):
        experiment = claim.params.get("experiment", "table2-base-ende")
        measured, seen = job_dimensions(job_config(experiment, claim.params.get("job")))
        return Measurement(measured, detail=f"job {claim.params.get('job') or experiment}: "
                                            + ", ".join(f"{k}={v}" for k, v in measured.items()) + f"; {seen}")
    base = buildable("base")
    parts = ctx.target.model(TRACE_VOCAB, base.d_model, base.n_heads, base.d_ff, base.n_layers)
    measured, seen = forward_dimensions(parts)
    return Measurement(measured, detail=", ".join(f"{k}={v}" for k, v in measured.items()) + f"; {seen}")


@checker("run.job_dimensions")
def job_model_dimensions(claim: Claim, ctx: CheckContext) -> Measurement:
    """The dimensions of the model a paper job's training loop builds (params.experiment, .job),
    read off one forward pass of it (:func:`repro.checks.census.job_dimensions`): N, d_model,
    d_ff, h, d_k, d_v as the model runs them, whatever its configuration says."""
    own(ctx)
    experiment, job = claim.params["experiment"], claim.params.get("job")
    measured, seen = job_dimensions(job_config(experiment, job))
    return Measurement(measured, detail=f"job {job or experiment}: " + ", ".join(f"{k}={v}" for k, v in measured.items())
                                        + f"; {seen}")


#: Positions of the repeated-vector probe of ``sec3.eq2.position-wise``: more than an expert capacity of 64 tokens.
REPEATED = 80


@checker("layers.position_wise")
def position_wise(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.3: the FFN "is applied to each position separately and identically": permuting
    the positions permutes the outputs, each position alone gives its output in the sequence, and
    one vector repeated at every position of a long sequence gives, at each, its output alone
    (identically: a layer that routes positions to experts of a limited capacity, as mixture-of-
    experts layers do, drops the positions past it, which random positions spread over the experts
    never reach). Measured: the worst difference of the three."""
    d_model, d_ff = claim.params.get("d_model", 64), claim.params.get("d_ff", 256)
    parts = ctx.target.feed_forward(d_model, d_ff)
    gen = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(2, 9, d_model, generator=gen)
    perm = torch.randperm(9, generator=gen)
    with torch.no_grad():
        out = parts.module(x)
        require_informative(out, "the feed-forward layer's outputs")
        permuted = max_abs_diff(parts.module(x[:, perm]), out[:, perm], "FFN of the permuted positions")
        alone = max(max_abs_diff(parts.module(x[:, i : i + 1])[:, 0], out[:, i], f"FFN of position {i} alone")
                    for i in range(9))
        one = x[:, :1]
        repeated = max_abs_diff(parts.module(one.expand(-1, REPEATED, -1).contiguous()),
                                parts.module(one).expand(-1, REPEATED, -1), "FFN of one vector at every position")
    return Measurement(max(permuted, alone, repeated), detail=f"permuted {permuted:.1e}, one position at a time "
                       f"{alone:.1e}, one vector at each of {REPEATED} positions {repeated:.1e}")


def _layer_norm_fit(norm, params: list[torch.Tensor], d_model: int,
                    gen: torch.Generator) -> tuple[float, str | None, str | None]:
    """(worst residual of out = a z + c per feature, what departs from LayerNorm's parameters, what
    is worth saying though it holds) for one norm whose parameters (``params``, all it applies) have
    been set to random values."""
    params = [p for p in params if p.requires_grad]
    if not params:
        return 0.0, "it has no learned gain and bias", None
    x = torch.randn(256, d_model, generator=gen) * (torch.rand(256, 1, generator=gen) * 3 + 0.2) \
        + torch.randn(256, 1, generator=gen) * 2
    with torch.no_grad():
        out = finite(norm(x[None])[0], "the norm's output").double()
    x = x.double()
    eps, residual, coef = _fitted_epsilon(x, out)
    gain, bias = coef[:, 0], coef[:, 1]
    flat = [p.detach().cpu().double().flatten() for p in params]
    match = lambda v: [i for i, p in enumerate(flat) if p.numel() == d_model and float((p - v).abs().max()) < 1e-4]
    gains, biases = match(gain), match(bias)
    note = None
    bessel = math.sqrt((d_model - 1) / d_model)
    if not gains and match(gain / bessel):
        # x.std()'s default, Bessel's correction (The Annotated Transformer's LayerNorm): the same
        # standardisation up to one constant on every feature, which the learned gain carries
        gains = match(gain / bessel)
        note = (f"standardised by the unbiased std (Bessel's correction, as torch.std's default): the gain found is "
                f"sqrt((d-1)/d) = {bessel:.4f} x the norm's own")
    if not gains or not biases or (gains == biases and len(gains) == 1):
        return residual, (f"its {len(params)} parameter tensor(s) are not a gain and a bias per feature "
                          f"({'a gain' if gains else 'no gain'}, {'a bias' if biases else 'no bias'} found)"), None
    if eps > MAX_EPSILON:
        return residual, (f"it divides by sqrt(var + {eps:.2g}): an epsilon that large does not standardise the "
                          f"features (variances from {float(x.var(-1, unbiased=False).min()):.2g})"), None
    if eps >= 1e-4:
        note = "; ".join(filter(None, [note, f"epsilon {eps:.2g} inside the square root (not stated by the paper)"]))
    return residual, None, note


#: The largest epsilon in sqrt(var + eps) still read as a standardisation: Keras' default is 1e-3,
#: torch's 1e-5; the checks' rows have variances from 0.04 up.
MAX_EPSILON = 1e-2


def _fitted_epsilon(x: torch.Tensor, out: torch.Tensor) -> tuple[float, float, torch.Tensor]:
    """(eps, worst residual, per-feature (a, c)) of the best fit out = a (x - mean) / sqrt(var + eps) + c.
    The epsilon is not stated by the paper and runs from none to Keras' 1e-3; where the rows'
    variances are small the fit hinges on it, so it is estimated: with (a, c) fitted, each row's
    own scale s = 1 / sqrt(var + eps) is read by least squares, and 1 / s^2 is linear in var with
    intercept / slope = eps (four rounds from eps = 0). The usual values (1e-5, 1e-6, 1e-12) are
    tried too, and the best fit kept."""
    centred, var = x - x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)

    def fit(eps: float) -> tuple[float, torch.Tensor]:
        z = centred / torch.sqrt(var + eps)
        design = torch.stack([z, torch.ones_like(z)], dim=-1).transpose(0, 1)  # (d, rows, 2)
        coef = torch.linalg.lstsq(design, out.T[..., None]).solution[..., 0]  # (d, 2)
        return float((design @ coef[..., None])[..., 0].sub(out.T).abs().max()), coef

    eps, candidates = 0.0, [1e-5, 1e-6, 1e-12]
    for _ in range(4):
        coef = fit(eps)[1]
        shape = coef[:, 0] * centred  # a (x - mean), per row
        scale = ((out - coef[:, 1]) * shape).sum(-1) / (shape * shape).sum(-1).clamp_min(1e-300)
        design = torch.stack([var[:, 0], torch.ones_like(var[:, 0])], dim=-1)
        slope, intercept = torch.linalg.lstsq(design, (1 / scale.square())[:, None]).solution[:, 0].tolist()
        if not (slope > 0 and math.isfinite(intercept)):
            break
        eps = max(intercept / slope, 0.0)
        candidates.append(eps)
    fits = [(eps, *fit(eps)) for eps in candidates]
    return min(fits, key=lambda f: f[1])


@checker("layers.layer_norm")
def layer_norm(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1, "followed by layer normalization [1]": every norm of an encoder and a decoder
    layer is Ba et al.'s LayerNorm: each position's d_model features standardised, (x - mean) /
    sqrt(var + eps), then scaled and shifted by a learned gain and bias per feature. The norms'
    parameters are set to random values (restored afterwards); per feature, the output is fitted
    as a z + c on the standardised input z; a and c must be the norm's own gain and bias.
    Measured: the worst residual of the fit; a norm without a learned gain and bias fails."""
    d_model = claim.params.get("d_model", 64)
    enc = ctx.target.encoder_layer(d_model, claim.params.get("heads", 4), 128)
    dec = ctx.target.decoder_layer(d_model, claim.params.get("heads", 4), 128)
    norms = [*layer_norms(enc.norms, "the encoder layer"), *layer_norms(dec.norms, "the decoder layer")]
    params = [norm_parameters(n, d_model) for n in norms]
    if not all(isinstance(n, torch.nn.Module) or p for n, p in zip(norms, params)):
        raise NotApplicable(f"{ctx.target.name}: the layer norms are neither torch modules nor functions over "
                            "parameters the check can find and set")
    gen = torch.Generator().manual_seed(ctx.seed)
    saved = perturb_norms(tuple(norms), d_model, gen)
    worst, problems, notes = 0.0, [], set()
    try:
        for i, norm in enumerate(norms):
            residual, problem, note = _layer_norm_fit(norm, params[i], d_model, gen)
            worst = max(worst, residual)
            if problem:
                problems.append(f"norm {i + 1} of {len(norms)}: {problem}")
            if note:
                notes.add(note)
    finally:
        with torch.no_grad():
            for p, value in saved:
                p.copy_(value)
    detail = (f"{len(norms)} norms (2 encoder, 3 decoder): worst residual of a z + c per feature {worst:.1e}"
              + ("; " + "; ".join(problems) if problems else "; a and c are each norm's own gain and bias")
              + "".join(f"; {note}" for note in sorted(notes)))
    return Measurement(worst, False if problems else None, detail)
