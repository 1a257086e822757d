"""Checkers for Section 3.5: the sinusoidal positional encodings, their set and their layout."""

from __future__ import annotations

import torch

from repro.claims.outcome import Absent, CheckContext, Measurement, NotApplicable
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import Worst, finite, max_abs_diff
from repro.checks.stack_embedding import received_factor
from repro.checks.sinusoids import PAPER_LAYOUT, NotSinusoidPairs, find_pairs


def reference_encoding(length: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(pos/10000^(2i/d)), in float64."""
    pe = torch.empty(length, d_model, dtype=torch.float64)
    for i in range(0, d_model, 2):
        angle = torch.arange(length, dtype=torch.float64) / 10000 ** (i / d_model)
        pe[:, i] = torch.sin(angle)
        if i + 1 < d_model:
            pe[:, i + 1] = torch.cos(angle)
    return pe


def _tables(ctx: CheckContext, claim: Claim) -> tuple[dict[str, torch.Tensor], str]:
    """Every table the implementation declares (:func:`declared_tables`) at the claim's length and
    width, each required of that shape and finite, in float64; and the note on those declared absent."""
    length, d_model = claim.params.get("length", 200), claim.params.get("d_model", 512)
    tables, note = declared_tables(ctx, length, d_model)
    for name, table in tables.items():
        if table.dim() != 2 or table.shape[1] != d_model or not 1 <= table.shape[0] <= length:
            raise ValueError(f"{name} has shape {tuple(table.shape)}, expected {(length, d_model)}")
        tables[name] = finite(table.detach().double(), name)
    return tables, note + _short(tables, length)


def _short(tables: dict[str, torch.Tensor], length: int) -> str:
    """The note on tables of fewer rows than asked: a model with fewer positions, read as it is."""
    short = [f"{name} has {table.shape[0]} positions" for name, table in tables.items() if table.shape[0] < length]
    return f"; {', '.join(short)} (the model has no more; {length} asked): read as it is" if short else ""


@checker("positional.equations")
def equations(claim: Claim, ctx: CheckContext) -> Measurement:
    """Max |PE - the paper's sin/cos formula| over several model widths, for every table the
    implementation declares (:func:`declared_tables`): the adapter's ``positional_encoding`` and
    each stack's own table of the built model (``ModelParts.encoder_positions`` /
    ``decoder_positions``), so that a model whose own table departs fails even where the general
    one is right."""
    worst = Worst()
    length = claim.params.get("length", 200)
    seen: dict[str, float] = {}
    for d_model in claim.params.get("d_models", [16, 64, 512]):
        tables, note = declared_tables(ctx, length, d_model)
        note += _short(tables, length)
        for name, table in tables.items():
            table = table.detach().double()
            if table.dim() != 2 or table.shape[1] != d_model or not 1 <= table.shape[0] <= length:
                return Measurement(float("inf"), False, f"{name}: shape {tuple(table.shape)} for d_model={d_model}")
            error = max_abs_diff(table, reference_encoding(table.shape[0], d_model), f"{name} at d_model={d_model}")
            worst.add(error)
            seen[name] = max(seen.get(name, 0.0), error)
    return Measurement(worst.value, detail=f"max abs error {worst.value:.2e} (" + ", ".join(
        f"{name} {error:.1e}" for name, error in seen.items()) + ")" + note)


#: The tables :func:`declared_tables` names: the adapter's, and each stack's own.
GENERAL_TABLE = "the adapter's positional_encoding"


def _heads(d_model: int) -> int:
    return next(h for h in (4, 2, 1) if d_model % h == 0)


def own_stack_tables(ctx: CheckContext, length: int, d_model: int) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The tables a built model declares as its own per stack (``ModelParts.encoder_positions`` /
    ``decoder_positions``), and the reasons of those it declares absent; none where the adapter
    builds no model or the model exposes none."""
    try:
        parts = ctx.target.model(vocab_size=40, d_model=d_model, n_heads=_heads(d_model), d_ff=64, n_layers=1)
    except NotApplicable:
        return {}, []
    out, absent = {}, []
    for stack, own in (("encoder", parts.encoder_positions), ("decoder", parts.decoder_positions)):
        if own is None:
            continue
        try:
            out[f"the model's own {stack} table"] = own(length)
        except Absent as why:
            absent.append(str(why))
    return out, absent


def declared_tables(ctx: CheckContext, length: int, d_model: int) -> tuple[dict[str, torch.Tensor], str]:
    """Every positional table the implementation declares, by name: the adapter's general
    ``positional_encoding`` and each per-stack table of the built model; and a note on the tables
    declared absent. Where the general table is absent but the model declares tables of its own
    (a model whose positions are per stack), those are what it adds, and they are measured;
    ``Absent`` only where it declares none at all, ``NotApplicable`` where it exposes none."""
    tables: dict[str, torch.Tensor] = {}
    absent: list[str] = []
    try:
        tables[GENERAL_TABLE] = ctx.target.positional_encoding(length, d_model)
    except NotApplicable:
        pass
    except Absent as why:
        absent.append(str(why))
    own, own_absent = own_stack_tables(ctx, length, d_model)
    tables.update(own)
    absent += own_absent
    absent = list(dict.fromkeys(absent))
    if not tables and absent:
        raise Absent("; ".join(absent))
    if not tables:
        raise NotApplicable(f"{ctx.target.name} exposes no positional table (adapter method 'positional_encoding', "
                            "ModelParts.encoder_positions / decoder_positions)")
    note = f"; declared absent: {'; '.join(absent)} (the tables declared are measured)" if absent else ""
    return tables, note


def _wavelengths(table: torch.Tensor) -> tuple[list[float] | None, bool, str]:
    """([first, last] wavelength / 2pi, whether they are the paper's, what was seen) of one table."""
    try:
        pairs = find_pairs(table)
    except NotSinusoidPairs as why:
        return None, False, str(why)
    d_model = 2 * len(pairs.sine)
    lam = pairs.wavelengths
    ratios = torch.log(lam[1:] / lam[:-1])
    spread = (ratios.max() - ratios.min()).item()
    first, last = lam[0].item(), lam[-1].item()
    last_expected = 10000 ** ((d_model - 2) / d_model)
    ok = abs(first - 1) < 1e-3 and spread < 1e-3 and abs(last / last_expected - 1) < 1e-2
    return ([round(first, 4), round(last, 1)], ok,
            f"lambda/2pi from {first:.4f} to {last:.1f} (progression's last term {last_expected:.1f}); "
            f"spread of log-ratios {spread:.1e}; layout {pairs.layout()}")


def _per_table(found: dict[str, str]) -> str:
    """The line of each table, named where there are several."""
    return "; ".join(f"{name}: {text}" for name, text in found.items()) if len(found) > 1 else next(iter(found.values()))


@checker("positional.wavelengths")
def wavelengths(claim: Claim, ctx: CheckContext) -> Measurement:
    """The wavelengths of the table's sinusoids must form a geometric progression from 2*pi
    towards 10000 * 2*pi, in every table the implementation declares (the adapter's and each
    stack's own, :func:`declared_tables`).

    The (sine, cosine) pairs are found first (:mod:`repro.checks.sinusoids`), so the order of
    the dimensions does not matter: the wavelengths are a property of the set of sinusoids
    (the layout is ``sec3.pe.layout``'s). Measured: [first wavelength / 2pi, last wavelength /
    2pi] (of the first table that departs, else of the first); passes when, in every table, the
    first is 1, the ratios between neighbours are constant, and the last equals 10000^((d-2)/d)
    (the progression's last term below 10000 * 2pi)."""
    measured, found, departing = None, {}, None
    tables, note = _tables(ctx, claim)
    for name, table in tables.items():
        value, ok, found[name] = _wavelengths(table)
        measured = value if measured is None and departing is None else measured
        if not ok and departing is None:
            departing, measured = name, value
    return Measurement(measured, departing is None, _per_table(found) + note)


@checker("positional.relative_linear")
def relative_linear(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.5: for any fixed offset k, PE(pos+k) is a linear function of PE(pos), in every
    table the implementation declares (:func:`declared_tables`).

    Each (sine, cosine) pair, wherever its two dimensions lie, rotates on its own, so a 2x2
    map M_k is fitted per pair by least squares on two disjoint ranges of positions; passes
    when each fit is exact (residual ~0) and the two maps agree, i.e. M_k does not depend on
    pos. Measured: the worst of residual and disagreement over the tables (infinite when a table
    is not a set of sin/cos pairs)."""
    worst, found = Worst(), {}
    tables, note = _tables(ctx, claim)
    for name, table in tables.items():
        try:
            pairs = find_pairs(table)
        except NotSinusoidPairs as why:
            found[name] = str(why)
            continue
        table_worst = Worst()
        length = table.shape[0]
        half = length // 2
        for k in claim.params.get("offsets", [1, 5, 17]):
            fits = []
            for lo, hi in ((0, half - k), (half, length - k)):
                src, dst = table[lo:hi], table[lo + k : hi + k]
                blocks = []
                for columns in zip(pairs.sine, pairs.cosine):
                    cols = list(columns)
                    sol = torch.linalg.lstsq(src[:, cols], dst[:, cols]).solution
                    table_worst.add(max_abs_diff(src[:, cols] @ sol, dst[:, cols], f"PE(pos + {k}) of {name}"))
                    blocks.append(sol)
                fits.append(torch.stack(blocks))
            table_worst.add(max_abs_diff(fits[0], fits[1], f"the maps of offset {k} of {name}"))
        worst.add(table_worst.value, name)
        found[name] = f"worst residual or disagreement between ranges {table_worst.value:.2e}; layout {pairs.layout()}"
    if worst.count < len(found):  # a table that is no set of sin/cos pairs
        return Measurement(float("inf"), False, _per_table(found) + note)
    return Measurement(worst.value, detail=_per_table(found) + note)


@checker("positional.layout")
def layout(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.5: which dimension holds which sinusoid. The paper interleaves them, sine at
    2i and cosine at 2i+1; all sines before all cosines (tensor2tensor, fairseq, Marian) is the
    same set in another fixed order. Read on every table the implementation declares (the
    adapter's and each stack's own, :func:`declared_tables`). Measured: the layout's name (the
    first table that departs from the paper's, else the paper's), with the amplitude and the
    position of the first row as found."""
    found = []
    tables, note = _tables(ctx, claim)
    for name, table in tables.items():
        try:
            pairs = find_pairs(table)
        except NotSinusoidPairs as why:
            found.append((name, "no sin/cos pairs", str(why)))
            continue
        amp = pairs.amplitude
        amplitude = f"{amp.min().item():.4g}" if (amp.max() - amp.min()).item() < 1e-6 else f"{amp.min().item():.4g} to {amp.max().item():.4g}"
        kind = pairs.layout()
        where = {
            PAPER_LAYOUT: "sine at 2i, cosine at 2i+1",
            "sines-then-cosines": "sine at i, cosine at i + d_model/2",
        }.get(kind, f"sines at {pairs.sine[:4]}..., cosines at {pairs.cosine[:4]}...")
        found.append((name, kind, f"{where}; amplitude {amplitude}; first row at position {pairs.start:.3g}"))
    departing = [f for f in found if f[1] != PAPER_LAYOUT]
    measured = (departing or found)[0][1]
    detail = "; ".join(f"{name}: {text}" for name, _, text in found) if len(found) > 1 else found[0][2]
    return Measurement(measured, False if measured == "no sin/cos pairs" else None, detail + note)


def require_stack_inputs(ctx: CheckContext, parts) -> None:
    """The parts a claim about what each stack receives needs (ModelParts), or NotApplicable."""
    needed = {"encoder_input": parts.encoder_input, "decoder_input": parts.decoder_input,
              "embed_source": parts.embed_source, "embed_target": parts.embed_target}
    missing = [k for k, v in needed.items() if v is None]
    if missing:
        raise NotApplicable(f"{ctx.target.name} does not expose {', '.join(missing)} (ModelParts)")


def stack_table(ctx: CheckContext, parts, stack: str, length: int, d_model: int) -> torch.Tensor:
    """The positional table the ``stack`` ("encoder" or "decoder") adds, as the implementation
    declares it (float64): the built model's own table for that stack
    (``ModelParts.encoder_positions`` / ``decoder_positions``, e.g. BART's two learned tables),
    else the adapter's ``positional_encoding``. Raises ``Absent`` where the implementation has no
    positional table and ``NotApplicable`` where it exposes none; it never substitutes one."""
    own = parts.encoder_positions if stack == "encoder" else parts.decoder_positions
    table = own(length) if own is not None else ctx.target.positional_encoding(length, d_model)
    if table.shape[0] < length:
        raise ValueError(f"the {stack}'s own table has {table.shape[0]} positions, fewer than the {length} it was fed")
    return table.detach().double()


def _position_elsewhere(parts, length: int) -> str:
    """What the model declares instead of an added table: an additive bias on the self-attention
    scores (T5), and whether it is relative (depends on j - i only), measured."""
    found = []
    for stack, bias in (("encoder", parts.encoder_attention_bias), ("decoder", parts.decoder_attention_bias)):
        if bias is None:
            continue
        with torch.no_grad():
            b = bias(length).detach().double()
        later, earlier = b[..., 1:, 1:], b[..., :-1, :-1]
        finite_both = later.isfinite() & earlier.isfinite()
        # a mask folded into the bias (-inf above the diagonal, as ALiBi's causal form) shifts with it
        same_mask = (torch.equal(later.isfinite(), earlier.isfinite())
                     and torch.equal(later[~finite_both], earlier[~finite_both]))
        shift = float("inf") if not same_mask else (
            (later - earlier)[finite_both].abs().max().item() if finite_both.any() else 0.0)
        kind = "relative (a function of j - i alone)" if shift <= 1e-6 else f"not relative (shifted by one: {shift:.2g})"
        found.append(f"{stack}: {kind}")
    if not found:
        return ""
    return ("; the additive bias on the self-attention scores it declares instead (ModelParts.encoder_attention_bias, "
            "decoder_attention_bias), measured: " + ", ".join(found))


@checker("positional.both_stacks")
def both_stacks(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.5: the positional encodings are added to the input embeddings "at the bottoms
    of the encoder and decoder stacks". With dropout off, what each stack's first layer receives
    minus the scaled embedding must be that stack's positional table: the model's own
    (``ModelParts.encoder_positions``/``decoder_positions``), else the adapter's
    ``positional_encoding``. Where neither is exposed the claim is not applicable: the paper's
    sinusoids are never put in the place of a table the implementation does not show (the claim
    is that the model adds *its* encoding to both stacks; the encoding itself is
    ``sec3.pe.equations``'s). A model without positions fails with the reason "absent".
    Measured: the worst difference over both stacks."""
    d_model, length = 32, 12
    parts = ctx.target.model(vocab_size=40, d_model=d_model, n_heads=4, d_ff=64, n_layers=1)
    require_stack_inputs(ctx, parts)
    gen = torch.Generator().manual_seed(ctx.seed)
    tokens = torch.randint(4, 40, (2, length), generator=gen)
    tables = {}
    for stack in ("encoder", "decoder"):
        try:
            tables[stack] = stack_table(ctx, parts, stack, length, d_model)
        except Absent as why:
            raise Absent(f"{why}{_position_elsewhere(parts, length)}") from None
        except NotApplicable as why:  # not exposed: nothing to compare with, never the paper's own table
            raise NotApplicable(f"{ctx.target.name} exposes no positional table for the {stack} ({why}); what the "
                                "stacks receive cannot be set against what the implementation declares") from None
    with torch.no_grad():
        received = {"encoder": parts.encoder_input(tokens).double(), "decoder": parts.decoder_input(tokens).double()}
        embedded = {"encoder": parts.embed_source(tokens).double(), "decoder": parts.embed_target(tokens).double()}
    note = ""
    for stack in received:  # scaled in the stack, not by the embedding the adapter gives (Pegasus)
        own = received_factor(parts, stack, tokens, gen)
        if own is not None and own.factor is not None and _differs(received[stack] - embedded[stack], tables[stack]):
            weight = parts.source_embedding if stack == "encoder" else parts.target_embedding
            embedded[stack] = own.factor * weight.detach().cpu()[tokens].double()
            note += f"; {own.seen}, not what ModelParts.embed_{'source' if stack == 'encoder' else 'target'} gives"
    if _start_vector(parts, tokens, received["decoder"]):
        # tensor2tensor's shift_right_3d: the decoder's position 0 holds a fixed start vector (zeros),
        # not the start token's embedding; the positions of the embedded tokens are rows 1 ..
        received["decoder"], embedded["decoder"] = received["decoder"][:, 1:], embedded["decoder"][:, 1:]
        tables["decoder"] = tables["decoder"][1:]
        note += ("; the decoder's position 0 receives a fixed start vector whatever the start token (not its "
                 "embedding): positions 1 .. compared there")
    errors = {k: max_abs_diff(received[k] - embedded[k], tables[k].double().expand_as(received[k]),
                              f"the {k}'s input - embedding") for k in received}
    normed = [k for k in received if errors[k] > 1e-5 and _is_normalised_sum(received[k], embedded[k] + tables[k])]
    if normed:
        note += (f"; the {' and '.join(normed)} receive{'s' if len(normed) == 1 else ''} LayerNorm(embedding + positions): "
                 "a norm on the sum before the first layer (as BART's layernorm_embedding)")
    return Measurement(max(errors.values()), detail=", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + note)


def _start_vector(parts, tokens: torch.Tensor, received: torch.Tensor) -> bool:
    """Whether what the decoder's position 0 receives ignores the token there (the start token)."""
    other = tokens.clone()
    other[:, 0] = 4 + (other[:, 0] - 4 + 7) % (parts.vocab_size - 4)
    with torch.no_grad():
        moved = (parts.decoder_input(other)[:, 0].double() - received[:, 0]).abs().max().item()
    return moved <= 1e-6


def _differs(rest: torch.Tensor, table: torch.Tensor) -> bool:
    """Whether what is left of a stack's input after the embedding is not the table (to 1e-5)."""
    return (rest - table.expand_as(rest)).abs().max().item() > 1e-5


def _is_normalised_sum(received: torch.Tensor, total: torch.Tensor) -> bool:
    """Whether ``received`` is the sum normalised per position (a LayerNorm at its initial gain 1
    and bias 0, any epsilon up to 1e-5)."""
    normalised = torch.nn.functional.layer_norm(total, total.shape[-1:])
    return (received - normalised).abs().max().item() <= 1e-3
