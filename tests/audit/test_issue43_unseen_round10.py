"""Issue 43, the tenth round of unseen families (:mod:`tests.audit.handwritten.round10`): the
paper's model written channels-first with heads as a leading dimension, talking heads, Swin V2's
cosine attention with res-post-norm, sigmoid attention and the dense Synthesizer. Each wrong verdict
the audit gave them, reproduced on the family itself, with cases beside them that must still fail;
and the verdicts of EXPECTED.md that distinguish the families, kept."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from repro.audit.adapter import Adapter
from repro.checks.placement import POST_NORM, PRE_NORM, norm_placement, trace_layer
from tests.audit.handwritten.round9 import loop_heads
from tests.audit.handwritten.round10 import (channels_first, cosine_attention, sigmoid_attention, synthesizer,
                                             talking_heads)
from tests.audit.test_issue43_unseen_round7 import ERROR, FAIL, PASS, dimensions, verdict


# -- channels first, heads leading: Eq. 1 inside the model ------------------------------------------

class ScaledTwice(channels_first.ChannelsFirstAdapter):
    """The channels-first model with its queries scaled by d_k^-0.5 in their projection, before SDPA
    scales the scores again (fairseq's scaling and the paper's at once)."""

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        parts = super().model(vocab_size, d_model, n_heads, d_ff, n_layers)
        for block in parts.module.encoder:
            block.attn.to_q = nn.Sequential(block.attn.to_q, Scale((d_model // n_heads) ** -0.5))
        return parts


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: Tensor) -> Tensor:
        return x * self.factor


def test_eq1_in_the_model_reads_conv_projections_and_heads_leading() -> None:
    # "no product over the positions is a multiple of h x d_k wide" (not applicable)
    record = verdict("sec3.eq1.in-model", channels_first.adapter())
    assert record.status == PASS and "heads leading" in record.why, record.why


def test_a_scale_counted_twice_in_a_channels_first_model_still_fails() -> None:
    record = verdict("sec3.eq1.in-model", ScaledTwice())
    assert record.status == FAIL and "heads leading" in record.why, record.why


# -- heads one after another (round 9's loop_heads, on the claim added after it) -------------------

class LoopScaledTwice(loop_heads.LoopMultiHead):
    def forward(self, q_in, k_in, v_in, mask=None):
        heads = []
        for i in range(self.h):
            q = torch.einsum("bnd,dk->bnk", q_in, self.w_q[i]) * self.w_q.size(-1) ** -0.5
            k, v = (torch.einsum("bnd,dk->bnk", t, w[i]) for t, w in ((k_in, self.w_k), (v_in, self.w_v)))
            heads.append(loop_heads.attention_head(q, k, v, mask))
        return torch.stack(heads, dim=2).flatten(2) @ self.w_o + self.b_o


class LoopHeadsScaledTwice(loop_heads.LoopHeadsAdapter):
    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        parts = super().model(vocab_size, d_model, n_heads, d_ff, n_layers)
        for layer in parts.module.enc:
            layer.attn.__class__ = LoopScaledTwice
        return parts


@pytest.mark.parametrize("target,status", [(loop_heads.adapter(), PASS), (LoopHeadsScaledTwice(), FAIL)])
def test_eq1_in_the_model_fits_heads_computed_one_after_another(target, status) -> None:
    # "shape '[2, 8, 7, 7]' is invalid for input of size 98" (an error): one head's scores read as all h
    record = verdict("sec3.eq1.in-model", target)
    assert record.status == status and "8 heads one after another" in record.why, record.why


# -- channels-first norms: given wrapped, traced by their parameters --------------------------------

@pytest.mark.parametrize("claim_id", ["sec3.sublayer.post-norm", "sec3.sublayer.post-norm-decoder",
                                      "sec3.sublayer.layer-norm", "sec5.dropout.residual-placement"])
def test_channels_first_norms_given_wrapped_are_measured(claim_id: str) -> None:
    # residual-placement: "the layer never called its norm(s)" (not applicable)
    assert verdict(claim_id, channels_first.adapter()).status == PASS


class RawNorms(channels_first.ChannelsFirstAdapter):
    """The norms given as the layer holds them, channels first."""

    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        parts.norms = tuple(norm.norm for norm in parts.norms)
        return parts


def test_a_norm_that_cannot_take_batch_first_tensors_is_a_contract_error() -> None:
    # a RuntimeError from inside LayerNorm ("expected input with shape [*, 64]"), naming nothing to change
    record = verdict("sec3.sublayer.post-norm", RawNorms())
    assert record.status == ERROR and "norms[0]" in record.why and "transposes around it" in record.why, record.why


class PreNormBlock(channels_first.EncoderBlock):
    def forward(self, x: Tensor, key_padding: Tensor | None = None) -> Tensor:
        x = x + self.drop(self.attn(*(self.ln_attn(x),) * 3, key_padding))
        return x + self.drop(self.ff(self.ln_ff(x)))


@pytest.mark.parametrize("block_class,placement", [(channels_first.EncoderBlock, POST_NORM), (PreNormBlock, PRE_NORM)])
def test_the_placement_of_wrapped_norms_is_read(block_class, placement) -> None:
    parts = channels_first._encoder_parts(block_class(16, 2, 32, 0.0).eval())
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    assert norm_placement(trace_layer(lambda: parts.layer(x), x, parts.norms), parts.norms).kind == placement


# -- the softmax's saturation, read off the softmax the attention runs -----------------------------

class AttentionOnly(Adapter):
    def __init__(self, attend, name: str) -> None:
        self.attend, self.name = attend, name

    def attention(self, query, key, value, mask):
        return self.attend(query, key, value)


def _mix(h: int) -> Tensor:
    return torch.randn(h, h, generator=torch.Generator().manual_seed(h)) * h ** -0.5


def weights_mixed_after(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Eq. 1's softmax, its weights mixed across the heads afterwards (talking heads' second mixing)."""
    p = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
    return torch.einsum("bhnm,hg->bgnm", p, _mix(q.size(1))) @ v


def unscaled(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return (q @ k.transpose(-2, -1)).softmax(-1) @ v


@pytest.mark.parametrize("attend,status", [(weights_mixed_after, PASS), (unscaled, FAIL)])
def test_saturation_is_read_off_the_softmax_that_runs(attend, status) -> None:
    # weights_mixed_after failed: "the unscaled softmax's gradient does not fall as d_k grows" (the mixed weights)
    record = verdict("sec3.2.1.softmax-saturation", AttentionOnly(attend, attend.__name__))
    assert record.status == status, record.why


# -- a self-attention without queries and keys: the heads of the cross-attention ------------------

def test_the_heads_of_a_synthesizer_are_read_off_its_cross_attention() -> None:
    # "no self-attention over as many queries and keys as its stack's length" (inconclusive)
    measured, seen = dimensions(synthesizer.adapter(), d_model=128, heads=4, d_ff=256)
    assert (measured["h"], measured["d_k"], measured["d_v"]) == (4, 32, 32), seen
    assert "0 self-attentions read" in seen and "read off the cross-attentions" in seen, seen


# -- the verdicts that tell the families apart (EXPECTED.md) ----------------------------------------

FAMILIES = {"channels_first": channels_first, "talking_heads": talking_heads, "cosine_attention": cosine_attention,
            "sigmoid_attention": sigmoid_attention, "synthesizer": synthesizer}
KEPT = {
    "sec3.eq1.in-model": {"talking_heads": FAIL, "cosine_attention": FAIL, "sigmoid_attention": FAIL,
                          "synthesizer": FAIL},
    "sec3.eq1.scaled-dot-product": {"channels_first": PASS, "talking_heads": FAIL, "cosine_attention": FAIL,
                                    "sigmoid_attention": FAIL},
    "sec3.2.1.softmax-saturation": {"channels_first": PASS, "cosine_attention": FAIL, "sigmoid_attention": FAIL},
    "sec3.multihead.positions-kept": {"channels_first": PASS, "synthesizer": FAIL},
    "impl.padding-invariance": {"channels_first": PASS, "sigmoid_attention": FAIL},
    "sec3.sublayer.post-norm": {"cosine_attention": FAIL, "talking_heads": PASS},
    "sec3.decoder.causal-mask": {"channels_first": PASS},
}


@pytest.mark.parametrize("claim_id,name", [(c, f) for c, fams in KEPT.items() for f in fams])
def test_expected_verdicts_kept(claim_id: str, name: str) -> None:
    record = verdict(claim_id, FAMILIES[name].adapter())
    assert record.status == KEPT[claim_id][name], record.why
