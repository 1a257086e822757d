"""TensorFlow's tutorial "Neural machine translation with a Transformer and Keras" (2022 edition)
ported to PyTorch layer by layer, as people port it, and an adapter written from docs/audit.md
(issue 43, fifth round).

The tutorial's choices kept: ``positional_encoding(length, depth)`` with
``angle_rates = 1 / 10000 ** (arange(depth / 2) / (depth / 2))`` and
``concatenate([sin, cos], axis=-1)``: all sines, then all cosines; ``PositionalEmbedding``
(``Embedding(mask_zero=True)``: padding is id 0) multiplies by sqrt(d_model) and adds the table;
Keras' ``MultiHeadAttention(num_heads, key_dim=d_model, dropout=rate)`` *with key_dim = d_model*
(each head d_model wide, not d_model / h), its ``query / sqrt(key_dim)``, einsum scores, dropout
on the attention weights and the masked softmax of ``keras.layers.Softmax``, which *adds*
``(1 - mask) * -1e9``; query and key masks from Keras' mask propagation, ``use_causal_mask`` in the
decoder; ``BaseAttention``: ``layernorm(add([x, mha(...)]))``, post-norm with *no dropout* on the
attention's output; ``FeedForward``: ``Sequential(Dense(dff, relu), Dense(d_model), Dropout)``;
Keras' ``LayerNormalization`` (epsilon 1e-3); dropout on the embedded sum; separate source and
target vocabularies and an untied ``final_layer = Dense(target_vocab_size)``;
``SparseCategoricalCrossentropy(from_logits=True)`` over the non-padding tokens, no smoothing;
``CustomSchedule`` (Eq. 3, warm-up 4000) called with ``optimizer.iterations``, which is 0 at the
first update; Adam (0.9, 0.98, 1e-9).

Departures from the paper: sines then cosines (Section 3.5's PE(pos, 2i) is a sine at even
dimension 2i, its cosine at 2i + 1: concatenation puts them at i and d/2 + i), heads d_model wide,
no residual dropout on the attention sub-layers, untied embeddings, no label smoothing, update k
at Eq. 3's rate for k - 1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

PAD, START, END = 0, 2, 3   # mask_zero=True; the tokenizer's [START] 2, [END] 3


def positional_encoding(length: int, depth: int) -> Tensor:
    depth = depth / 2
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    depths = torch.arange(int(depth), dtype=torch.float64)[None, :] / depth
    angle_rads = positions * (1 / (10000 ** depths))
    return torch.cat([torch.sin(angle_rads), torch.cos(angle_rads)], dim=-1).float()


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """``keras.layers.Softmax()(scores, mask)``: adds -1e9 where the mask is 0."""
    if mask is not None:
        scores = scores + (1.0 - mask.to(scores.dtype)) * -1e9
    return scores.softmax(dim=-1)


def dot_product_attention(query, key, value, mask, dropout=None) -> Tensor:
    query = query * (1.0 / math.sqrt(query.size(-1)))
    scores = masked_softmax(torch.einsum("bnqh,bnkh->bnqk", query, key), mask)
    if dropout is not None:
        scores = dropout(scores)
    return torch.einsum("bnqk,bnkh->bnqh", scores, value)


class KerasMultiHeadAttention(nn.Module):
    """``keras.layers.MultiHeadAttention``: EinsumDense projections to (num_heads, key_dim)."""

    def __init__(self, model_dim: int, num_heads: int, key_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads, self.key_dim = num_heads, key_dim
        self.query_dense = nn.Linear(model_dim, num_heads * key_dim)
        self.key_dense = nn.Linear(model_dim, num_heads * key_dim)
        self.value_dense = nn.Linear(model_dim, num_heads * key_dim)
        self.output_dense = nn.Linear(num_heads * key_dim, model_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: Tensor, value: Tensor, key: Tensor | None = None, attention_mask: Tensor | None = None) -> Tensor:
        key = value if key is None else key
        b = query.size(0)
        heads = lambda t: t.view(b, -1, self.num_heads, self.key_dim).transpose(1, 2)
        out = dot_product_attention(heads(self.query_dense(query)), heads(self.key_dense(key)),
                                    heads(self.value_dense(value)), attention_mask, self.dropout)
        return self.output_dense(out.transpose(1, 2).reshape(b, -1, self.num_heads * self.key_dim))


def attention_mask(query_mask: Tensor | None, value_mask: Tensor | None, n_q: int, n_k: int,
                   causal: bool, device) -> Tensor | None:
    """``MultiHeadAttention._compute_attention_mask``: query mask x value mask (x causal), (B, 1, T, S)."""
    mask = None
    if query_mask is not None:
        mask = query_mask[:, :, None]
    if value_mask is not None:
        mask = value_mask[:, None, :] if mask is None else mask & value_mask[:, None, :]
    if causal:
        lower = torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()[None]
        mask = lower if mask is None else mask & lower
    return None if mask is None else mask[:, None]


class GlobalSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float, causal: bool = False) -> None:
        super().__init__()
        self.mha = KerasMultiHeadAttention(d_model, num_heads, key_dim=d_model, dropout=dropout)
        self.layernorm = nn.LayerNorm(d_model, eps=1e-3)
        self.causal = causal

    def attend(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        n = x.size(1)
        return self.mha(query=x, value=x, key=x, attention_mask=attention_mask(mask, mask, n, n, self.causal, x.device))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.layernorm(x + self.attend(x, mask))


class CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.mha = KerasMultiHeadAttention(d_model, num_heads, key_dim=d_model, dropout=dropout)
        self.layernorm = nn.LayerNorm(d_model, eps=1e-3)

    def attend(self, x: Tensor, context: Tensor, x_mask=None, context_mask=None) -> Tensor:
        mask = attention_mask(x_mask, context_mask, x.size(1), context.size(1), False, x.device)
        return self.mha(query=x, key=context, value=context, attention_mask=mask)

    def forward(self, x: Tensor, context: Tensor, x_mask=None, context_mask=None) -> Tensor:
        return self.layernorm(x + self.attend(x, context, x_mask, context_mask))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, dff: int, dropout: float) -> None:
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(d_model, dff), nn.ReLU(), nn.Linear(dff, d_model), nn.Dropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-3)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer_norm(x + self.seq(x))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dff: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = GlobalSelfAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, dff, dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.ffn(self.self_attention(x, mask))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dff: int, dropout: float) -> None:
        super().__init__()
        self.causal_self_attention = GlobalSelfAttention(d_model, num_heads, dropout, causal=True)
        self.cross_attention = CrossAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, dff, dropout)

    def forward(self, x: Tensor, context: Tensor, x_mask=None, context_mask=None) -> Tensor:
        x = self.causal_self_attention(x, x_mask)
        return self.ffn(self.cross_attention(x, context, x_mask, context_mask))


class PositionalEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.uniform_(self.embedding.weight, -0.05, 0.05)   # keras' Embedding initializer
        self.register_buffer("pos_encoding", positional_encoding(2048, d_model), persistent=False)

    def scaled(self, x: Tensor) -> Tensor:
        return self.embedding(x) * math.sqrt(self.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.scaled(x) + self.pos_encoding[None, : x.size(1), :]


class Transformer(nn.Module):
    def __init__(self, num_layers: int, d_model: int, num_heads: int, dff: int, input_vocab_size: int,
                 target_vocab_size: int, dropout_rate: float = 0.1) -> None:
        super().__init__()
        self.enc_embedding = PositionalEmbedding(input_vocab_size, d_model)
        self.dec_embedding = PositionalEmbedding(target_vocab_size, d_model)
        self.enc_dropout, self.dec_dropout = nn.Dropout(dropout_rate), nn.Dropout(dropout_rate)
        self.enc_layers = nn.ModuleList(EncoderLayer(d_model, num_heads, dff, dropout_rate) for _ in range(num_layers))
        self.dec_layers = nn.ModuleList(DecoderLayer(d_model, num_heads, dff, dropout_rate) for _ in range(num_layers))
        self.final_layer = nn.Linear(d_model, target_vocab_size)

    def encode(self, context: Tensor) -> Tensor:
        mask = context != PAD
        x = self.enc_dropout(self.enc_embedding(context))
        for layer in self.enc_layers:
            x = layer(x, mask)
        return x

    def forward(self, context: Tensor, x: Tensor) -> Tensor:
        context_mask, x_mask = context != PAD, x != PAD
        context = self.encode(context)
        x = self.dec_dropout(self.dec_embedding(x))
        for layer in self.dec_layers:
            x = layer(x, context, x_mask, context_mask)
        return self.final_layer(x)


class CustomSchedule:
    def __init__(self, d_model: int, warmup_steps: int = 4000) -> None:
        self.d_model, self.warmup_steps = d_model, warmup_steps

    def __call__(self, step: int) -> float:
        arg1 = step ** -0.5 if step > 0 else math.inf   # tf.math.rsqrt(0.) = inf
        arg2 = step * (self.warmup_steps ** -1.5)
        return self.d_model ** -0.5 * min(arg1, arg2)


# -- the adapter ------------------------------------------------------------------------------

class KerasPortAdapter(Adapter):
    name = "TF/Keras tutorial ported to PyTorch (hand-written)"

    def attention(self, query, key, value, mask):
        return dot_product_attention(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        mha = KerasMultiHeadAttention(d_model, n_heads, key_dim=d_model).eval()
        return lambda q, k, v: mha(query=q, value=v, key=k)

    def multi_head_cross_attention(self, d_model, n_heads):
        return self.multi_head_attention(d_model, n_heads)

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff.seq, ff.seq[0].weight.T, ff.seq[0].bias, ff.seq[2].weight.T, ff.seq[2].bias)

    def positional_encoding(self, length, d_model):
        return positional_encoding(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: Transformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=START, eos_id=END, module=net,
            embed_source=net.enc_embedding.scaled, embed_target=net.dec_embedding.scaled,
            source_embedding=net.enc_embedding.embedding.weight, target_embedding=net.dec_embedding.embedding.weight,
            output_projection=net.final_layer.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.enc_layers),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.dec_layers),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.enc_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.dec_layers],
        )

    def _net(self, vocab, d_model, n_heads, d_ff, n_layers, dropout) -> Transformer:
        return Transformer(n_layers, d_model, n_heads, d_ff, vocab, vocab, dropout)

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        # masked_loss: SparseCategoricalCrossentropy(from_logits=True, reduction='none') on the tokens
        # that are not padding; the tutorial divides by their count, the protocol asks for the sum
        per_token = F.cross_entropy(logits, target, reduction="none")
        return (per_token * (target != pad_id)).sum()

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return CustomSchedule(d_model, warmup_steps)(step - 1)   # optimizer.iterations is 0 at update 1

    def hyperparameters(self):
        return {"label_smoothing": (0.0, "masked_loss: SparseCategoricalCrossentropy, no smoothing"),
                "warmup_steps": (4000, "CustomSchedule(warmup_steps=4000)"),
                "dropout_base": (0.1, "dropout_rate = 0.1")}


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: layer(x), self_attention=lambda x: layer.self_attention.attend(x),
                             feed_forward=layer.ffn.seq, norms=(layer.self_attention.layernorm, layer.ffn.layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory),
        self_attention=lambda x: layer.causal_self_attention.attend(x),
        cross_attention=lambda x, memory: layer.cross_attention.attend(x, memory),
        feed_forward=layer.ffn.seq,
        norms=(layer.causal_self_attention.layernorm, layer.cross_attention.layernorm, layer.ffn.layer_norm))


def adapter() -> Adapter:
    return KerasPortAdapter()
