"""Issue 43, the fourth round of unseen families: hand-written implementations in the styles
researchers use (The Annotated Transformer, PyTorch's nn.Transformer tutorial, fairseq-style,
tensor2tensor-style, nanoGPT-style; :mod:`tests.audit.handwritten`). Each wrong verdict the
audit gave them, reproduced on the family itself."""

from __future__ import annotations

import torch
from torch import nn

from repro.audit.audit import audit_claim
from repro.claims import load_claims
from repro.claims.outcome import Outcome
from tests.audit.handwritten import annotated

CLAIMS = {c.id: c for c in load_claims()}


def verdict(claim_id: str, adapter):
    return audit_claim(CLAIMS[claim_id], adapter, 0)


# -- sec3.sublayer.layer-norm: the Annotated Transformer's LayerNorm (unbiased std) -----------------

def test_a_layer_norm_with_the_unbiased_std_is_a_gain_and_a_bias() -> None:
    # a_2 * (x - mean) / (x.std() + eps) + b_2: the gain fitted is sqrt((d-1)/d) x a_2; it used to
    # fail "no gain, a bias found"
    record = verdict("sec3.sublayer.layer-norm", annotated.adapter())
    assert record.status == Outcome.PASS, record.why
    assert "unbiased std" in record.why and "0.9922" in record.why, record.why


class ScaledNorm(annotated.LayerNorm):
    """A gain off by a constant that is not Bessel's: 0.9 x a_2."""

    def forward(self, x):
        return 0.9 * super().forward(x) + 0.1 * self.b_2


class ScaledNormAdapter(annotated.AnnotatedAdapter):
    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        parts.norms = tuple(ScaledNorm(d_model) for _ in parts.norms)
        return parts


def test_a_gain_off_by_another_constant_still_fails() -> None:
    record = verdict("sec3.sublayer.layer-norm", ScaledNormAdapter())
    assert record.status == Outcome.FAIL and "no gain" in record.why, record.why
