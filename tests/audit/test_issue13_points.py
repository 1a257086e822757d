"""Issue 13: each point is a constructed adapter that used to get the wrong verdict."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from repro.audit.adapter import Adapter, EncoderLayerParts, ModelParts
from repro.audit.audit import audit_claim
from repro.audit.repro_adapter import ReproAdapter
from repro.audit.torch_adapter import TorchTransformerAdapter
from repro.checks.training import eq3
from repro.claims import load_claims
from repro.model.positional import sinusoidal_encoding

CLAIMS = {c.id: c for c in load_claims()}


def audit(claim_id: str, adapter: Adapter):
    return audit_claim(CLAIMS[claim_id], adapter)


# -- the layout of the sinusoids is its own fact -------------------------------------------------

class SinesThenCosines(ReproAdapter):
    """Marian's, fairseq's, tensor2tensor's layout with the paper's frequencies."""

    def positional_encoding(self, length, d_model):
        pe = sinusoidal_encoding(length, d_model)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


def test_sines_then_cosines_keeps_wavelengths_and_relative_positions_and_reports_its_layout() -> None:
    adapter = SinesThenCosines()
    wavelengths = audit("sec3.pe.wavelengths", adapter)
    assert wavelengths.status == "pass", wavelengths.why
    assert wavelengths.check.measured == [1.0, 9646.6]
    assert audit("sec3.pe.relative-linear", adapter).status == "pass"
    layout = audit("sec3.pe.layout", adapter)
    assert layout.status == "fail" and layout.check.measured == "sines-then-cosines"
    assert audit("sec3.pe.equations", adapter).status == "fail"
    assert audit("sec3.pe.layout", ReproAdapter()).check.measured == "interleaved"


def test_a_shuffled_table_still_has_its_set_of_sinusoids() -> None:
    class Shuffled(ReproAdapter):
        def positional_encoding(self, length, d_model):
            order = torch.randperm(d_model, generator=torch.Generator().manual_seed(1))
            return sinusoidal_encoding(length, d_model)[:, order]

    assert audit("sec3.pe.wavelengths", Shuffled()).status == "pass"
    assert audit("sec3.pe.relative-linear", Shuffled()).status == "pass"
    assert audit("sec3.pe.layout", Shuffled()).check.measured == "other"


# -- FLOPs inside torch's fused attention ----------------------------------------------------------

class FusedHeads(nn.Module):
    """Multi-head attention through F.scaled_dot_product_attention; ``full`` keeps d_k = d_model
    per head (each head's queries are the whole projection, repeated), the cost then grows with h."""

    def __init__(self, d_model: int, heads: int, full: bool) -> None:
        super().__init__()
        self.h, self.full = heads, full
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value):
        b, n, d = query.shape
        if self.full:
            split = lambda x: x[:, None].expand(b, self.h, n, d)  # noqa: E731
            out = F.scaled_dot_product_attention(split(self.q(query)), split(self.k(key)), split(self.v(value)))
            return self.o(out.mean(1))
        split = lambda x: x.view(b, n, self.h, d // self.h).transpose(1, 2)  # noqa: E731
        out = F.scaled_dot_product_attention(split(self.q(query)), split(self.k(key)), split(self.v(value)))
        return self.o(out.transpose(1, 2).reshape(b, n, d))


class FusedFullHeads(Adapter):
    name = "full-width heads in torch's fused attention"

    def multi_head_attention(self, d_model, n_heads):
        return FusedHeads(d_model, n_heads, full=True).eval()


class FusedPaperHeads(Adapter):
    name = "d_model/h heads in torch's fused attention"

    def multi_head_attention(self, d_model, n_heads):
        return FusedHeads(d_model, n_heads, full=False).eval()


def test_flops_inside_fused_attention_are_counted() -> None:
    # The counter used to see 0 FLOPs in the fused kernel: the projections alone gave 1.0, a pass.
    wrong = audit("sec3.multihead.cost", FusedFullHeads())
    assert wrong.status == "fail", wrong.why
    assert wrong.check.measured > 1.3
    right = audit("sec3.multihead.cost", FusedPaperHeads())
    assert right.status == "pass" and "attention products 16,777,216 vs 16,777,216" in right.why


def test_an_attention_invisible_to_the_counter_is_refused_not_passed() -> None:
    class Opaque(Adapter):
        name = "opaque attention"

        def multi_head_attention(self, d_model, n_heads):
            proj = nn.Linear(d_model, d_model)

            def call(q, k, v):
                with torch.no_grad():  # an element-wise stand-in: no product the counter can see
                    mixed = proj(q) + k.mean(1, keepdim=True) + v.mean(1, keepdim=True)
                return mixed

            return call

    record = audit("sec3.multihead.cost", Opaque())
    assert record.status == "error" and "no term quadratic in n" in record.why


# -- missing parts are not applicable, consistently ------------------------------------------------

class NoProjection(ReproAdapter):
    def model(self, *args, **kwargs):
        parts = super().model(*args, **kwargs)
        parts.output_projection = None
        return parts


def test_a_missing_embedding_part_is_not_applicable_for_both_embedding_claims() -> None:
    assert audit("sec3.embedding.shared", NoProjection()).status == "not applicable"  # used to be "fail"
    torch_record = audit("sec3.embedding.shared", TorchTransformerAdapter())
    assert torch_record.status == "not applicable" and "output projection" in torch_record.why
    assert audit("sec3.embedding.scale", TorchTransformerAdapter()).status == "not applicable"


# -- post-norm sees swapped norms at their initial weights ---------------------------------------

class SwappedNorms(TorchTransformerAdapter):
    """torch's post-norm layer reported with its norms in the wrong order (both at 1 and 0)."""

    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        return EncoderLayerParts(parts.layer, parts.self_attention, parts.feed_forward, parts.norms[::-1])


def test_swapped_norms_are_seen_at_initial_weights() -> None:
    record = audit("sec3.sublayer.post-norm", SwappedNorms())
    assert record.status == "fail", record.why  # used to pass: two LayerNorms at (1, 0) are one function
    assert audit("sec3.sublayer.post-norm", TorchTransformerAdapter()).status == "pass"
    parts = SwappedNorms().encoder_layer(64, 4, 128)
    assert all(float(p.detach().abs().sum()) in (0.0, 64.0) for n in parts.norms for p in n.parameters())


# -- bad adapter values are refused by the contract ------------------------------------------------

class Settings(Adapter):
    name = "settings"

    def __init__(self, value):
        self.value = value

    def hyperparameters(self):
        return {"dropout_base": self.value}


@pytest.mark.parametrize("value, message", [
    (None, "hyperparameters()['dropout_base'] is None; leave the key out"),
    ("0.1", "is the text '0.1'; give the number itself"),
    ((0.1,), "is the 1-tuple (0.1,); give the bare value or (value, where)"),
    (torch.tensor(0.1), "expected a number, a bool or a str"),
])
def test_bad_hyperparameter_values_are_errors_naming_the_method(value, message) -> None:
    record = audit("sec5.dropout.base", Settings(value))
    assert record.status == "error"
    assert "adapter method 'hyperparameters'" in record.why and "AdapterContractError" in record.why
    assert message in record.why
    assert audit("sec5.dropout.base", Settings((0.1, "a default"))).status == "pass"


def test_a_word_for_a_number_is_refused_by_the_claim() -> None:
    record = audit("sec5.dropout.base", Settings("high"))
    assert record.status == "error" and "the claim compares a number" in record.why


class MeanLoss(ReproAdapter):
    def loss(self, logits, target, pad_id, smoothing):
        return F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=smoothing)


def test_a_mean_loss_is_an_error_that_says_so() -> None:
    record = audit("sec5.label-smoothing.loss", MeanLoss())
    assert record.status == "error", record.why  # used to be "mass off the label 0.8197"
    assert "adapter method 'loss'" in record.why and "the mean over the tokens, not their sum" in record.why


def test_each_loss_path_is_held_to_the_contract() -> None:
    """A second form of the loss (``loss_paths``) that returns a mean is refused as ``loss`` is,
    naming the path."""

    class MeanDensePath(ReproAdapter):
        def loss_paths(self):
            return {**super().loss_paths(), "dense": MeanLoss().loss}

    record = audit("sec5.label-smoothing.loss", MeanDensePath())
    assert record.status == "error", record.why
    assert "loss_paths()['dense']" in record.why and "the mean over the tokens, not their sum" in record.why


def test_a_padding_id_outside_the_reserved_ids_is_refused() -> None:
    class HighPad(ReproAdapter):
        def model(self, *args, **kwargs):
            parts = super().model(*args, **kwargs)
            parts.pad_id = parts.vocab_size - 1
            return parts

    record = audit("sec3.embedding.shared", HighPad())
    assert record.status == "error" and "pad_id=" in record.why and "0-3" in record.why


# -- the step convention of learning_rate ----------------------------------------------------------

class SchedulerAfterOptimizer(ReproAdapter):
    """The Hugging Face Trainer's loop: update k runs at the schedule's value for step k - 1."""

    def learning_rate(self, step, d_model, warmup_steps):
        return eq3(step - 1, d_model, warmup_steps)


def test_a_first_update_at_rate_zero_is_reported_as_a_departure() -> None:
    schedule = audit("sec5.eq3.schedule", SchedulerAfterOptimizer())
    assert schedule.status == "fail" and "first update runs at rate 0" in schedule.why
    peak = audit("sec5.eq3.peak-step", SchedulerAfterOptimizer())
    assert peak.status == "fail" and peak.check.measured == 4001 and "step s-1" in peak.why
    assert audit("sec5.eq3.schedule", ReproAdapter()).status == "pass"


# -- Table 3 and the base dimensions through adapter.model() ---------------------------------------

class ReproThroughModel(ReproAdapter):
    """repro's model seen as any other implementation: no access to its presets."""

    has_repro_presets = False
    name = "repro through model()"


@pytest.mark.parametrize("claim_id", ["table3.params.base", "table3.params-diff.C-N2", "sec3.base.dimensions"])
def test_table3_and_base_dimensions_are_measured_through_model(claim_id) -> None:
    own = audit(claim_id, ReproAdapter())
    other = audit(claim_id, ReproThroughModel())
    assert other.status == own.status == "pass", other.why  # used to be "not applicable"
    assert other.check.measured == own.check.measured


def test_base_dimensions_read_off_the_forward_pass_catch_a_wrong_depth() -> None:
    class Shallow(ReproThroughModel):
        def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
            return super().model(vocab_size, d_model, n_heads, d_ff, n_layers - 1)

    record = audit("sec3.base.dimensions", Shallow())
    assert record.status == "fail" and record.check.measured["N_encoder"] == 5


def test_row_b_is_not_buildable_through_model() -> None:
    record = audit("table3.params.B-dk16", ReproThroughModel())
    assert record.status == "not applicable" and "d_k=16" in record.why
