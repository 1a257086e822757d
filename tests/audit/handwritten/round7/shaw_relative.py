"""Self-attention with relative position representations (Shaw, Uszkoreit and Vaswani, 2018), as
tensor2tensor's ``transformer_relative`` runs it (``dot_product_attention_relative``), written in
torch, and an adapter written from docs/audit.md (issue 43, seventh round).

Its choices: no positional encoding is added to the embeddings; every self-attention (encoder and
decoder) learns two tables of 2k + 1 rows (k = ``max_relative_position`` = 16), ``a^K`` and
``a^V``, shared by the heads, and computes e_ij = q_i (k_j + a^K_{clip(j - i)}) / sqrt(d_k) and
z_i = sum_j softmax(e)_ij (v_j + a^V_{clip(j - i)}) through ``_relative_attention_inner`` (the
queries transposed to (n, batch * heads, d) and multiplied by the (n, d, n) relation tables);
the encoder-decoder attention is the plain scaled dot product. Masks are t2t's additive -1e9
``attention_bias``. Everything else is the paper's base model: post-norm, ReLU FFN, embeddings
scaled by sqrt(d_model) and shared by both stacks and the output, the paper's recipe.

Departures from the paper: no absolute positions (Section 3.5), and a self-attention that is not
Eq. 1 and not position-free (relation terms inside the scores and the values).
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
MAX_RELATIVE_POSITION = 16


def attention_bias(keep: Tensor) -> Tensor:
    """t2t's bias from a boolean keep-mask: 0 where attended, -1e9 where not."""
    return (~keep).to(torch.float32) * -1e9


def relative_positions(length_q: int, length_k: int, device: torch.device) -> Tensor:
    """t2t's ``_generate_relative_positions_matrix(length_q, length_k, ...)``: j - i, clipped, shifted to >= 0."""
    q, k = torch.arange(length_q, device=device), torch.arange(length_k, device=device)
    return (k[None, :] - q[:, None]).clamp(-MAX_RELATIVE_POSITION, MAX_RELATIVE_POSITION) + MAX_RELATIVE_POSITION


def relative_attention_inner(x: Tensor, y: Tensor, z: Tensor, transpose: bool) -> Tensor:
    """x (b, h, n, m), y (b, h, n_k, d) or (b, h, n_k, m), relations z (n, n_k, d): x y^T + x z^T (or x y + x z)."""
    b, h, n = x.shape[:3]
    xy = x @ (y.transpose(-2, -1) if transpose else y)
    x_t = x.permute(2, 0, 1, 3).reshape(n, b * h, -1)
    xz = x_t @ (z.transpose(1, 2) if transpose else z)
    return xy + xz.reshape(n, b, h, -1).permute(1, 2, 0, 3)


def dot_product_attention_relative(q, k, v, bias, keys_table, values_table) -> Tensor:
    index = relative_positions(q.size(2), k.size(2), q.device)
    logits = relative_attention_inner(q / math.sqrt(q.size(-1)), k, keys_table(index), transpose=True)
    weights = torch.softmax(logits + bias if bias is not None else logits, dim=-1)
    return relative_attention_inner(weights, v, values_table(index), transpose=False)


def dot_product_attention(q, k, v, bias) -> Tensor:
    logits = (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)
    return torch.softmax(logits + bias if bias is not None else logits, dim=-1) @ v


class MultiheadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, relative: bool) -> None:
        super().__init__()
        self.q, self.k, self.v, self.output_transform = (nn.Linear(d_model, d_model) for _ in range(4))
        self.n_heads, self.relative = n_heads, relative
        if relative:
            depth = d_model // n_heads
            self.relative_keys = nn.Embedding(2 * MAX_RELATIVE_POSITION + 1, depth)
            self.relative_values = nn.Embedding(2 * MAX_RELATIVE_POSITION + 1, depth)

    def forward(self, x: Tensor, memory: Tensor | None = None, bias: Tensor | None = None) -> Tensor:
        memory = x if memory is None else memory
        b, d = x.size(0), x.size(2)
        split = lambda t: t.view(b, -1, self.n_heads, d // self.n_heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(memory)), split(self.v(memory))
        if self.relative:
            out = dot_product_attention_relative(q, k, v, bias, self.relative_keys, self.relative_values)
        else:
            out = dot_product_attention(q, k, v, bias)
        return self.output_transform(out.transpose(1, 2).reshape(b, -1, d))


class DenseReluDense(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.conv1, self.conv2, self.relu_dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(self.relu_dropout(F.relu(self.conv1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = MultiheadAttention(d_model, n_heads, relative=True)
        self.ffn = DenseReluDense(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, bias: Tensor | None = None) -> Tensor:
        x = self.norm_1(x + self.dropout(self.self_attention(x, bias=bias)))
        return self.norm_2(x + self.dropout(self.ffn(x)))


def causal_bias(n: int, device: torch.device) -> Tensor:
    return attention_bias(torch.ones(n, n, dtype=torch.bool, device=device).tril())


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = MultiheadAttention(d_model, n_heads, relative=True)
        self.encdec_attention = MultiheadAttention(d_model, n_heads, relative=False)
        self.ffn = DenseReluDense(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.norm_3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, memory_bias: Tensor | None = None) -> Tensor:
        x = self.norm_1(x + self.dropout(self.self_attention(x, bias=causal_bias(x.size(1), x.device))))
        x = self.norm_2(x + self.dropout(self.encdec_attention(x, memory, memory_bias)))
        return self.norm_3(x + self.dropout(self.ffn(x)))


class RelativeTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.shared = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.shared.weight, 0, d_model ** -0.5)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.shared(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        bias, x = attention_bias(src != PAD)[:, None, None, :], self.dropout(self.embed(src))
        for layer in self.encoder:
            x = layer(x, bias)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt))
        for layer in self.decoder:
            x = layer(x, memory, attention_bias(src != PAD)[:, None, None, :])
        return x @ self.shared.weight.T


# -- the adapter ------------------------------------------------------------------------------

def _bias(mask: Tensor | None) -> Tensor | None:
    return None if mask is None else attention_bias(mask)


class ShawRelativeAdapter(PaperRecipe, Adapter):
    name = "relative position representations, Shaw et al. 2018 (t2t transformer_relative, hand-written)"

    def attention(self, query, key, value, mask):
        return dot_product_attention(query, key, value, _bias(mask))

    def attention_paths(self):
        def relative(query, key, value, mask):
            # the self-attentions' relation-aware form, with relation tables initialised as a layer's
            tables = (nn.Embedding(2 * MAX_RELATIVE_POSITION + 1, query.size(-1)),
                      nn.Embedding(2 * MAX_RELATIVE_POSITION + 1, value.size(-1)))
            return dot_product_attention_relative(query, key, value, _bias(mask), *tables)

        return {"attention": self.attention, "relation-aware self-attention": relative}

    def multi_head_attention(self, d_model, n_heads):
        mha = MultiheadAttention(d_model, n_heads, relative=True).eval()
        return lambda q, k, v: mha(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        mha = MultiheadAttention(d_model, n_heads, relative=False).eval()
        return lambda q, k, v: _cross(mha, q, k, v)

    def feed_forward(self, d_model, d_ff):
        ffn = DenseReluDense(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.conv1.weight.T, ffn.conv1.bias, ffn.conv2.weight.T, ffn.conv2.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "positions enter only as relation tables inside the self-attentions")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: RelativeTransformer, vocab: int, d_model: int) -> ModelParts:
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
        return self._parts(RelativeTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(RelativeTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _cross(mha: MultiheadAttention, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Keys and values apart through the layer's own projections."""
    b, d = q.size(0), q.size(2)
    split = lambda t: t.view(b, -1, mha.n_heads, d // mha.n_heads).transpose(1, 2)
    out = dot_product_attention(split(mha.q(q)), split(mha.k(k)), split(mha.v(v)), None)
    return mha.output_transform(out.transpose(1, 2).reshape(b, -1, d))


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attention(x), feed_forward=layer.ffn,
                             norms=(layer.norm_1, layer.norm_2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory),
        self_attention=lambda x: layer.self_attention(x, bias=causal_bias(x.size(1), x.device)),
        cross_attention=lambda x, memory: layer.encdec_attention(x, memory),
        feed_forward=layer.ffn, norms=(layer.norm_1, layer.norm_2, layer.norm_3))


def adapter() -> Adapter:
    return ShawRelativeAdapter()
