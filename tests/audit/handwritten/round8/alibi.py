"""Attention with Linear Biases (ALiBi; Press, Smith and Lewis, 2022) in a translation model, as
the authors' fairseq fork adds it (``buffered_future_mask`` returns the causal mask plus
``-m_h (i - j)``, passed to the attention as a per-head float ``attn_mask``), the encoder given
the symmetric bias ``-m_h |i - j|`` that encoder-decoder ports of ALiBi use, and an adapter
written from docs/audit.md (issue 43, eighth round).

Its choices: no positional encoding is added to the embeddings; the slopes are the geometric
sequence m_h = 2^(-8 h / H), h = 1..H; every self-attention is ``nn.MultiheadAttention(batch_first=
True)`` called with a 3-D float ``attn_mask`` of shape (batch * heads, n, n) holding the bias (and
-inf at the future and at padding keys: fairseq folds the key padding into the same float mask);
the encoder-decoder attention has no bias, only a True-is-padding ``key_padding_mask``. The rest
is the paper's base model: post-norm, ReLU FFN, embeddings scaled by sqrt(d_model) and shared by
both stacks and the output projection, the paper's recipe.

Departures from the paper: no absolute positions (Section 3.5): position enters only as a bias on
the self-attention scores, so multi-head self-attention is no longer position-free.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input
from tests.audit.handwritten.round6.paper_recipe import PaperRecipe

PAD, BOS, EOS = 0, 1, 2


def get_slopes(n_heads: int) -> list[float]:
    """The authors' ``get_slopes`` (for a power of two; else the closest power's, interleaved)."""
    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][: n_heads - closest]


def alibi_bias(n_heads: int, n: int, causal: bool, device: torch.device | None = None) -> Tensor:
    """(heads, n, n): -m_h (i - j) below the diagonal and -inf above it (causal), or -m_h |i - j|."""
    slopes = torch.tensor(get_slopes(n_heads), device=device)
    pos = torch.arange(n, device=device)
    distance = (pos[:, None] - pos[None, :]).float()
    if causal:
        bias = -slopes[:, None, None] * distance
        return bias.masked_fill(distance < 0, float("-inf"))
    return -slopes[:, None, None] * distance.abs()


def self_attn_mask(n_heads: int, padding: Tensor | None, n: int, causal: bool, device: torch.device) -> Tensor:
    """The float ``attn_mask`` (batch * heads, n, n) fairseq's fork passes: ALiBi plus -inf at padding keys."""
    bias = alibi_bias(n_heads, n, causal, device)
    if padding is None:
        return bias
    bsz = padding.size(0)
    bias = bias.unsqueeze(0).expand(bsz, -1, -1, -1)
    bias = bias.masked_fill(padding[:, None, None, :], float("-inf"))
    return bias.reshape(bsz * n_heads, n, n)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.n_heads = nn.Dropout(dropout), n_heads

    def attend(self, x: Tensor, padding: Tensor | None = None) -> Tensor:
        mask = self_attn_mask(self.n_heads, padding, x.size(1), False, x.device)
        if padding is None:
            mask = mask.repeat(x.size(0), 1, 1)
        return self.self_attn(x, x, x, attn_mask=mask, need_weights=False)[0]

    def ffn(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))

    def forward(self, x: Tensor, padding: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.attend(x, padding)))
        return self.final_layer_norm(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.encoder_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)
        self.dropout, self.n_heads = nn.Dropout(dropout), n_heads

    def attend(self, x: Tensor) -> Tensor:
        mask = self_attn_mask(self.n_heads, None, x.size(1), True, x.device).repeat(x.size(0), 1, 1)
        return self.self_attn(x, x, x, attn_mask=mask, need_weights=False)[0]

    def cross(self, x: Tensor, memory: Tensor, padding: Tensor | None = None) -> Tensor:
        return self.encoder_attn(x, memory, memory, key_padding_mask=padding, need_weights=False)[0]

    def ffn(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))

    def forward(self, x: Tensor, memory: Tensor, padding: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.attend(x)))
        x = self.encoder_attn_layer_norm(x + self.dropout(self.cross(x, memory, padding)))
        return self.final_layer_norm(x + self.dropout(self.ffn(x)))


class AlibiTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.embed_scale = math.sqrt(d_model)
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, d_model ** -0.5)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embed_scale * self.embed_tokens(tokens)

    def encode(self, src: Tensor) -> Tensor:
        x = self.dropout(self.embed(src))
        for layer in self.encoder:
            x = layer(x, src.eq(PAD))
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt))
        for layer in self.decoder:
            x = layer(x, memory, src.eq(PAD))
        return F.linear(x, self.embed_tokens.weight)


# -- the adapter ------------------------------------------------------------------------------

class AlibiAdapter(PaperRecipe, Adapter):
    name = "ALiBi attention biases in a translation model (ofirpress fairseq fork, hand-written)"

    def attention(self, query, key, value, mask):
        # the scores' function without the position bias, which the model declares (ModelParts.*_attention_bias)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        layer = EncoderLayer(d_model, n_heads, 1, 0.0).eval()
        return lambda q, k, v: layer.attend(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        layer = DecoderLayer(d_model, n_heads, 1, 0.0).eval()
        return lambda q, k, v: layer.encoder_attn(q, k, v, need_weights=False)[0]

    def feed_forward(self, d_model, d_ff):
        layer = EncoderLayer(d_model, 1, d_ff, 0.0).eval()
        return FeedForwardParts(layer.ffn, layer.fc1.weight.T, layer.fc1.bias, layer.fc2.weight.T, layer.fc2.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "ALiBi adds no positions to the embeddings: a linear bias on the "
                          "self-attention scores (ModelParts.encoder_attention_bias)")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: AlibiTransformer, vocab: int, d_model: int) -> ModelParts:
        n_heads = net.encoder[0].n_heads

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.embed_tokens.weight,
            target_embedding=net.embed_tokens.weight, output_projection=net.embed_tokens.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encoder_attention_bias=lambda n: alibi_bias(n_heads, n, False),
            decoder_attention_bias=lambda n: alibi_bias(n_heads, n, True),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(AlibiTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(AlibiTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=layer.attend, feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.attend,
                             cross_attention=lambda x, memory: layer.cross(x, memory), feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return AlibiAdapter()
