"""Issue 43, the eighth round of unseen families (:mod:`tests.audit.handwritten.round8`): DeepNet's
DeepNorm, LLaMA blocks (RMSNorm, SwiGLU) in an encoder-decoder, ALiBi, multi-query attention through
``torch.bmm`` on heads folded into the query rows, Reformer's shared-QK attention and fairseq's
top-1 mixture of experts. Each wrong verdict the audit gave them, reproduced on the family itself,
with cases beside them that must still fail; and the verdicts of EXPECTED.md that distinguish the
families, kept."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from repro.checks.dropout import residual_weight
from repro.checks.positional import _position_elsewhere
from tests.audit.handwritten.round7 import shaw_relative
from tests.audit.handwritten.round8 import alibi, deepnorm, multi_query, rmsnorm_swiglu, shared_qk, switch_moe
from tests.audit.test_issue43_unseen_round7 import FAIL, PASS, dimensions, verdict

# -- a residual weighted alpha x + dropout(Sublayer(x)) (DeepNorm) ---------------------------------

def test_dropout_before_an_up_weighted_residual_sum_is_found() -> None:
    # "0.000 zeroed" at every sub-layer: what was added was read as received - x, not received - alpha x
    record = verdict("sec5.dropout.residual-placement", deepnorm.adapter())
    assert record.status == PASS, record.why
    assert "residual x1.57" in record.why


class DeepNormWithoutDropout(deepnorm.DeepNormAdapter):
    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return super().training_model(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0)


def test_an_up_weighted_residual_without_dropout_still_fails() -> None:
    assert verdict("sec5.dropout.residual-placement", DeepNormWithoutDropout()).status == FAIL


def test_the_residual_weight_is_read_where_dropout_zeroed_the_sublayer() -> None:
    gen = torch.Generator().manual_seed(0)
    x, f = torch.randn(4000, generator=gen), torch.randn(4000, generator=gen)
    kept = torch.rand(4000, generator=gen) > 0.3
    assert residual_weight(2.07 * x + kept * f / 0.7, x) == pytest.approx(2.07, rel=1e-5)
    assert residual_weight(x + kept * f / 0.7, x) == 1.0
    assert residual_weight(kept * x / 0.7 + f, x) == 1.0                # dropout on the stream, not the sub-layer
    assert residual_weight(kept * (2.07 * x + f) / 0.7, x) == 1.0       # dropout on the sum: no positive weight


# -- multi-query attention: heads folded into the query rows of one bmm -----------------------------

def test_footnote4_reads_queries_and_keys_of_heads_folded_into_the_rows() -> None:
    # "forms no q.k scores ... a kernelised attention": the absent-departure fail
    record = verdict("sec3.footnote4.dot-product-variance", multi_query.adapter())
    assert record.status == PASS, record.why


def test_the_census_reads_h_heads_folded_into_the_rows() -> None:
    measured, seen = dimensions(multi_query.adapter())   # read as h=1, d_k=56 (8 heads x 7 positions)
    assert (measured["h"], measured["d_k"], measured["d_v"]) == (4, 64, 64), seen


class OneWideMultiQueryHead(multi_query.MultiQueryAdapter):
    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return super().model(vocab_size, d_model, 1, d_ff, n_layers)


def test_one_wide_multi_query_head_still_reads_h_1() -> None:
    measured, seen = dimensions(OneWideMultiQueryHead())
    assert (measured["h"], measured["d_k"]) == (1, 256), seen


# -- a batch whose sentences share an expert capacity (mixture of experts) --------------------------

def test_the_causal_mask_of_a_batch_coupled_by_expert_capacity_is_measured_per_sentence() -> None:
    # inconclusive: "the other sentence changed" moved the logits as much as the perturbations did
    record = verdict("sec3.decoder.causal-mask", switch_moe.adapter())
    assert record.status == PASS, record.why
    assert "each sentence perturbed alone" in record.why


class LeakyMoE(switch_moe.SwitchMoEAdapter):
    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        parts = super().model(vocab_size, d_model, n_heads, d_ff, n_layers)
        for layer in parts.module.decoder:
            layer.attend = lambda x, layer=layer: layer.self_attn(x, x, x, need_weights=False)[0]   # no future mask
        return parts


def test_a_leaky_decoder_behind_expert_capacity_still_fails() -> None:
    assert verdict("sec3.decoder.causal-mask", LeakyMoE()).status == FAIL


def test_an_expert_capacity_is_not_position_wise() -> None:
    # random positions spread over 8 experts never overflowed ceil(0.25 tokens): "pass"
    record = verdict("sec3.eq2.position-wise", switch_moe.adapter())
    assert record.status == FAIL, record.why
    assert "one vector at each of 80 positions" in record.why


# -- an attention function that keeps a position from its own value (shared-QK) ---------------------

def test_a_suppressed_diagonal_is_a_position_the_encoder_cannot_attend_to() -> None:
    # the layers' outputs move through the query and the residual: "0 blind pairs", pass
    record = verdict("sec3.encoder.all-positions", shared_qk.adapter())
    assert record.status == FAIL, record.why
    assert "shared-QK self-attention 16" in record.why


def test_a_function_that_moves_from_call_to_call_is_not_counted_blind() -> None:
    # the Shaw adapter's relation-aware path draws its tables at each call
    record = verdict("sec3.encoder.all-positions", shaw_relative.adapter())
    assert record.status == PASS, record.why


# -- a declared position bias with the causal mask folded in (ALiBi's decoder) ----------------------

def test_a_bias_with_its_causal_mask_folded_in_is_read_as_relative() -> None:
    # "decoder: not relative (shifted by one: nan)": -inf - -inf above the diagonal
    record = verdict("sec3.pe.both-stacks", alibi.adapter())
    assert "encoder: relative (a function of j - i alone), decoder: relative" in record.why, record.why


def test_a_mask_that_does_not_shift_with_the_positions_is_not_relative() -> None:
    def bias(n: int) -> torch.Tensor:
        b = alibi.alibi_bias(4, n, causal=True)
        b[..., 0] = float("-inf")   # the first key hidden from every query: a function of j, not of j - i
        return b

    parts = SimpleNamespace(encoder_attention_bias=None, decoder_attention_bias=bias)
    assert "decoder: not relative (shifted by one: inf)" in _position_elsewhere(parts, 6)
    parts.decoder_attention_bias = lambda n: torch.full((4, n, n), float("nan"))
    assert "not relative" in _position_elsewhere(parts, 6)


# -- the verdicts that tell the families apart (EXPECTED.md) ----------------------------------------

FAMILIES = {"deepnorm": deepnorm, "rmsnorm_swiglu": rmsnorm_swiglu, "alibi": alibi, "multi_query": multi_query,
            "shared_qk": shared_qk, "switch_moe": switch_moe}
KEPT = {
    "sec3.sublayer.post-norm": {"deepnorm": FAIL, "alibi": PASS},
    "sec3.sublayer.layer-norm": {"rmsnorm_swiglu": FAIL},
    "sec3.multihead.positions-kept": {"alibi": FAIL},
    "sec3.multihead.cost": {"multi_query": FAIL},
    "sec3.eq1.every-path": {"shared_qk": FAIL},
    "sec3.eq2.feed-forward": {"switch_moe": FAIL, "rmsnorm_swiglu": FAIL},
    "sec3.eq2.position-wise": {"alibi": PASS, "rmsnorm_swiglu": PASS},
    "sec3.encoder.all-positions": {"alibi": PASS},
    "impl.padding-invariance": {"switch_moe": FAIL, "alibi": PASS},
    "sec3.pe.both-stacks": {"rmsnorm_swiglu": PASS, "alibi": FAIL},
}


@pytest.mark.parametrize("claim_id,name", [(c, f) for c, fams in KEPT.items() for f in fams])
def test_expected_verdicts_kept(claim_id: str, name: str) -> None:
    record = verdict(claim_id, FAMILIES[name].adapter())
    assert record.status == KEPT[claim_id][name], record.why
