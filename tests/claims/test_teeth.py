"""Each checker must fail on a plausible wrong implementation (tests with teeth).

Every case swaps one part of repro's own adapter for a known misreading of the paper,
among them those of the third-party notes in shared/paper (scaling after the softmax,
LayerNorm before the residual sum), and asserts the claim that part answers to fails.
The same claim passes on repro's own implementation (the control)."""

from __future__ import annotations

import math

import pytest
import torch

from repro.audit.adapter import EncoderLayerParts, FeedForwardParts
from repro.audit.repro_adapter import ReproAdapter
from repro.checks.attention import reference_attention
from repro.claims import load_claims
from repro.checks import CHECKERS
from repro.claims.runner import run_claim
from repro.model.positional import sinusoidal_encoding

CLAIMS = {c.id: c for c in load_claims()}


def status(claim_id: str, adapter) -> str:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], adapter, {}).status


class ScaleAfterSoftmax(ReproAdapter):
    """blog-notes.txt: Attention = softmax(QK^T) / sqrt(d_k) ... V."""

    def attention(self, q, k, v, mask):
        s = q @ k.transpose(-1, -2)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return (torch.softmax(s, -1) / math.sqrt(q.shape[-1])) @ v


class NoScaling(ReproAdapter):
    def attention(self, q, k, v, mask):
        return reference_attention(q * math.sqrt(q.shape[-1]), k, v, mask).float()


class MaskIgnored(ReproAdapter):
    def attention(self, q, k, v, mask):
        return reference_attention(q, k, v, None).float()


class NormBeforeResidual(ReproAdapter):
    """reading-notes misreading: x + LayerNorm(Sublayer(x)) instead of LayerNorm(x + Sublayer(x))."""

    def encoder_layer(self, d_model, n_heads, d_ff):
        parts = super().encoder_layer(d_model, n_heads, d_ff)
        n1, n2 = parts.norms

        def layer(x):
            h = x + n1(parts.self_attention(x))
            return h + n2(parts.feed_forward(h))

        return EncoderLayerParts(layer, parts.self_attention, parts.feed_forward, parts.norms)


class GeluFeedForward(ReproAdapter):
    def feed_forward(self, d_model, d_ff):
        parts = super().feed_forward(d_model, d_ff)
        w1, b1, w2, b2 = parts.w_1, parts.b_1, parts.w_2, parts.b_2
        return FeedForwardParts(lambda x: torch.nn.functional.gelu(x @ w1 + b1) @ w2 + b2, w1, b1, w2, b2)


class SinCosSwapped(ReproAdapter):
    def positional_encoding(self, length, d_model):
        pe = sinusoidal_encoding(length, d_model)
        return torch.stack([pe[:, 1::2], pe[:, 0::2]], -1).reshape(length, d_model)


class ExponentWithoutTwo(ReproAdapter):
    """10000^(i/d_model) instead of 10000^(2i/d_model): wavelengths up to 10000^(1/2) * 2pi only."""

    def positional_encoding(self, length, d_model):
        pos = torch.arange(length, dtype=torch.float32)[:, None]
        inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2) / (2 * d_model))
        return torch.stack([torch.sin(pos * inv_freq), torch.cos(pos * inv_freq)], -1).reshape(length, d_model)


class LearnedRandomTable(ReproAdapter):
    def positional_encoding(self, length, d_model):
        return torch.randn(length, d_model, generator=torch.Generator().manual_seed(0))


class Unscaled(ReproAdapter):
    """The model's embedding layers do not multiply by sqrt(d_model) (what the stacks receive is
    measured: an adapter that only reported the bare lookup table, the model scaling, would pass)."""

    def model(self, *args, **kwargs):
        parts = super().model(*args, **kwargs)
        parts.module.src_embed.scale = parts.module.tgt_embed.scale = 1.0
        return parts


class Untied(ReproAdapter):
    def __init__(self):
        super().__init__(tie_output=False)


class LeakyMask(ReproAdapter):
    """The decoder sees one position ahead: causal mask tril(1) instead of tril(0)."""

    from repro.audit.variants import LeakyTransformer as transformer_class


class FullDimensionHeads(ReproAdapter):
    """Each of the h heads keeps d_k = d_model: the cost grows with h."""

    def multi_head_attention(self, d_model, n_heads):
        from repro.model.attention import MultiHeadAttention

        return MultiHeadAttention(d_model, n_heads, d_model, d_model).eval()


class WrongAdam(ReproAdapter):
    def optimizer(self, params):
        return torch.optim.Adam(params, betas=(0.9, 0.999), eps=1e-8)


class WarmupSquareRoot(ReproAdapter):
    def learning_rate(self, step, d_model, warmup_steps):
        return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.0)


class NoSmoothing(ReproAdapter):
    def loss(self, logits, target, pad_id, smoothing):
        return torch.nn.functional.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")


class PadNotIgnored(ReproAdapter):
    def loss(self, logits, target, pad_id, smoothing):
        return torch.nn.functional.cross_entropy(logits, target, label_smoothing=smoothing, reduction="sum")


class PreNorm(ReproAdapter):
    def __init__(self):
        super().__init__(norm_first=True)


TEETH = [
    ("sec3.eq1.scaled-dot-product", ScaleAfterSoftmax),
    ("sec3.eq1.scaled-dot-product", NoScaling),
    ("sec3.eq1.scaled-dot-product", MaskIgnored),
    ("sec3.sublayer.post-norm", NormBeforeResidual),
    ("sec3.sublayer.post-norm", PreNorm),
    ("sec3.eq2.feed-forward", GeluFeedForward),
    ("sec3.pe.equations", SinCosSwapped),
    ("sec3.pe.equations", ExponentWithoutTwo),
    ("sec3.pe.layout", SinCosSwapped),
    ("sec3.pe.wavelengths", ExponentWithoutTwo),
    ("sec3.pe.relative-linear", LearnedRandomTable),
    ("sec3.embedding.scale", Unscaled),
    ("sec3.embedding.shared", Untied),
    ("sec3.decoder.causal-mask", LeakyMask),
    ("sec3.multihead.cost", FullDimensionHeads),
    ("sec5.adam", WrongAdam),
    ("sec5.eq3.schedule", WarmupSquareRoot),
    ("sec5.eq3.peak-step", WarmupSquareRoot),
    ("sec5.label-smoothing.loss", NoSmoothing),
    ("sec5.label-smoothing.loss", PadNotIgnored),
]


@pytest.mark.parametrize("claim_id, wrong", TEETH, ids=[f"{c}-{w.__name__}" for c, w in TEETH])
def test_claim_fails_on_a_wrong_implementation(claim_id, wrong):
    assert status(claim_id, wrong()) == "fail"


@pytest.mark.parametrize("claim_id", sorted({c for c, _ in TEETH}))
def test_claim_passes_on_repro(claim_id):
    assert status(claim_id, ReproAdapter()) == "pass"


def test_a_missing_part_is_not_applicable_never_passed():
    from repro.audit.adapter import Adapter

    class Empty(Adapter):
        name = "empty"

    assert {status(c, Empty()) for c, _ in TEETH} == {"not applicable"}
