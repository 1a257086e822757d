"""A Longformer-Encoder-Decoder-style Transformer whose self-attention is a sliding window,
computed on key windows gathered with ``unfold`` (no n x n score matrix), and an adapter written
from docs/audit.md (issue 43, ninth round).

Its choices: ``attention_window = 16`` as LED's config spells it, so each query sees the keys
within 8 positions on either side in the encoder, and the 8 before it and itself in the decoder;
keys and values are padded by the one-sided window and ``unfold``-ed into (n, window) blocks;
scores (batch, heads, n, window) are ``einsum``-ed against them and masked with
``finfo.min`` outside the sequence and at padding (HF Longformer's convention: a query whose
window holds only padding gets uniform weights, never NaN); cross-attention is full
(``F.scaled_dot_product_attention`` with a boolean mask). Otherwise the paper's base model:
post-norm, ReLU feed-forward layers, interleaved sinusoids, embeddings scaled by sqrt(d_model)
and shared by both stacks and the output, no final norms, the paper's recipe.

Departures from the paper: each self-attention layer sees a band of 17 (encoder) or 9 (decoder)
positions, not all of them (Section 3.2.3; Eq. 1's softmax runs over the window only).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input
from tests.audit.handwritten.round6.paper_recipe import PaperRecipe
from tests.audit.handwritten.round7.conv_ffn import sinusoids
from tests.audit.handwritten.round9.rezero import FeedForward

PAD, BOS, EOS = 0, 1, 2
ATTENTION_WINDOW = 16


def _windows(t: Tensor, left: int, width: int, n_q: int, value: float | bool = 0.0) -> Tensor:
    """t (..., m, d) -> (..., n_q, d, width): rows i - left .. i - left + width - 1 of t per query i."""
    right = max(0, n_q + width - 1 - left - t.size(-2))
    return F.pad(t, (0, 0, left, right), value=value).unfold(-2, width, 1)[..., :n_q, :, :]


def sliding_window_attention(q: Tensor, k: Tensor, v: Tensor, one_sided: int, causal: bool,
                             mask: Tensor | None = None) -> Tensor:
    """q (..., n, d_k), k and v (..., m, d): query i attends to keys i - w .. i + w (i - w .. i if
    causal) that exist and that ``mask`` (broadcast to (..., n, m), True = attend) keeps."""
    n, m = q.size(-2), k.size(-2)
    width = one_sided + 1 if causal else 2 * one_sided + 1
    keys, values = _windows(k, one_sided, width, n), _windows(v, one_sided, width, n)
    scores = torch.einsum("...nd,...ndw->...nw", q / math.sqrt(q.size(-1)), keys)
    j = torch.arange(n, device=q.device)[:, None] - one_sided + torch.arange(width, device=q.device)
    keep = (j >= 0) & (j < m)
    if mask is not None:
        full = mask.expand(*mask.shape[:-2], n, m)
        picked = torch.gather(full, -1, j.clamp(0, m - 1).expand(*full.shape[:-2], n, width))
        keep = keep & picked
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.einsum("...nw,...ndw->...nd", scores.softmax(-1), values)


class LongformerSelfAttention(nn.Module):
    def __init__(self, d_model: int, h: int, causal: bool) -> None:
        super().__init__()
        self.h, self.causal, self.one_sided = h, causal, ATTENTION_WINDOW // 2
        self.query, self.key, self.value = (nn.Linear(d_model, d_model) for _ in range(3))
        self.output = nn.Linear(d_model, d_model)

    def split(self, x: Tensor) -> Tensor:
        return x.view(x.size(0), x.size(1), self.h, -1).transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        out = sliding_window_attention(self.split(self.query(q)), self.split(self.key(k)), self.split(self.value(v)),
                                       self.one_sided, self.causal, mask)
        return self.output(out.transpose(1, 2).flatten(2))

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        return self.attend(x, x, x, None if keep is None else keep[:, None, None, :])


class CrossAttention(LongformerSelfAttention):
    def forward(self, x: Tensor, memory: Tensor, keep: Tensor | None = None) -> Tensor:
        mask = None if keep is None else keep[:, None, None, :]
        out = F.scaled_dot_product_attention(self.split(self.query(x)), self.split(self.key(memory)),
                                             self.split(self.value(memory)), attn_mask=mask)
        return self.output(out.transpose(1, 2).flatten(2))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.ff = LongformerSelfAttention(d_model, h, causal=False), FeedForward(d_model, d_ff, 0.0)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.self_attn(x, keep)))
        return self.final_layer_norm(x + self.dropout(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = LongformerSelfAttention(d_model, h, causal=True)
        self.encoder_attn = CrossAttention(d_model, h, causal=False)
        self.ff = FeedForward(d_model, d_ff, 0.0)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.final_layer_norm, self.dropout = nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, memory_keep: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.self_attn(x)))
        x = self.encoder_attn_layer_norm(x + self.dropout(self.encoder_attn(x, memory, memory_keep)))
        return self.final_layer_norm(x + self.dropout(self.ff(x)))


class LEDModel(nn.Module):
    def __init__(self, vocab: int, d_model: int, h: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.shared = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.shared.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(2048, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.shared(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        keep, x = src != PAD, self.dropout(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, keep)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src != PAD)
        return F.linear(x, self.shared.weight)


# -- the adapter ------------------------------------------------------------------------------

def encoder_window(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return sliding_window_attention(q, k, v, ATTENTION_WINDOW // 2, False, mask)


def decoder_window(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return sliding_window_attention(q, k, v, ATTENTION_WINDOW // 2, True, mask)


def cross(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class SlidingWindowAdapter(PaperRecipe, Adapter):
    name = "sliding-window self-attention, LED style (hand-written)"

    def attention(self, query, key, value, mask):
        return encoder_window(query, key, value, mask)

    def attention_paths(self):
        return {"encoder self-attention": encoder_window, "decoder self-attention": decoder_window,
                "cross-attention": cross}

    def multi_head_attention(self, d_model, n_heads):
        return LongformerSelfAttention(d_model, n_heads, causal=False).eval().attend

    def multi_head_cross_attention(self, d_model, n_heads):
        attn = CrossAttention(d_model, n_heads, causal=False).eval()
        return lambda q, k, v: attn(q, k)

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.linear1.weight.T, ff.linear1.bias, ff.linear2.weight.T, ff.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: LEDModel, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.shared.weight,
            target_embedding=net.shared.weight, output_projection=net.shared.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(LEDModel(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(LEDModel(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=layer.self_attn, feed_forward=layer.ff,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.self_attn,
                             cross_attention=lambda x, memory: layer.encoder_attn(x, memory), feed_forward=layer.ff,
                             norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return SlidingWindowAdapter()
