"""Checkers for Section 3.1's stacks: the decoder layer, the encoder-decoder attention, how the
layers chain, and the width of everything that flows between them.

Each composes the implementation's own parts as the paper writes them and compares the result
with what the implementation computes whole, so that a part used in the wrong place (a decoder
attending to the embeddings instead of the encoder output, a norm before the residual sum, an
extra norm at the top of a stack) shows as a difference.
"""

from __future__ import annotations

import torch

from repro.checks.layers import layer_norms, perturb_norms
from repro.checks.noise import NoiseFloor, noise_text
from repro.checks.registry import checker
from repro.checks.vacuity import require_informative
from repro.checks.zero_parameters import opened
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement, NotApplicable
from repro.claims.seeding import claim_seed, seeded

D_MODEL, HEADS, D_FF = 32, 4, 64


def _x(gen: torch.Generator, n: int, d: int = D_MODEL) -> torch.Tensor:
    return torch.randn(2, n, d, generator=gen) * 2 + 0.5


@checker("layers.post_norm_decoder")
def post_norm_decoder(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: every decoder sub-layer's output is LayerNorm(x + Sublayer(x)):
    layer(x, z) = LN3(h2 + FFN(h2)), h2 = LN2(h1 + EncDecAttn(h1, z)), h1 = LN1(x + SelfAttn(x)).
    The norms' parameters are given random values first (restored after), as for the encoder layer
    (:func:`~repro.checks.layers.perturb_norms`), so that their order shows."""
    parts = ctx.target.decoder_layer(D_MODEL, HEADS, D_FF)
    gen = torch.Generator().manual_seed(ctx.seed)
    x, z = _x(gen, 9), _x(gen, 6)
    n1, n2, n3 = layer_norms(parts.norms, "the decoder layer")
    saved = perturb_norms(parts.norms, D_MODEL, torch.Generator().manual_seed(1234))
    try:
        with torch.no_grad():
            h1 = n1(x + parts.self_attention(x))
            h2 = n2(h1 + parts.cross_attention(h1, z))
            want = n3(h2 + parts.feed_forward(h2))
            got = parts.layer(x, z)
            require_informative(got, "the decoder layer's outputs")
    finally:
        with torch.no_grad():
            for param, value in saved:
                param.copy_(value)
    err = max_abs_diff(got, want, "the decoder layer's output")
    return Measurement(err, detail=f"max |layer(x, z) - the paper's composition of its parts|: {err:.2e}")


@checker("layers.encoder_decoder_attention")
@opened
def encoder_decoder_attention(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.2.3: in the encoder-decoder attention "the queries come from the previous decoder
    layer, and the memory keys and values come from the output of the encoder".

    Measured on the decoder layer's cross-attention: (a) its output at position i moves with the
    query row i only; (b) permuting the memory rows leaves it unchanged, as it must when keys and
    values both come from the memory; (c) changing the memory moves it; and (d) the whole layer's
    output moves with the memory. Reported: the number of these four properties violated."""
    parts = ctx.target.decoder_layer(D_MODEL, HEADS, D_FF)
    gen = torch.Generator().manual_seed(ctx.seed)
    x, z = _x(gen, 7), _x(gen, 5)
    failed = []
    with torch.no_grad():
        base = parts.cross_attention(x, z)
        mate = x.clone()
        mate[1] += 1.0
        noise = NoiseFloor({"the same call again": max_abs_diff(parts.cross_attention(x, z), base, "the cross-attention"),
                            "the other sentence changed": max_abs_diff(parts.cross_attention(mate, z)[0], base[0],
                                                                       "the cross-attention")})
        moved = x.clone()
        moved[:, 3] += 1.0
        out = parts.cross_attention(moved, z)
        rows = noise.moved(out, base, (0, 2), "the cross-attention")
        if not rows[3] or torch.cat([rows[:3], rows[4:]]).any():
            failed.append("(a) output i does not follow query row i alone")
        perm = torch.randperm(z.size(1), generator=gen)
        if max_abs_diff(parts.cross_attention(x, z[:, perm]), base, "the cross-attention") > 1e-5:
            failed.append("(b) not invariant to the order of the memory rows")
        if max_abs_diff(parts.cross_attention(x, z + 1.0), base, "the cross-attention") <= 1e-6:
            failed.append("(c) blind to the memory")
        if max_abs_diff(parts.layer(x, z + 1.0), parts.layer(x, z), "the decoder layer") <= 1e-6:
            failed.append("(d) the layer is blind to the memory")
    return Measurement(len(failed), detail=("; ".join(failed) or "queries from the decoder, keys and values from the memory")
                       + f"; (a) {noise_text({'cross-attention': noise})}")


def _compose_encoder(parts, src: torch.Tensor) -> torch.Tensor:
    y = parts.encoder_input(src)
    for layer in parts.encoder_layers:
        y = layer.layer(y)
    return y


@checker("model.stacks")
def stacks(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: the encoder is N layers applied in turn to the embedded input, and its output
    feeds the encoder-decoder attention of every decoder layer; the decoder is N layers over the
    embedded, shifted target, followed by the output projection. Measured: max |the model's
    output - this composition of its own parts|, for the encoder stack and for the logits."""
    parts = ctx.target.model(vocab_size=40, d_model=D_MODEL, n_heads=HEADS, d_ff=D_FF, n_layers=3)
    needed = ("encoder_input", "decoder_input", "encode", "encoder_layers", "decoder_layers", "output_projection")
    missing = [name for name in needed if getattr(parts, name) is None]
    if missing:
        raise NotApplicable(f"{ctx.target.name} does not expose {', '.join(missing)} (ModelParts)")
    gen = torch.Generator().manual_seed(ctx.seed)
    src = torch.randint(4, 40, (2, 7), generator=gen)
    tgt = torch.randint(4, 40, (2, 6), generator=gen)
    saved = _perturb_vectors(parts.module, D_MODEL, gen)
    try:
        with torch.no_grad():
            memory = _compose_encoder(parts, src)
            require_informative(memory, "the encoder stack's outputs")
            encoder_err = max_abs_diff(parts.encode(src), memory, "the encoder stack")
            y = parts.decoder_input(tgt)
            for layer in parts.decoder_layers:
                y = layer.layer(y, memory)
            logits = parts.forward(src, tgt)
            require_informative(logits, "the logits")
            logits_err, absorbed = _projection_error(logits, y @ parts.output_projection.detach().cpu().T)
    finally:
        with torch.no_grad():
            for param, value in saved:
                param.copy_(value)
    err = max(encoder_err, logits_err)
    perturbed = (f"; the model's {len(saved)} d_model-vectors (norm gains and biases, wherever they sit) perturbed"
                 if saved else "")
    return Measurement(err, detail=f"encoder stack {encoder_err:.1e}, logits {logits_err:.1e} "
                                   f"({len(parts.encoder_layers)} + {len(parts.decoder_layers)} layers){absorbed}{perturbed}")


def _perturb_vectors(module: torch.nn.Module | None, d_model: int, gen: torch.Generator) -> list:
    """Give every parameter of ``module`` that is one d_model-vector (a norm's gain or bias, by any
    name; a projection's bias) random values of its own, in place; (parameter, saved value) to
    restore. A norm at its initial gain 1 and bias 0 on top of a post-norm stack (torch's
    nn.Transformer) returns its input, and a final norm would not show."""
    saved = []
    for param in (module.parameters() if module is not None else ()):
        if param.dim() == 1 and param.numel() == d_model:
            saved.append((param, param.detach().clone()))
            with torch.no_grad():
                param.add_((torch.randn(param.shape, generator=gen, dtype=param.dtype) * 0.5).to(param.device))
    return saved


def _projection_error(logits: torch.Tensor, projected: torch.Tensor) -> tuple[float, str]:
    """(max |logits - the projected decoder output| once a bias per vocabulary entry and a constant
    per position are taken out, what was taken out). A bias on the output projection (an untied
    ``nn.Linear``) and log-softmax logits (the Annotated Transformer's ``Generator``) are the
    paper's "linear transformation and softmax"; a norm or a scale between stack and projection
    is neither, and stays in the residual."""
    diff = logits.double() - projected.double()
    per_position = diff.mean(-1, keepdim=True)
    per_entry = (diff - per_position).mean(dim=tuple(range(diff.dim() - 1)), keepdim=True)
    residual = (diff - per_position - per_entry).abs().max().item()
    absorbed = []
    if residual > 1e-4:  # a departure: what the fit took out says nothing
        return residual, ""
    if per_entry.abs().max().item() > 1e-5:
        absorbed.append("a bias on the output projection")
    if (per_position - per_position.mean()).abs().max().item() > 1e-5:
        absorbed.append("a constant per position (log-softmax logits)")
    return residual, (f"; taken out of the logits: {' and '.join(absorbed)}" if absorbed else "")


@checker("layers.distinct_parameters")
@opened
def distinct_parameters(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.3: "they use different parameters from layer to layer". Pairs of layers of one
    stack that compute the same function on the same input (as shared parameters would)."""
    parts = ctx.target.model(vocab_size=40, d_model=D_MODEL, n_heads=HEADS, d_ff=D_FF, n_layers=3)
    if parts.encoder_layers is None or parts.decoder_layers is None:
        raise NotApplicable(f"{ctx.target.name} does not expose its layers (ModelParts.encoder_layers, decoder_layers)")
    gen = torch.Generator().manual_seed(ctx.seed)
    x, z = _x(gen, 6), _x(gen, 5)
    same = 0
    with torch.no_grad():
        outs = [layer.layer(x) for layer in parts.encoder_layers]
        outs_dec = [layer.layer(x, z) for layer in parts.decoder_layers]
    for group in (outs, outs_dec):
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                same += int(max_abs_diff(group[i], group[j], "the layers' outputs") <= 1e-6)
    return Measurement(same, detail=f"{same} pairs of layers computing the same function "
                                    f"({len(outs)} encoder, {len(outs_dec)} decoder layers)")


@checker("model.widths")
def widths(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: "all sub-layers in the model, as well as the embedding layers, produce outputs
    of dimension d_model". The last dimension of every sub-layer's and embedding's output."""
    d_model = claim.params.get("d_model", D_MODEL)
    parts = ctx.target.model(vocab_size=40, d_model=d_model, n_heads=HEADS, d_ff=4 * d_model, n_layers=2)
    if parts.encoder_layers is None or parts.decoder_layers is None or parts.embed_source is None:
        raise NotApplicable(f"{ctx.target.name} does not expose its layers and embeddings (ModelParts)")
    gen = torch.Generator().manual_seed(ctx.seed)
    tokens = torch.randint(4, 40, (2, 6), generator=gen)
    x, z = _x(gen, 6, d_model), _x(gen, 5, d_model)
    seen: dict[str, int] = {}
    def width(name: str, out: torch.Tensor) -> None:
        seen[name] = finite(out, f"the {name}'s output").size(-1)  # a width of NaNs is no output

    with torch.no_grad():
        width("source embedding", parts.embed_source(tokens))
        if parts.embed_target is not None:
            width("target embedding", parts.embed_target(tokens))
        for i, layer in enumerate(parts.encoder_layers):
            width(f"encoder {i} self-attention", layer.self_attention(x))
            width(f"encoder {i} feed-forward", layer.feed_forward(x))
        for i, layer in enumerate(parts.decoder_layers):
            width(f"decoder {i} self-attention", layer.self_attention(x))
            width(f"decoder {i} encoder-decoder attention", layer.cross_attention(x, z))
            width(f"decoder {i} feed-forward", layer.feed_forward(x))
    off = {k: v for k, v in seen.items() if v != d_model}
    return Measurement(sorted(set(seen.values())) == [d_model], detail=(
        f"all {len(seen)} outputs have width {d_model}" if not off else f"not {d_model} wide: {off}"))


@checker("model.parameters_used", audits=False)
def parameters_used(claim: Claim, ctx: CheckContext) -> Measurement:
    """Every trainable parameter of the model (what Table 3's counts count) takes part in computing
    its output: the teacher-forced loss of one batch, differentiated with respect to each parameter,
    reaches it. A module built but bypassed (W^O left out of MultiHead, a layer skipped) still counts
    in the parameters and in every shape, and is found here. Measured: the parameters the loss does
    not reach (their names in the detail)."""
    with seeded(claim_seed(ctx.seed, claim.id)):
        parts = ctx.target.training_model(vocab_size=40, d_model=D_MODEL, n_heads=HEADS, d_ff=D_FF, n_layers=2,
                                          dropout=0.0)
    if parts.module is None:
        raise NotApplicable(f"{ctx.target.name} gives no module holding its parameters (ModelParts.module)")
    gen = torch.Generator().manual_seed(ctx.seed)
    src, tgt = torch.randint(4, 40, (2, 7), generator=gen), torch.randint(4, 40, (2, 6), generator=gen)
    named = [(name, p) for name, p in parts.module.named_parameters() if p.requires_grad]
    logits = finite(parts.forward(src, tgt[:, :-1]), "the model's logits")
    loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    unused = [name for (name, _), grad in zip(named, grads) if grad is None]
    return Measurement(len(unused), detail=(
        f"the loss reaches all {len(named)} trainable parameters" if not unused else
        f"the loss reaches {len(named) - len(unused)} of {len(named)} trainable parameters; not: "
        + ", ".join(unused[:8]) + (" ..." if len(unused) > 8 else "")))
