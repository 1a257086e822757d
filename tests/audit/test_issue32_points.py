"""Issue 32: auditing other people's Transformers honestly. Each point is a constructed adapter
(or repro's own model with one change) on which the audit used to give a wrong or vacuous verdict,
and the mistakes the new measurements must still catch."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from repro.audit.adapter import Adapter, FeedForwardParts, absent
from repro.audit.audit import audit_claim, run_audit, summary
from repro.audit.repro_adapter import ReproAdapter
from repro.checks.vacuity import require_informative
from repro.claims import Inconclusive, Outcome, load_claims
from repro.model import Transformer
from repro.model.layers import SublayerConnection

CLAIMS = {c.id: c for c in load_claims()}
SINUSOID_CLAIMS = ("sec3.pe.equations", "sec3.pe.wavelengths", "sec3.pe.relative-linear", "sec3.pe.layout")


def audit(claim_id: str, adapter: Adapter):
    return audit_claim(CLAIMS[claim_id], adapter)


# -- absent is not "not exposed" -------------------------------------------------------------------

class NoPositions(ReproAdapter):
    """repro's model without positional encodings, saying so (as T5's adapter does)."""

    transformer_class = type("NoPositionsTransformer", (Transformer,), {
        "_embed": lambda self, tokens, embed, pos, offset=0: self.embed_dropout(embed(tokens))})

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "this model adds no positions")


class HidesPositions(ReproAdapter):
    """The same model, its adapter leaving positional_encoding out (not exposed)."""

    transformer_class = NoPositions.transformer_class

    def positional_encoding(self, length, d_model):
        return Adapter.positional_encoding(self, length, d_model)


def test_an_absent_part_fails_with_its_reason_and_a_part_not_exposed_is_not_applicable() -> None:
    for claim_id in SINUSOID_CLAIMS:
        record = audit(claim_id, NoPositions())
        assert record.status == Outcome.FAIL and record.check.measured == "absent", record.why
        assert record.why.startswith("absent: ") and "this model adds no positions" in record.why
        assert audit(claim_id, HidesPositions()).status == Outcome.NOT_APPLICABLE
    both = audit("sec3.pe.both-stacks", NoPositions())
    assert both.status == Outcome.FAIL and "absent" in both.why


def test_an_absent_model_part_fails_the_claims_that_call_it() -> None:
    class AbsentTables(ReproAdapter):
        def model(self, *args, **kwargs):
            parts = super().model(*args, **kwargs)
            parts.encoder_positions = absent("no table in the encoder")
            return parts

    record = audit("sec3.pe.both-stacks", AbsentTables())
    assert record.status == Outcome.FAIL and "no table in the encoder" in record.why


def test_per_stack_tables_of_the_model_are_what_both_stacks_compares_with() -> None:
    class OwnTables(ReproAdapter):
        """The model's own tables given per stack, the adapter's method left out."""

        def positional_encoding(self, length, d_model):
            return Adapter.positional_encoding(self, length, d_model)

        def model(self, *args, **kwargs):
            parts = super().model(*args, **kwargs)
            model = parts.module
            parts.encoder_positions = lambda n: model.src_pos(n, 0)
            parts.decoder_positions = lambda n: model.tgt_pos(n, 0) * 2  # not what the decoder adds
            return parts

    record = audit("sec3.pe.both-stacks", OwnTables())
    assert record.status == Outcome.FAIL and record.check.measured > 0.5, record.why  # the decoder's table is wrong
    assert "decoder" in record.why


# -- Eq. 2 without biases, and biases that are zeros -----------------------------------------------

class BiasFree(Adapter):
    name = "a feed-forward layer without biases"

    def feed_forward(self, d_model, d_ff):
        w_1, w_2 = torch.nn.Linear(d_model, d_ff, bias=False), torch.nn.Linear(d_ff, d_model, bias=False)
        return FeedForwardParts(lambda x: w_2(F.relu(w_1(x))), w_1.weight.T, None, w_2.weight.T, None)


class ZerosForMissingBiases(BiasFree):
    def feed_forward(self, d_model, d_ff):
        parts = super().feed_forward(d_model, d_ff)
        return FeedForwardParts(parts.module, parts.w_1, torch.zeros(d_ff), parts.w_2, torch.zeros(d_model))


def test_absent_biases_fail_eq2_with_the_rest_measured() -> None:
    record = audit("sec3.eq2.feed-forward", BiasFree())
    assert record.status == Outcome.FAIL and "absent: b_1, b_2" in record.why
    assert record.check.measured < 1e-5  # max(0, x W1) W2 holds
    assert audit("sec3.eq2.position-wise", BiasFree()).status == Outcome.PASS


def test_zeros_given_for_biases_the_layer_does_not_add_fail() -> None:
    record = audit("sec3.eq2.feed-forward", ZerosForMissingBiases())  # used to pass
    assert record.status == Outcome.FAIL and "are not biases the layer adds" in record.why


def test_a_layer_that_ignores_its_zero_initialised_bias_fails() -> None:
    class IgnoresBias(Adapter):
        name = "ignores b_1"

        def feed_forward(self, d_model, d_ff):
            w_1, w_2 = torch.nn.Linear(d_model, d_ff), torch.nn.Linear(d_ff, d_model)
            with torch.no_grad():
                w_1.bias.zero_()
            module = lambda x: w_2(F.relu(x @ w_1.weight.T))  # noqa: E731
            return FeedForwardParts(module, w_1.weight.T, w_1.bias, w_2.weight.T, w_2.bias)

    assert audit("sec3.eq2.feed-forward", IgnoresBias()).status == Outcome.FAIL
    zero_biases = FeedForwardParts  # repro's with biases set to 0 still passes (they are the layer's own)

    class ReproZeroBiases(ReproAdapter):
        def feed_forward(self, d_model, d_ff):
            parts = super().feed_forward(d_model, d_ff)
            with torch.no_grad():
                parts.b_1.zero_()
                parts.b_2.zero_()
            return zero_biases(parts.module, parts.w_1, parts.b_1, parts.w_2, parts.b_2)

    record = audit("sec3.eq2.feed-forward", ReproZeroBiases())
    assert record.status == Outcome.PASS and "zero biases given random values" in record.why


# -- the weighted sum only through calls the protocol defines ----------------------------------------

class SelfAttentionOnly(ReproAdapter):
    """multi_head_attention's module refuses anything but self-attention (as the protocol allows)."""

    def multi_head_attention(self, d_model, n_heads):
        module = super().multi_head_attention(d_model, n_heads)

        def call(q, k, v):
            if not (k is q and v is q):
                raise AssertionError("called with keys or values other than the query")
            return module(q, k, v)

        return call

    def multi_head_cross_attention(self, d_model, n_heads):
        return Adapter.multi_head_cross_attention(self, d_model, n_heads)


def test_weighted_sum_never_calls_self_attention_with_other_keys_and_values() -> None:
    record = audit("sec3.attention.weighted-sum", SelfAttentionOnly())
    assert record.status == Outcome.PASS and "attention:" in record.why and "cross" not in record.why, record.why


def test_weighted_sum_without_any_call_taking_values_apart_is_not_applicable() -> None:
    class MultiHeadOnly(Adapter):
        name = "self-attention module only"

        def multi_head_attention(self, d_model, n_heads):
            return ReproAdapter().multi_head_attention(d_model, n_heads)

    record = audit("sec3.attention.weighted-sum", MultiHeadOnly())
    assert record.status == Outcome.NOT_APPLICABLE and "multi_head_cross_attention" in record.why


def test_weighted_sum_catches_values_that_are_not_summed_linearly() -> None:
    class TanhValues(ReproAdapter):
        def attention(self, q, k, v, mask):
            return super().attention(q, k, torch.tanh(v), mask)

    assert audit("sec3.attention.weighted-sum", TanhValues()).status == Outcome.FAIL


# -- dropout placement measured, in either layout -------------------------------------------------

def pre_norm_with(forward) -> ReproAdapter:
    """repro's pre-norm option with each residual connection computed by ``forward(m, x, sub)``."""

    class Model(Transformer):
        def __init__(self, cfg):
            super().__init__(cfg)
            for module in self.modules():
                if isinstance(module, SublayerConnection):
                    module.forward = lambda x, sub, m=module: forward(m, x, sub)

    adapter = ReproAdapter(norm_first=True)
    adapter.transformer_class = Model
    return adapter


PRE_NORM_MISTAKES = {
    "no dropout": lambda m, x, sub: x + sub(m.norm(x)),
    "dropout on the sum": lambda m, x, sub: m.dropout(x + sub(m.norm(x))),
    "dropout on the sub-layer's input": lambda m, x, sub: x + sub(m.dropout(m.norm(x))),
    "kept elements not rescaled": lambda m, x, sub: x + m.dropout(sub(m.norm(x))) * (1 - m.dropout.p),
}


def test_residual_dropout_of_a_pre_norm_layer_is_found_and_measured() -> None:
    record = audit("sec5.dropout.residual-placement", ReproAdapter(norm_first=True))  # used to read 1.000 / 0.000 zeroed
    assert record.status == Outcome.PASS and "layers measured pre-norm" in record.why, record.why
    assert "layers measured post-norm" in audit("sec5.dropout.residual-placement", ReproAdapter()).why


@pytest.mark.parametrize("mistake", PRE_NORM_MISTAKES)
def test_residual_dropout_mistakes_in_a_pre_norm_layer_fail(mistake: str) -> None:
    record = audit("sec5.dropout.residual-placement", pre_norm_with(PRE_NORM_MISTAKES[mistake]))
    assert record.status == Outcome.FAIL, record.why


def test_a_layout_neither_post_nor_pre_norm_is_not_guessed() -> None:
    adapter = pre_norm_with(lambda m, x, sub: x + m.norm(m.dropout(sub(x))))  # the norm on the branch only
    record = audit("sec5.dropout.residual-placement", adapter)
    assert record.status == Outcome.NOT_APPLICABLE and "neither after each residual sum" in record.why


def test_embedding_dropout_without_positions_is_measured_as_it_is() -> None:
    record = audit("sec5.dropout.embedding-placement", NoPositions())  # used to add the paper's sinusoids
    assert record.status == Outcome.PASS and "the model adds no positions" in record.why, record.why

    class NoDropout(NoPositions):
        transformer_class = type("NoDropout", (NoPositions.transformer_class,), {
            "_embed": lambda self, tokens, embed, pos, offset=0: embed(tokens)})

    assert audit("sec5.dropout.embedding-placement", NoDropout()).status == Outcome.FAIL


def test_embedding_dropout_without_a_module_needs_a_declared_table() -> None:
    class NoModule(ReproAdapter):
        def training_model(self, *args, **kwargs):
            parts = super().training_model(*args, **kwargs)
            parts.module = None
            return parts

    class NoModuleNoTable(NoModule):
        def positional_encoding(self, length, d_model):
            return Adapter.positional_encoding(self, length, d_model)

    assert audit("sec5.dropout.embedding-placement", NoModule()).status == Outcome.PASS
    record = audit("sec5.dropout.embedding-placement", NoModuleNoTable())
    assert record.status == Outcome.NOT_APPLICABLE and "positional table" in record.why


# -- no vacuous pass -----------------------------------------------------------------------------

def test_the_helper_refuses_outputs_that_carry_nothing() -> None:
    for outputs in ([], [[], [], []], [[2], [2, 2]], [[5, 6], [5, 6], [5, 6]]):
        with pytest.raises(Inconclusive):
            require_informative(outputs, "outputs", special=range(4))
    require_informative([[5, 6], [5, 7]], "outputs")
    for tensor in (torch.zeros(2, 3, 4), torch.ones(2, 3, 4) * 0.5, torch.randn(1, 4).expand(5, 4), torch.empty(0, 3)):
        with pytest.raises(Inconclusive):
            require_informative(tensor, "logits")
    require_informative(torch.randn(2, 3, 4), "logits")
    require_informative(torch.full((2, 3), float("nan")), "logits")  # NaN is the comparison's to fail, not vacuous


class EndsAtOnce(ReproAdapter):
    """A search whose outputs are empty whatever the mode (random-init BART's, through generate())."""

    def beam_search(self, parts, src, **settings):
        return [[] for _ in range(src.size(0))]


class SameForEverySource(ReproAdapter):
    def beam_search(self, parts, src, **settings):
        return [[5, 6, 7] for _ in range(src.size(0))]


class DropoutOnInSearch(ReproAdapter):
    """A search that keeps dropout on (``generate()`` on a model left in train mode)."""

    def beam_search(self, parts, src, **settings):
        from repro.decode.beam import _search

        return [h.tokens for h in _search(parts.module, src, settings["beam_size"], settings["alpha"],
                                          settings["max_len_offset"], True, "early")]


def test_decoding_with_dropout_off_is_inconclusive_on_outputs_that_carry_nothing() -> None:
    for adapter in (EndsAtOnce(), SameForEverySource()):
        record = audit("sec6.decoding.dropout-off", adapter)  # used to pass: 0 of 6 differ
        assert record.status == Outcome.INCONCLUSIVE, record.why
    assert audit("sec6.decoding.dropout-off", DropoutOnInSearch()).status == Outcome.FAIL
    assert audit("sec6.decoding.dropout-off", ReproAdapter()).status == Outcome.PASS


def test_invariant_comparisons_of_a_constant_model_are_inconclusive() -> None:
    class Constant(ReproAdapter):
        def model_paths(self, *args, **kwargs):
            paths = super().model_paths(*args, **kwargs)
            for parts in paths.values():
                parts.forward = lambda src, tgt, v=parts.vocab_size: torch.zeros(*tgt.shape, v)
                parts.incremental = lambda src, tgt, chunks, v=parts.vocab_size: torch.zeros(*tgt.shape, v)
            return paths

    for claim_id in ("impl.padding-invariance", "impl.incremental-decoding", "sec3.decoder.causal-mask"):
        assert audit(claim_id, Constant()).status == Outcome.INCONCLUSIVE, claim_id

    class ZeroAttention(ReproAdapter):
        def attention(self, q, k, v, mask):
            return torch.zeros(*q.shape[:-1], v.shape[-1])

        def multi_head_cross_attention(self, d_model, n_heads):
            return lambda q, k, v: torch.zeros_like(q)

    assert audit("sec3.attention.weighted-sum", ZeroAttention()).status == Outcome.INCONCLUSIVE


def test_an_inconclusive_claim_is_not_counted_as_passed() -> None:
    records = run_audit(EndsAtOnce(), [CLAIMS["sec6.decoding.dropout-off"]])
    assert records[0].status == Outcome.INCONCLUSIVE and records[0].status.broken  # exit code 1, a failed pytest item
    assert summary(records) == "1 inconclusive"


# -- contract failures an adapter's author can act on ------------------------------------------------

class AddsBooleanMask(ReproAdapter):
    """Hugging Face's eager attention given the protocol's boolean mask: it adds it to the scores."""

    def attention(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + mask
        return scores.softmax(-1) @ v


class TrueIsMasked(ReproAdapter):
    def attention(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)


def test_a_mask_convention_mistake_is_an_error_that_says_what_to_change() -> None:
    record = audit("sec3.eq1.scaled-dot-product", AddsBooleanMask())  # used to be "fail, 4.57"
    assert record.status == Outcome.ERROR
    assert "adds the mask to the scores instead of masking" in record.why and "max error" in record.why
    record = audit("sec3.eq1.scaled-dot-product", TrueIsMasked())
    assert record.status == Outcome.ERROR and "reads True in the mask as 'masked'" in record.why
    every = audit("sec3.eq1.every-path", AddsBooleanMask())
    assert every.status == Outcome.ERROR and "attention_paths()['reference']" in every.why


def test_an_attention_that_ignores_the_mask_or_scales_late_stays_a_departure() -> None:
    class Ignores(ReproAdapter):
        def attention(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v)

    assert audit("sec3.eq1.scaled-dot-product", Ignores()).status == Outcome.FAIL
    from repro.audit.variants import scale_after_softmax

    assert audit("sec3.eq1.scaled-dot-product", scale_after_softmax()).status == Outcome.FAIL
