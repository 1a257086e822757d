"""A Transformer whose multi-head attention holds a separate small projection per head, as the
paper writes it (Section 3.2.2: head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), W_i^Q of
d_model x d_k), and an adapter written from docs/audit.md (issue 43, sixth round).

Each head owns three ``nn.Linear(d_model, d_k)`` modules (``nn.ModuleList`` per projection), the
heads' outputs are concatenated and projected by W^O (``nn.Linear(h d_v, d_model)``). Otherwise the
base model as the paper describes it: post-norm, ReLU FFN, interleaved sinusoids, embeddings
scaled by sqrt(d_model) and shared by both stacks and the output projection, no final norms;
boolean masks (True = attend) through ``masked_fill``; the paper's recipe. Faithful.
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


def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class Head(nn.Module):
    """head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""

    def __init__(self, d_model: int, d_k: int, d_v: int) -> None:
        super().__init__()
        self.w_q, self.w_k, self.w_v = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k), nn.Linear(d_model, d_v)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        return scaled_dot_product(self.w_q(q), self.w_k(k), self.w_v(v), mask)


class MultiHead(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O."""

    def __init__(self, d_model: int, h: int) -> None:
        super().__init__()
        d_k = d_v = d_model // h
        self.heads = nn.ModuleList(Head(d_model, d_k, d_v) for _ in range(h))
        self.w_o = nn.Linear(h * d_v, d_model)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.w_o(torch.cat([head(q, k, v, mask) for head in self.heads], dim=-1))


class FFN(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w_1, self.w_2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(F.relu(self.w_1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attn, self.ffn = MultiHead(d_model, h), FFN(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.drop = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.norm_1(x + self.drop(self.attn(x, x, x, mask)))
        return self.norm_2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = MultiHead(d_model, h), MultiHead(d_model, h), FFN(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.norm_3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None) -> Tensor:
        causal = torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()
        x = self.norm_1(x + self.drop(self.self_attn(x, x, x, causal)))
        x = self.norm_2(x + self.drop(self.cross_attn(x, memory, memory, src_mask)))
        return self.norm_3(x + self.drop(self.ffn(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float).unsqueeze(1)
    i = torch.arange(0, d_model, 2, dtype=torch.float)
    angle = pos / torch.pow(10000.0, i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


class Transformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, h: int, d_ff: int, n: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embed.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.encoder, self.decoder = self.stacks(d_model, h, d_ff, n, dropout)

    def stacks(self, d_model, h, d_ff, n, dropout) -> tuple[nn.ModuleList, nn.ModuleList]:
        return (nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(n)),
                nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(n)))

    def embed_tokens(self, tokens: Tensor) -> Tensor:
        return self.embed(tokens) * math.sqrt(self.d_model)

    def inputs(self, tokens: Tensor) -> Tensor:
        return self.drop(self.embed_tokens(tokens) + self.pe[: tokens.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        mask = (src != PAD)[:, None, :]
        x = self.inputs(src)
        for layer in self.encoder:
            x = layer(x, mask)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, mask = self.encode(src), (src != PAD)[:, None, :]
        x = self.inputs(tgt)
        for layer in self.decoder:
            x = layer(x, memory, mask)
        return x @ self.embed.weight.T


# -- the adapter ------------------------------------------------------------------------------

class PerHeadAdapter(PaperRecipe, Adapter):
    name = "per-head projections W_i^Q, W_i^K, W_i^V (hand-written)"
    net_class = Transformer

    def attention(self, query, key, value, mask):
        return scaled_dot_product(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        return MultiHead(d_model, n_heads).eval()

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ffn = FFN(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.w_1.weight.T, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: Transformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed_tokens, embed_target=net.embed_tokens, source_embedding=net.embed.weight,
            target_embedding=net.embed.weight, output_projection=net.embed.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        net = self.net_class(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval()
        return self._parts(net, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = self.net_class(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train()
        return self._parts(net, vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.attn(x, x, x), feed_forward=layer.ffn,
                             norms=(layer.norm_1, layer.norm_2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    causal = lambda x: torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory),
                             self_attention=lambda x: layer.self_attn(x, x, x, causal(x)),
                             cross_attention=lambda x, memory: layer.cross_attn(x, memory, memory),
                             feed_forward=layer.ffn, norms=(layer.norm_1, layer.norm_2, layer.norm_3))


def adapter() -> Adapter:
    return PerHeadAdapter()
