"""Issue 43: the audit's wrong verdicts on two unseen families, each reproduced on a layout of the
tests' own (:mod:`tests.audit.layouts`): several streams in one tensor, a gated feed-forward layer,
a norm after the inner dropout, a tiny causal leak, per-stack positional tables; and verdicts that
do not depend on what else is selected or in which order."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from repro.audit.adapter import ModelParts, absent
from repro.audit.audit import audit_claim, auditable_claims, run_audit
from repro.audit.repro_adapter import ReproAdapter
from repro.checks.census import BATCH, TRACE_VOCAB, traced_dimensions
from repro.claims import load_claims
from repro.claims.outcome import Inconclusive, NotApplicable, Outcome
from repro.claims.seeding import seeded
from tests.audit.layouts import Layout, LayoutAdapter, Sublayer

CLAIMS = {c.id: c for c in load_claims()}


def audit(claim_id: str, adapter, seed: int = 0, **params):
    claim = CLAIMS[claim_id]
    claim = dataclasses.replace(claim, params={**claim.params, **params}) if params else claim
    return audit_claim(claim, adapter, seed)


# -- 1. the census: several streams, a gated FFN, and "not read" instead of 0 ------------------------

def census(layout: Layout):
    parts = LayoutAdapter(layout).model(TRACE_VOCAB, 32, 4, 64, 3)
    return traced_dimensions(parts.forward, 32)


def test_census_counts_a_multi_stream_decoder_and_a_gated_layer_once() -> None:
    measured, seen = census(Layout(streams=3, gated=True))   # used to read N_decoder 0 (and 6 + 6 gated as 12)
    assert measured == {"N_encoder": 3, "N_decoder": 3, "d_model": 32, "d_ff": 64, "h": 4, "d_k": 8, "d_v": 8}, seen
    assert "3 streams in one tensor" in seen and "gated" in seen
    measured, seen = census(Layout())
    assert (measured["N_encoder"], measured["N_decoder"]) == (3, 3) and "streams" not in seen and "gated" not in seen


def scripted(*, decoder_rows=None, routed: bool = False, padded_target: int | None = None, layers: int = 2):
    """A forward pass of bare matrix products in a chosen layout (the census reads nothing else):
    ``layers`` encoder and decoder layers of width 8 with d_ff 16 and 2 heads."""
    d, x, heads = 8, 16, 2

    def forward(src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        b, s = src.shape
        t = padded_target or tgt.size(1)
        enc = torch.ones(b * s, d)
        for _ in range(layers):
            scores = torch.bmm(torch.ones(b * heads, s, d // heads), torch.ones(b * heads, d // heads, s))
            torch.bmm(scores, torch.ones(b * heads, s, d // heads))
            enc = torch.mm(torch.mm(enc, torch.ones(d, x)), torch.ones(x, d))
        rows = decoder_rows(b, t) if decoder_rows else b * t
        dec = torch.ones(rows, d)
        for _ in range(layers):
            torch.mm(dec, torch.ones(d, d))   # an attention's projection between two layers
            if routed:  # the tokens split between two experts, a third and the rest
                torch.mm(torch.mm(dec[:rows // 3], torch.ones(d, x)), torch.ones(x, d))
                torch.mm(torch.mm(dec[rows // 3:], torch.ones(d, x)), torch.ones(x, d))
            else:
                dec = torch.mm(torch.mm(dec, torch.ones(d, x)), torch.ones(x, d))
        return torch.mm(dec, torch.ones(d, TRACE_VOCAB))

    return forward


def test_census_says_what_it_could_not_read() -> None:
    measured, _ = traced_dimensions(scripted(decoder_rows=lambda b, t: 4 * b * t), 8)   # four streams
    assert measured["N_decoder"] == 2
    with pytest.raises(Inconclusive, match="N_decoder: no feed-forward layer .* the target reaches; "
                                           "the decoder could not be read"):
        traced_dimensions(scripted(padded_target=12), 8)   # a decoder padded to a fixed length: not "0 layers"
    measured, seen = traced_dimensions(scripted(routed=True), 8)    # tokens in two groups: one layer each time
    assert measured["N_decoder"] == 2 and "ran their tokens in groups" in seen, seen
    with pytest.raises(Inconclusive, match="not one sequence of products"):
        traced_dimensions(lambda src, tgt: [torch.mm(torch.ones(2, 8), torch.ones(8, 8)) for _ in range(tgt.size(1))], 8)


def test_census_reads_a_stack_that_pads_its_input_by_what_reaches_it() -> None:
    parts = LayoutAdapter(Layout()).model(TRACE_VOCAB, 32, 4, 64, 3)

    def padded(src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:   # as a local attention pads to its window
        return parts.forward(torch.cat([src, torch.zeros(src.size(0), 16 - src.size(1), dtype=src.dtype)], 1), tgt)

    measured, seen = traced_dimensions(padded, 32)   # the encoder's shapes follow no length: its values do
    assert (measured["N_encoder"], measured["N_decoder"], measured["h"]) == (3, 3, 4), seen
    assert "padded to a fixed length" in seen and "read off the decoder's self-attention" in seen


def test_census_still_reads_reappearing_rows_of_a_plain_model() -> None:
    measured, seen = traced_dimensions(scripted(), 8)
    assert measured == {"N_encoder": 2, "N_decoder": 2, "d_model": 8, "d_ff": 16, "h": 2, "d_k": 4, "d_v": 4}, seen
    assert f"for {BATCH} x" not in seen   # one row per token: nothing to say


# -- 2., 3. residual dropout: a norm after the inner dropout, several streams, one unreadable layer --

def unscaled(adapter: LayoutAdapter) -> LayoutAdapter:
    """The same layout whose residual dropout zeroes at the right rate but does not rescale."""

    class Unscaled(type(adapter)):
        def training_model(self, *args, **kwargs) -> ModelParts:
            parts = super().training_model(*args, **kwargs)
            for module in parts.module.modules():
                if isinstance(module, Sublayer):
                    drop = module.dropout
                    module.dropout = type("Unscaled", (torch.nn.Module,), {
                        "forward": lambda self, x, d=drop: d(x) * (1 - d.p)})()
            return parts

    return Unscaled(adapter.layout)


@pytest.mark.parametrize("layout", [Layout(sandwich=True), Layout(streams=3)], ids=["sandwich", "streams"])
def test_residual_dropout_is_measured_whatever_the_layout(layout: Layout) -> None:
    record = audit("sec5.dropout.residual-placement", LayoutAdapter(layout))
    # sandwich: used to fail (its scale measured against the eval-mode output, which a norm after the
    # inner dropout biases); streams: used to be "not applicable" ("neither post-norm nor pre-norm")
    assert record.status == Outcome.PASS, record.why
    if layout.sandwich:
        assert "layers measured pre-norm" in record.why and "own train-mode mean" in record.why
    else:
        assert "several streams in one tensor" in record.why and "decoder 1 feed-forward" in record.why
    broken = audit("sec5.dropout.residual-placement", unscaled(LayoutAdapter(layout)))
    assert broken.status == Outcome.FAIL, broken.why


class DecoderNormsNotCalled(LayoutAdapter):
    """The decoder layers give norms the layer never calls: its stream cannot be followed."""

    def training_model(self, *args, **kwargs) -> ModelParts:
        parts = super().training_model(*args, **kwargs)
        stray = tuple(torch.nn.LayerNorm(parts.d_model) for _ in range(3))
        parts.decoder_layers = [dataclasses.replace(layer, norms=stray) for layer in parts.decoder_layers]
        return parts


def test_one_unreadable_layer_keeps_the_measured_sites() -> None:
    record = audit("sec5.dropout.residual-placement", DecoderNormsNotCalled(Layout()))
    assert record.status == Outcome.INCONCLUSIVE, record.why
    assert "encoder 1 feed-forward: 0.3" in record.why and "not read (2 of 4 layers)" in record.why
    assert "never called its norm" in record.why
    broken = audit("sec5.dropout.residual-placement", unscaled(DecoderNormsNotCalled(Layout())))
    assert broken.status == Outcome.FAIL, broken.why   # a departure where it could read stays a departure


# -- 4. a tiny causal leak, against the model's own noise floor -------------------------------------

def test_a_leak_below_any_absolute_threshold_fails() -> None:
    leaky = LayoutAdapter(Layout(leak=3e-8))
    with seeded(0):
        parts = leaky.model(40, 32, 4, 64, 2)
    tgt = torch.randint(4, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    moved = tgt.clone()
    moved[:, 8] = 4 + (moved[:, 8] - 4 + 7) % 36
    src = tgt[:, :7]
    with torch.no_grad():
        past = (parts.forward(src, moved) - parts.forward(src, tgt))[:, :8].abs().max().item()
    assert 0 < past < 1e-6                      # under the 1e-6 the check used to ignore
    record = audit("sec3.decoder.causal-mask", leaky)
    assert record.status == Outcome.FAIL and record.check.measured == 36, record.why
    correct = audit("sec3.decoder.causal-mask", LayoutAdapter(Layout()))
    assert correct.status == Outcome.PASS and "noise floor 0" in correct.why, correct.why


class Noisy(LayoutAdapter):
    """A model whose every call adds noise of ``scale`` to its logits (as nondeterministic kernels would)."""

    def __init__(self, layout: Layout, scale: float) -> None:
        super().__init__(layout)
        self.scale = scale

    def model(self, *args) -> ModelParts:
        parts = super().model(*args)
        noisy = lambda y: y + self.scale * torch.randn_like(y)
        forward, encode = parts.forward, parts.encode
        return dataclasses.replace(parts, forward=lambda s, t: noisy(forward(s, t)), encode=lambda s: noisy(encode(s)))


def test_a_noisy_model_is_judged_against_its_own_noise() -> None:
    quiet = audit("sec3.decoder.causal-mask", Noisy(Layout(), 1e-7))
    assert quiet.status == Outcome.PASS and "largest move counted as none" in quiet.why, quiet.why
    assert audit("sec3.decoder.causal-mask", Noisy(Layout(leak=1e-3), 1e-7)).status == Outcome.FAIL
    drowned = audit("sec3.decoder.causal-mask", Noisy(Layout(), 10.0))
    assert drowned.status == Outcome.INCONCLUSIVE and "noise is as large" in drowned.why, drowned.why
    reach = audit("sec3.encoder.all-positions", Noisy(Layout(), 1e-7))
    assert reach.status == Outcome.PASS and "largest move counted as none" in reach.why, reach.why
    assert audit("sec3.encoder.all-positions", Noisy(Layout(), 10.0)).status == Outcome.INCONCLUSIVE


# -- 5. the same verdict alone, in any selection, in any order ---------------------------------------

class SmallOnly(LayoutAdapter):
    """Builds small models only (a larger one is not exposed): the full audit stays fast."""

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers) -> ModelParts:
        if d_model > 64 or vocab_size > 1000:
            raise NotApplicable(f"{self.name} builds models of d_model <= 64 and 1000 words only")
        return super().model(vocab_size, d_model, n_heads, d_ff, n_layers)


def test_verdicts_do_not_depend_on_the_selection_or_the_order() -> None:
    adapter = SmallOnly(Layout(streams=2, leak=3e-8))
    full = {r.claim.id: r.check for r in run_audit(adapter, auditable_claims())}
    selection = auditable_claims(only=["sec5.dropout", "sec3.decoder.causal-mask", "impl.padding", "sec3.encoder",
                                       "sec3.stacks.composition"])
    assert len(selection) >= 6
    for record in run_audit(adapter, reversed(selection)):
        alone = record.check
        assert (alone.status, alone.measured, alone.detail) == (
            full[alone.claim.id].status, full[alone.claim.id].measured, full[alone.claim.id].detail), alone.claim.id
    assert full["sec3.decoder.causal-mask"].status == Outcome.FAIL


def test_the_global_random_state_is_left_as_it_was() -> None:
    torch.manual_seed(123)
    before = torch.get_rng_state()
    audit("sec3.decoder.causal-mask", LayoutAdapter(Layout()))
    assert torch.equal(torch.get_rng_state(), before)


# -- 6. every declared table, by every positional claim ----------------------------------------------

def test_every_positional_claim_reads_the_models_own_tables() -> None:
    own = LayoutAdapter(Layout(wavelength=10000.0))   # the adapter's table is the paper's, the model's end at 10000
    wavelengths = audit("sec3.pe.wavelengths", own, d_model=64, length=128)
    assert wavelengths.status == Outcome.FAIL, wavelengths.why   # used to pass, reading the adapter's table only
    assert "the model's own decoder table: lambda/2pi from 1.0000 to 10000.0" in wavelengths.why
    linear = audit("sec3.pe.relative-linear", own, length=128, d_model=64)
    assert linear.status == Outcome.PASS and "the model's own encoder table" in linear.why, linear.why
    assert audit("sec3.pe.wavelengths", LayoutAdapter(Layout()), d_model=64, length=128).status == Outcome.PASS


class OwnTablesOnly(LayoutAdapter):
    """No general table (declared absent, as BART's adapter does): the model's own tables are what it adds."""

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "the model's tables are per stack")


def test_a_general_table_declared_absent_leaves_the_models_own_to_be_measured() -> None:
    for claim in ("sec3.pe.wavelengths", "sec3.pe.relative-linear", "sec3.pe.layout"):
        record = audit(claim, OwnTablesOnly(Layout()), d_model=64, length=128)
        assert record.status == Outcome.PASS and "declared absent" in record.why, (claim, record.why)
    assert audit("sec3.pe.wavelengths", OwnTablesOnly(Layout(wavelength=10000.0)), d_model=64,
                 length=128).status == Outcome.FAIL

    class NoTables(OwnTablesOnly):
        def model(self, *args):
            return dataclasses.replace(super().model(*args), encoder_positions=absent("none"),
                                       decoder_positions=absent("none"))

    record = audit("sec3.pe.wavelengths", NoTables(Layout()), d_model=64, length=128)
    assert record.status == Outcome.FAIL and record.why.startswith("absent:"), record.why


# -- 7. a fit at the edge of its grid says so ---------------------------------------------------------

class ExtraParameters(ReproAdapter):
    """repro's model beside 6M parameters of something else: its counts imply fewer than 30000 words."""

    has_repro_presets = False

    def model(self, *args) -> ModelParts:
        parts = super().model(*args)
        holder = torch.nn.Module()
        holder.model, holder.extra = parts.module, torch.nn.Parameter(torch.empty(6_000_000))
        return dataclasses.replace(parts, module=holder)


def test_a_fit_at_the_edge_of_its_grid_is_no_fit() -> None:
    record = audit("table3.params.implied-vocabulary", ExtraParameters())
    assert record.status == Outcome.FAIL and record.check.measured == 30000, record.why
    assert "no fit inside the search grid (30000 to 50000 words)" in record.why and "lower edge" in record.why
    assert "below it" in record.why
    inside = audit("table3.params.implied-vocabulary", ReproAdapter())
    assert "best fit 40900 words" in inside.why and "without the grid" in inside.why
