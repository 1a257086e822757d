"""Multi-query attention (Shazeer, 2019, "Fast Transformer Decoding: One Write-Head is All You
Need") in every attention of the paper's base model, written with ``torch.bmm`` on a folded
batch, and an adapter written from docs/audit.md (issue 43, eighth round).

Its choices: h query heads share one key head and one value head: ``k_proj`` and ``v_proj`` map
d_model to d_k = d_model / h (the paper's one head's width), ``q_proj`` and ``out_proj`` are
d_model x d_model. Since the keys have no head axis, the heads are folded into the query rows
(the paper's einsum ``bhnk,bmk->bhnm`` as one matrix product): the queries (batch, heads, n, d_k)
are reshaped to (batch, heads * n, d_k), scaled by d_k^-0.5 and multiplied by the keys
(batch, d_k, m) with ``torch.bmm``, giving scores (batch, heads * n, m); masks are repeated over
the heads with ``Tensor.repeat`` and applied with ``masked_fill(-inf)``; the weights times the
values (batch, m, d_k) are unfolded to (batch, n, heads * d_k). Self-attention, masked
self-attention and encoder-decoder attention all share the form. The rest is the paper's base:
post-norm, ReLU FFN, interleaved sinusoids, embeddings scaled by sqrt(d_model) and shared by
both stacks and the output projection, the paper's recipe.

Departures from the paper: one key and one value projection of width d_k instead of h of them,
so the model's parameter counts (Table 3) and the cost of the projections (Section 3.2.2:
"similar to that of single-head attention with full dimensionality") change with h.
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


def multiquery_attend(q: Tensor, k: Tensor, v: Tensor, keep: Tensor | None) -> Tensor:
    """q (batch, heads, n, d_k), k and v (batch, m, d_k), keep (batch, n or 1, m) boolean -> (batch, heads, n, d_v)."""
    bsz, heads, n, d_k = q.shape
    logits = torch.bmm(q.reshape(bsz, heads * n, d_k) * d_k ** -0.5, k.transpose(1, 2))   # (batch, heads * n, m)
    if keep is not None:
        keep = keep.expand(bsz, n, k.size(1)).repeat(1, heads, 1)
        logits = logits.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    return torch.bmm(weights, v).view(bsz, heads, n, v.size(-1))


class MultiQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.q_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.k_proj, self.v_proj = nn.Linear(d_model, self.d_k), nn.Linear(d_model, self.d_k)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, keep: Tensor | None = None) -> Tensor:
        bsz, n, d_model = x.shape
        q = self.q_proj(x).view(bsz, n, self.n_heads, self.d_k).transpose(1, 2)
        out = multiquery_attend(q, self.k_proj(memory), self.v_proj(memory), keep)
        return self.out_proj(self.dropout(out).transpose(1, 2).reshape(bsz, n, d_model))


def causal(n: int, device: torch.device) -> Tensor:
    return torch.ones(1, n, n, dtype=torch.bool, device=device).tril()


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.w_1, self.w_2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(F.relu(self.w_1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.ffn = MultiQueryAttention(d_model, n_heads, dropout), FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, keep)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.src_attn = MultiQueryAttention(d_model, n_heads, dropout), MultiQueryAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, memory_keep: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, causal(x.size(1), x.device))))
        x = self.norm2(x + self.dropout(self.src_attn(x, memory, memory_keep)))
        return self.norm3(x + self.dropout(self.ffn(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    position = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return pe


class MultiQueryTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.shared = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.shared.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.shared(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        x, keep = self.dropout(self.embed(src) + self.pe[: src.size(1)]), src.ne(PAD).unsqueeze(1)
        for layer in self.encoder:
            x = layer(x, keep)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src.ne(PAD).unsqueeze(1))
        return x @ self.shared.weight.T


# -- the adapter ------------------------------------------------------------------------------

class MultiQueryAdapter(PaperRecipe, Adapter):
    name = "multi-query attention through torch.bmm on heads folded into the rows (Shazeer 2019, hand-written)"

    def attention(self, query, key, value, mask):
        # Eq. 1 per head on (batch, heads, n, d_k): the model's function, one head's keys at a time
        outs = []
        for h in range(query.size(1)):
            keep = None if mask is None else mask[:, min(h, mask.size(1) - 1)].expand(query.size(0), query.size(2), key.size(2))
            outs.append(multiquery_attend(query[:, h : h + 1], key[:, h], value[:, h], keep))
        return torch.cat(outs, 1)

    def multi_head_attention(self, d_model, n_heads):
        mqa = MultiQueryAttention(d_model, n_heads).eval()
        return lambda q, k, v: mqa(q, q)

    def feed_forward(self, d_model, d_ff):
        ffn = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.w_1.weight.T, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: MultiQueryTransformer, vocab: int, d_model: int) -> ModelParts:
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
        return self._parts(MultiQueryTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(MultiQueryTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x), feed_forward=layer.ffn,
                             norms=(layer.norm1, layer.norm2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory),
        self_attention=lambda x: layer.self_attn(x, x, causal(x.size(1), x.device)),
        cross_attention=lambda x, memory: layer.src_attn(x, memory), feed_forward=layer.ffn,
        norms=(layer.norm1, layer.norm2, layer.norm3))


def adapter() -> Adapter:
    return MultiQueryAdapter()
