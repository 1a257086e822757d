"""The adapter protocol stays compatible: an adapter written against the protocol as it was before
issue 13 (every method, plain callables, bare hyperparameter values, tuples with where) loads
through ``module:factory`` and runs unchanged, with no error on any claim."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from repro.audit.audit import auditable_claims, run_audit
from repro.audit.load import load_adapter

OLD_STYLE = '''
import math
import torch
from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.model import Transformer, TransformerConfig
from repro.model.attention import MultiHeadAttention
from repro.model.feedforward import PositionwiseFeedForward
from repro.model.layers import EncoderLayer
from repro.model.positional import sinusoidal_encoding


class OldStyle(Adapter):
    name = "an adapter in the pre-issue-13 style"

    def attention(self, query, key, value, mask):
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ value

    def multi_head_attention(self, d_model, n_heads):
        return MultiHeadAttention(d_model, n_heads, d_model // n_heads, d_model // n_heads).eval()

    def feed_forward(self, d_model, d_ff):
        ffn = PositionwiseFeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ffn, ffn.w_1.weight.T, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoidal_encoding(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        layer = EncoderLayer(TransformerConfig(d_model=d_model, n_heads=n_heads, d_ff=d_ff, dropout=0.0)).eval()
        return EncoderLayerParts(
            layer=lambda x: layer(x, None),
            self_attention=lambda x: layer.self_attn(x, x, x),
            feed_forward=layer.feed_forward,
            norms=(layer.sublayers[0].norm, layer.sublayers[1].norm),
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        cfg = TransformerConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=d_model,
                                n_heads=n_heads, d_ff=d_ff, n_layers=n_layers, dropout=0.0)
        model = Transformer(cfg).eval()
        return ModelParts(forward=model, vocab_size=vocab_size, d_model=d_model, embed_source=model.src_embed,
                          source_embedding=model.src_embed.weight, target_embedding=model.tgt_embed.weight,
                          output_projection=model.output_projection.weight)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

    def loss(self, logits, target, pad_id, smoothing):
        return torch.nn.functional.cross_entropy(logits, target, ignore_index=pad_id,
                                                 label_smoothing=smoothing, reduction="sum")

    def hyperparameters(self):
        return {"dropout_base": 0.1, "warmup_steps": (4000, "my recipe"), "beam_size": 4}


def factory():
    return OldStyle()
'''


@pytest.fixture
def old_style(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"old_style_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(OLD_STYLE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return name


def test_an_adapter_in_todays_style_loads_and_runs_unchanged(old_style: str) -> None:
    adapter = load_adapter(f"{old_style}:factory")
    claims = [c for c in auditable_claims() if c.id.startswith(("sec3.", "sec5.", "sec6."))
              and c.id != "sec3.base.dimensions"]
    records = {r.claim.id: r for r in run_audit(adapter, claims)}
    assert not [f"{i}: {r.why}" for i, r in records.items() if r.status == "error"]
    for claim_id in ("sec3.eq1.scaled-dot-product", "sec3.multihead.cost", "sec3.sublayer.post-norm",
                     "sec3.pe.wavelengths", "sec3.pe.layout", "sec3.embedding.shared", "sec5.eq3.schedule",
                     "sec5.label-smoothing.loss", "sec5.dropout.base", "sec5.warmup-steps", "sec6.beam-size"):
        assert records[claim_id].status == "pass", records[claim_id].why
