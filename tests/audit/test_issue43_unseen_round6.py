"""Issue 43, the sixth round of unseen families (:mod:`tests.audit.handwritten.round6`): a
sequence-first model, a functional model over a flat ParameterDict, per-head projections, weights
shared across depth, a T5-style and a bert2bert model. Each wrong verdict the audit gave them,
reproduced on the family itself, with cases beside them that must still fail; and the verdicts of
EXPECTED.md that distinguish the families, kept."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from torch import nn

from repro.audit.adapter import DecoderLayerParts, EncoderLayerParts
from repro.audit.audit import audit_claim
from repro.claims import load_claims
from repro.claims.outcome import Outcome
from tests.audit.handwritten.round6 import functional, per_head, seq_first, t5_style, universal

CLAIMS = {c.id: c for c in load_claims()}
PASS, FAIL, NA, ERROR = Outcome.PASS, Outcome.FAIL, Outcome.NOT_APPLICABLE, Outcome.ERROR


def verdict(claim_id: str, adapter):
    return audit_claim(CLAIMS[claim_id], adapter, 0)


# -- functional: norms given as functions over a flat ParameterDict --------------------------------

def test_norm_functions_over_a_parameter_dict_are_perturbed_for_post_norm() -> None:
    # partial(norm, params, "layer/mlp_norm"): it read "not applicable" (no torch modules to perturb)
    record = verdict("sec3.sublayer.post-norm", functional.adapter())
    assert record.status == PASS and "norm weights and biases perturbed (4 tensors)" in record.why, record.why


def test_norm_functions_are_fitted_as_a_gain_and_a_bias() -> None:
    record = verdict("sec3.sublayer.layer-norm", functional.adapter())   # it read "not applicable"
    assert record.status == PASS and "each norm's own gain and bias" in record.why, record.why


def _pre_norm_block(params, prefix, x, bias, cfg, is_training):
    y = functional.multi_head_attention(params, f"{prefix}/self_attention",
                                        functional.norm(params, f"{prefix}/self_attention_norm", x),
                                        functional.norm(params, f"{prefix}/self_attention_norm", x), bias, cfg.heads)
    x = x + functional.dropout(y, cfg.dropout, is_training)
    h = functional.norm(params, f"{prefix}/mlp_norm", x)
    return x + functional.dropout(functional.mlp(params, f"{prefix}/mlp", h, cfg.dropout, is_training), cfg.dropout,
                                  is_training)


class PreNormFunctional(functional.FunctionalAdapter):
    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        params, cfg = parts.norms[0].args[0], functional.Config(8, d_model, n_heads, d_ff, 0, 0.0)
        return EncoderLayerParts(layer=lambda x: _pre_norm_block(params, "layer", x, None, cfg, False),
                                 self_attention=parts.self_attention, feed_forward=parts.feed_forward, norms=parts.norms)


def test_a_pre_norm_functional_layer_still_fails_post_norm() -> None:
    record = verdict("sec3.sublayer.post-norm", PreNormFunctional())
    assert record.status == FAIL and record.check.measured > 0.1, record.why


class SwappedNorms(functional.FunctionalAdapter):
    """The norm functions given in the other order: at their initial 1 and 0 nothing would show."""

    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        return EncoderLayerParts(parts.layer, parts.self_attention, parts.feed_forward, parts.norms[::-1])


def test_norm_functions_given_in_the_wrong_order_fail() -> None:
    record = verdict("sec3.sublayer.post-norm", SwappedNorms())
    assert record.status == FAIL, record.why


class RMSFunctional(functional.FunctionalAdapter):
    """The norm functions without the mean: an RMS norm written out over the same dict."""

    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        return dataclasses_replace_norms(parts, _rms)

    def decoder_layer(self, d_model, n_heads, d_ff):
        parts = super().decoder_layer(d_model, n_heads, d_ff)
        return dataclasses_replace_norms(parts, _rms)


def _rms(params, name, x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * params[f"{name}/scale"] + params[f"{name}/offset"]


def dataclasses_replace_norms(parts, fn):
    return dataclasses.replace(parts, norms=tuple(functools.partial(fn, *n.args) for n in parts.norms))


def test_norm_functions_that_are_no_layer_norm_still_fail() -> None:
    record = verdict("sec3.sublayer.layer-norm", RMSFunctional())
    assert record.status == FAIL, record.why


@pytest.mark.slow
def test_residual_dropout_is_found_through_norm_functions() -> None:
    # the norms' inputs cannot be hooked: it read "not applicable"
    record = verdict("sec5.dropout.residual-placement", functional.adapter())
    assert record.status == PASS, record.why


class NoResidualDropout(functional.FunctionalAdapter):
    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        parts = super().training_model(vocab_size, d_model, n_heads, d_ff, n_layers, dropout)
        original = functional.dropout
        for layers in (parts.encoder_layers, parts.decoder_layers):
            for layer in layers:
                layer_call = layer.layer

                def without(*args, call=layer_call):
                    functional.dropout = lambda x, rate, is_training: x   # the residual dropout switched off ...
                    try:
                        return call(*args)
                    finally:
                        functional.dropout = original
                layer.layer = without
        return parts


@pytest.mark.slow
def test_a_functional_layer_without_residual_dropout_still_fails() -> None:
    record = verdict("sec5.dropout.residual-placement", NoResidualDropout())
    assert record.status == FAIL, record.why


# -- per-head projections: heads computed one after another -----------------------------------------

def test_per_head_projections_read_as_h_heads() -> None:
    # eight (batch, n, 64) @ (batch, 64, n) products per attention: it read h=1, and 48 self-attentions
    for adapter in (per_head.adapter(), universal.adapter()):
        record = verdict("sec3.base.dimensions", adapter)
        assert record.status == PASS and "h=8, d_k=64, d_v=64" in record.why, (adapter.name, record.why)


class OneWideHead(per_head.PerHeadAdapter):
    """Per-head modules, but one head of d_model whatever h is asked for."""

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return super().model(vocab_size, d_model, 1, d_ff, n_layers)


def test_one_wide_head_still_reads_h_1() -> None:
    record = verdict("sec3.base.dimensions", OneWideHead())
    assert record.status == FAIL and "h=1, d_k=512" in record.why, record.why


# -- the contract: a sequence-first module given batch-first tensors -------------------------------

class ForgotTheTransposes(seq_first.SeqFirstAdapter):
    """nn.MultiheadAttention(batch_first=False) and the (seq, batch, d) layer handed over as they are."""

    def multi_head_attention(self, d_model, n_heads):
        mha = nn.MultiheadAttention(d_model, n_heads).eval()
        return lambda q, k, v: mha(q, k, v)[0]

    multi_head_cross_attention = multi_head_attention

    def encoder_layer(self, d_model, n_heads, d_ff):
        layer = seq_first.EncoderLayer(d_model, n_heads, d_ff, 0.0).eval()
        return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x, x)[0],
                                 feed_forward=layer.ff, norms=(layer.norm1, layer.norm2))


@pytest.mark.parametrize("claim_id", ["sec3.multihead.cost", "sec3.attention.weighted-sum", "sec3.sublayer.post-norm"])
def test_a_sequence_first_module_is_an_error_saying_so(claim_id: str) -> None:
    # the cost read "a kernel it cannot count", the weighted sum a reshape error; post-norm passed
    record = verdict(claim_id, ForgotTheTransposes())
    assert record.status == ERROR and "reads the first dimension as the sequence" in record.why, record.why


def test_the_same_modules_transposed_pass() -> None:
    for claim_id in ("sec3.multihead.cost", "sec3.attention.weighted-sum", "sec3.sublayer.post-norm"):
        record = verdict(claim_id, seq_first.adapter())
        assert record.status == PASS, (claim_id, record.why)


# -- the verdicts that tell the families apart (EXPECTED.md) ----------------------------------------

KEPT = {
    "sec3.eq1.scaled-dot-product": {"seq_first": PASS, "functional": PASS, "t5_style": FAIL, "bert2bert": PASS},
    "sec3.decoder.causal-mask": {"seq_first": PASS, "functional": PASS, "t5_style": PASS, "bert2bert": PASS},
    "sec3.sublayer.post-norm-decoder": {"functional": PASS, "t5_style": FAIL, "bert2bert": PASS},
    "sec3.eq2.feed-forward": {"functional": PASS, "t5_style": FAIL, "bert2bert": FAIL},
    "sec3.pe.layout": {"seq_first": PASS, "functional": FAIL, "t5_style": FAIL, "bert2bert": FAIL},
    "sec3.embedding.shared": {"functional": PASS, "t5_style": PASS, "bert2bert": FAIL},
    "sec3.layers.distinct-parameters": {"per_head": PASS, "universal": FAIL},
    "impl.padding-invariance": {"seq_first": PASS, "functional": PASS, "bert2bert": PASS},
}
FAMILIES = {"seq_first": seq_first, "functional": functional, "per_head": per_head, "universal": universal,
            "t5_style": t5_style}


def family(name: str):
    """The family's module; bert2bert trains with the Hugging Face Trainer's defaults (the [zoo] extra)."""
    if name == "bert2bert":
        pytest.importorskip("transformers", reason="the [zoo] extra is not installed (pip install -e .[zoo])")
        from tests.audit.handwritten.round6 import bert2bert
        return bert2bert
    return FAMILIES[name]


@pytest.mark.parametrize("claim_id,name", [(c, f) for c, fams in KEPT.items() for f in fams])
def test_expected_verdicts_kept(claim_id: str, name: str) -> None:
    record = verdict(claim_id, family(name).adapter())
    assert record.status == KEPT[claim_id][name], record.why


class ForgotTheDecoderTransposes(seq_first.SeqFirstAdapter):
    """The (seq, batch, d) decoder layer handed over as it is (left alone at an earlier stop: the
    sequence-first probe covered the encoder layer and the attention modules only)."""

    def decoder_layer(self, d_model, n_heads, d_ff):
        layer = seq_first.DecoderLayer(d_model, n_heads, d_ff, 0.0).eval()
        return DecoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x, x)[0],
                                 cross_attention=lambda x, m: layer.multihead_attn(x, m, m)[0],
                                 feed_forward=layer.ff, norms=(layer.norm1, layer.norm2, layer.norm3))


@pytest.mark.parametrize("claim_id", ["sec3.sublayer.post-norm-decoder", "sec3.decoder.encoder-decoder-attention"])
def test_a_sequence_first_decoder_layer_is_an_error_saying_so(claim_id: str) -> None:
    record = verdict(claim_id, ForgotTheDecoderTransposes())
    assert record.status == ERROR and "DecoderLayerParts" in record.why, record.why
    assert "reads the first dimension as the sequence" in record.why, record.why
    assert verdict(claim_id, seq_first.adapter()).status == PASS
