"""ReZero (Bachlechner et al., 2020) as its reference code writes it (``RZTXEncoderLayer`` /
``RZTXDecoderLayer`` of majumdarsh/rezero), in an encoder-decoder, and an adapter written from
docs/audit.md (issue 43, ninth round).

Its choices: no layer normalisation anywhere; each sub-layer's output is multiplied by the
layer's one ``resweight``, a learned scalar initialised to **0**, before its dropout and the
residual sum: ``x + Dropout(resweight * Sublayer(x))``. At initialisation every layer is the
identity (the point of ReZero: training moves the gates). Attention is
``nn.MultiheadAttention(batch_first=True)`` with a True-is-padding ``key_padding_mask`` and a
float -inf causal ``attn_mask``; ReLU feed-forward layers; interleaved sinusoids; embeddings
scaled by sqrt(d_model) and shared by both stacks and the output; the paper's recipe.

Departures from the paper: no LayerNorm (Section 3.1's LayerNorm(x + Sublayer(x))), the residual
branch gated by a learned scalar.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input
from tests.audit.handwritten.round6.paper_recipe import PaperRecipe
from tests.audit.handwritten.round7.conv_ffn import scaled_dot_product, sinusoids

PAD, BOS, EOS = 0, 1, 2


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.linear1, self.linear2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class RZTXEncoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, dim_feedforward, dropout)
        self.resweight = nn.Parameter(torch.Tensor([0]))
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, src: Tensor, src_key_padding_mask: Tensor | None = None) -> Tensor:
        src2 = self.self_attn(src, src, src, key_padding_mask=src_key_padding_mask, need_weights=False)[0]
        src = src + self.dropout1(src2 * self.resweight)
        src2 = self.ff(src)
        return src + self.dropout2(src2 * self.resweight)


def causal_mask(n: int, device: torch.device) -> Tensor:
    return torch.full((n, n), float("-inf"), device=device).triu(1)


class RZTXDecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, dim_feedforward, dropout)
        self.resweight = nn.Parameter(torch.Tensor([0]))
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def self_attention(self, tgt: Tensor) -> Tensor:
        return self.self_attn(tgt, tgt, tgt, attn_mask=causal_mask(tgt.size(1), tgt.device), need_weights=False)[0]

    def cross_attention(self, tgt: Tensor, memory: Tensor, memory_key_padding_mask: Tensor | None = None) -> Tensor:
        return self.multihead_attn(tgt, memory, memory, key_padding_mask=memory_key_padding_mask, need_weights=False)[0]

    def forward(self, tgt: Tensor, memory: Tensor, memory_key_padding_mask: Tensor | None = None) -> Tensor:
        tgt = tgt + self.dropout1(self.self_attention(tgt) * self.resweight)
        tgt = tgt + self.dropout2(self.cross_attention(tgt, memory, memory_key_padding_mask) * self.resweight)
        return tgt + self.dropout3(self.ff(tgt) * self.resweight)


class ReZeroTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, nhead: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(RZTXEncoderLayer(d_model, nhead, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(RZTXDecoderLayer(d_model, nhead, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        x = self.dropout(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, src == PAD)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src == PAD)
        return F.linear(x, self.embedding.weight)


# -- the adapter ------------------------------------------------------------------------------

class ReZeroAdapter(PaperRecipe, Adapter):
    name = "ReZero, residual gates initialised to 0 and no LayerNorm (hand-written)"

    def attention(self, query, key, value, mask):
        return scaled_dot_product(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
        return lambda q, k, v: mha(q, k, v, need_weights=False)[0]

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.linear1.weight.T, ff.linear1.bias, ff.linear2.weight.T, ff.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(RZTXEncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(RZTXDecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: ReZeroTransformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.embedding.weight,
            target_embedding=net.embedding.weight, output_projection=net.embedding.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(ReZeroTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(ReZeroTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(),
                           vocab_size, d_model)


def _encoder_parts(layer: RZTXEncoderLayer) -> EncoderLayerParts:
    # no norms: ReZero has none (the residual gate is not a sub-layer's)
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x, x, need_weights=False)[0],
                             feed_forward=layer.ff, norms=())


def _decoder_parts(layer: RZTXDecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.self_attention,
                             cross_attention=layer.cross_attention, feed_forward=layer.ff, norms=())


def adapter() -> Adapter:
    return ReZeroAdapter()
