"""Issue 43, the seventh round of unseen families (:mod:`tests.audit.handwritten.round7`): fairseq's
decoding path, a linear (kernelised) attention, convolutional feed-forward layers, Shaw et al.'s
relative positions, a LightningModule of ``torch.jit.script``'ed layers and ALBERT-style factorised
embeddings. Each wrong verdict the audit gave them, reproduced on the family itself, with cases
beside them that must still fail; and the verdicts of EXPECTED.md that distinguish the families, kept."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import pytest

from repro.audit.audit import audit_claim
from repro.checks.attention import _native_queries_keys
from repro.checks.census import TRACE_VOCAB, forward_dimensions
from repro.checks.placement import POST_NORM, PRE_NORM, norm_placement, trace_layer
from repro.claims import load_claims
from repro.claims.outcome import Outcome
from tests.audit.handwritten.round7 import (conv_ffn, factorized_embedding, fairseq_generator, lightning_scripted,
                                            linear_attention, shaw_relative)

CLAIMS = {c.id: c for c in load_claims()}
PASS, FAIL, NA, ERROR, INCONCLUSIVE = (Outcome.PASS, Outcome.FAIL, Outcome.NOT_APPLICABLE, Outcome.ERROR,
                                       Outcome.INCONCLUSIVE)


def verdict(claim_id: str, adapter):
    return audit_claim(CLAIMS[claim_id], adapter, 0)


# -- torch.jit.script'ed layers: no hooks, invisible to __torch_function__ -------------------------

class ScriptedPreNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(d, d), nn.Linear(d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.lin1(self.norm1(x))
        return x + self.lin2(self.norm2(x))


class ScriptedPostNorm(ScriptedPreNorm):
    def forward(self, x: Tensor) -> Tensor:
        x = self.norm1(x + self.lin1(x))
        return self.norm2(x + self.lin2(x))


@pytest.mark.parametrize("layer_class,placement", [(ScriptedPostNorm, POST_NORM), (ScriptedPreNorm, PRE_NORM)])
def test_norm_placement_is_read_inside_a_scripted_layer(layer_class, placement) -> None:
    # register_forward_pre_hook raised on the ScriptModule norms ("not supported on ScriptModules")
    layer = torch.jit.script(layer_class(16).eval())
    x = torch.randn(2, 5, 16)
    norms = (layer.norm1, layer.norm2)
    assert norm_placement(trace_layer(lambda: layer(x), x, norms), norms).kind == placement


def test_footnote4_reads_the_queries_and_keys_of_the_fused_mha_kernel() -> None:
    # a scripted nn.MultiheadAttention runs torch's fused inference kernel whatever torch.backends.mha
    # says: "no attention score product ... was seen" (not applicable)
    record = verdict("sec3.footnote4.dot-product-variance", lightning_scripted.adapter())
    assert record.status == PASS, record.why


def test_the_fused_kernels_queries_and_keys_are_its_projections() -> None:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(8, 2, batch_first=True)
        nn.init.normal_(mha.in_proj_bias)
        x, y = torch.randn(3, 4, 8), torch.randn(3, 4, 8)
    q, k = _native_queries_keys(x, y, y, 8, 2, mha.in_proj_weight, mha.in_proj_bias)
    w_q, w_k, _ = mha.in_proj_weight.double().chunk(3)
    b_q, b_k, _ = mha.in_proj_bias.double().chunk(3)
    heads = lambda t: t.view(3, 4, 2, 4).transpose(1, 2).reshape(6, 4, 4)
    assert torch.allclose(q, heads(F.linear(x.double(), w_q, b_q))) and torch.allclose(k, heads(F.linear(y.double(), w_k, b_k)))


# -- the census: a factorised output projection, convolutions, kernelised attention ----------------
# (read on small models, as sec3.base.dimensions reads the base model: repro.checks.census)

def dimensions(adapter, d_model: int = 256, heads: int = 4, d_ff: int = 512) -> tuple[dict, str]:
    return forward_dimensions(adapter.model(TRACE_VOCAB, d_model, heads, d_ff, 2))


def test_a_factorised_output_projection_reads_the_stream_width() -> None:
    # logits x W_map E^T: d_model read as 128 (the logits' input), no feed-forward layer found: inconclusive
    measured, seen = dimensions(factorized_embedding.adapter())
    assert (measured["d_model"], measured["d_ff"], measured["N_encoder"]) == (256, 512, 2), seen
    assert "d_model read as 256" in seen


def test_convolutional_feed_forward_layers_are_read_by_their_channels() -> None:
    # Conv1d(d_model, d_ff, 3) -> Conv1d(d_ff, d_model, 1): no product seen, no feed-forward layer (inconclusive)
    measured, seen = dimensions(conv_ffn.adapter())
    assert (measured["d_ff"], measured["N_encoder"], measured["N_decoder"]) == (512, 2, 2), seen


def test_relation_terms_are_not_read_as_a_kernelised_attention() -> None:
    measured, seen = dimensions(shaw_relative.adapter())   # Shaw's a^V term sums over the positions too
    assert (measured["h"], measured["d_k"], measured["d_v"]) == (4, 64, 64), seen


def test_kernelised_attention_heads_are_read_off_their_key_value_sums() -> None:
    measured, seen = dimensions(linear_attention.adapter())   # "no self-attention ... the heads could not be read"
    assert (measured["h"], measured["d_k"], measured["d_v"]) == (4, 64, 64), seen


class OneWideLinearHead(linear_attention.LinearAttentionAdapter):
    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return super().model(vocab_size, d_model, 1, d_ff, n_layers)


def test_one_wide_kernelised_head_still_reads_h_1() -> None:
    measured, seen = dimensions(OneWideLinearHead())
    assert (measured["h"], measured["d_k"]) == (1, 256), seen


def test_the_base_model_is_read_through_the_claim() -> None:
    record = verdict("sec3.base.dimensions", conv_ffn.adapter())
    assert record.status == PASS, record.why


# -- attention linear in n: measured, never an error or "not applicable" ---------------------------

def test_the_cost_of_an_attention_linear_in_n_is_measured() -> None:
    # "the FLOP counter saw no term quadratic in n ... a kernel it cannot count" (an error)
    record = verdict("sec3.multihead.cost", linear_attention.adapter())
    assert record.status == FAIL and record.check.measured < 0.8 and "linear in n" in record.why, record.why


def test_an_attention_without_scores_has_no_dot_products_to_measure() -> None:
    record = verdict("sec3.footnote4.dot-product-variance", linear_attention.adapter())   # it read not applicable
    assert record.status == FAIL and "no q.k scores" in record.why, record.why


# -- decoding: a beam half that cannot show anything is inconclusive --------------------------------
# (the beam half on a short search, beam 2 and 2 tokens past the source, as the claim's params allow)

def incremental_verdict(adapter):
    claim = CLAIMS["impl.incremental-decoding"]
    short = dataclasses.replace(claim, params={**claim.params, "beam": {"beam_size": 2, "max_len_offset": 2}})
    return audit_claim(short, adapter, 0)


def test_a_cache_checked_on_searches_that_end_at_once_is_inconclusive() -> None:
    # fairseq starts from eos, with tied embeddings: random models end every sentence at once. It failed.
    record = incremental_verdict(fairseq_generator.adapter())
    assert record.status == INCONCLUSIVE and "the logits through the cache match" in record.why, record.why


class ForgetfulCache(fairseq_generator.FairseqGeneratorAdapter):
    """A cache that forgets what it held at each call: the same searches, wrong logits."""

    def _parts(self, net, vocab, d_model):
        parts = super()._parts(net, vocab, d_model)

        def incremental(src, tgt_in, chunks):
            encoder_out = net.encoder(src)
            return torch.cat([net.decoder(tgt_in[:, :end], encoder_out, {}) for end in range(1, tgt_in.size(1) + 1)], 1)

        parts.incremental = incremental
        return parts


def test_a_broken_cache_still_fails_when_the_searches_end_at_once() -> None:
    record = incremental_verdict(ForgetfulCache())
    assert record.status == FAIL, record.why


# -- the verdicts that tell the families apart (EXPECTED.md) ----------------------------------------

FAMILIES = {"fairseq_generator": fairseq_generator, "linear_attention": linear_attention, "conv_ffn": conv_ffn,
            "shaw_relative": shaw_relative, "lightning_scripted": lightning_scripted,
            "factorized_embedding": factorized_embedding}
KEPT = {
    "sec3.eq1.every-path": {"linear_attention": FAIL, "shaw_relative": FAIL, "lightning_scripted": PASS},
    "sec3.multihead.positions-kept": {"shaw_relative": FAIL, "lightning_scripted": PASS},
    "sec3.eq2.position-wise": {"conv_ffn": FAIL, "linear_attention": PASS},
    "sec3.pe.layout": {"fairseq_generator": FAIL, "shaw_relative": FAIL, "conv_ffn": PASS},
    "sec3.embedding.shared": {"factorized_embedding": PASS},
    "sec3.sublayer.post-norm": {"lightning_scripted": PASS},
    "sec5.adam": {"fairseq_generator": FAIL, "factorized_embedding": FAIL, "lightning_scripted": PASS},
    "sec5.label-smoothing.loss": {"factorized_embedding": FAIL, "lightning_scripted": PASS},
    "sec5.eq3.peak-step": {"fairseq_generator": FAIL, "lightning_scripted": PASS},
    "sec6.length-penalty.ranking": {"fairseq_generator": FAIL},
    "sec6.early-termination": {"fairseq_generator": PASS},
    "sec6.beam.finished-hypotheses": {"fairseq_generator": PASS},
    "impl.padding-invariance": {"conv_ffn": PASS, "fairseq_generator": PASS},
}


@pytest.mark.parametrize("claim_id,name", [(c, f) for c, fams in KEPT.items() for f in fams])
def test_expected_verdicts_kept(claim_id: str, name: str) -> None:
    record = verdict(claim_id, FAMILIES[name].adapter())
    assert record.status == KEPT[claim_id][name], record.why
