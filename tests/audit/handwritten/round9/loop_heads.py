"""A Transformer whose attention loops over its heads in Python with ``torch.einsum``, as numpy
ports and course notebooks write it, with the mask applied **after** the softmax, and an adapter
written from docs/audit.md (issue 43, ninth round).

Its choices: per-head projection matrices stored as (h, d_model, d_k) parameters; each head is
``softmax(einsum(q, k) / sqrt(d_k))`` and then ``masked_fill(~mask, 0)`` on the probabilities (a
plausible bug: the masked keys still sit in the softmax's normaliser, so the kept weights sum to
less than 1 and depend on the hidden keys' scores), then ``einsum`` with the values; the heads are
concatenated by ``torch.stack`` and mapped by W^O. Boolean masks, True = attend (the causal
``tril`` and the source's non-padding positions). Everything else is the paper's base model:
post-norm, ReLU feed-forward layers, interleaved sinusoids, embeddings scaled by sqrt(d_model) and
shared by both stacks and the output, no final norms, the paper's recipe.

Departures from the paper: the masked attention is not Eq. 1's softmax over the kept keys; the
decoder's position i reads the later positions through the normaliser; padding moves the outputs.
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


def attention_head(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """One head: q (..., n, d_k), k (..., m, d_k), v (..., m, d_v); mask broadcast to (..., n, m)."""
    scores = torch.einsum("...nd,...md->...nm", q, k) / math.sqrt(q.size(-1))
    p = scores.softmax(dim=-1)
    if mask is not None:
        p = p.masked_fill(~mask, 0.0)
    return torch.einsum("...nm,...md->...nd", p, v)


class LoopMultiHead(nn.Module):
    def __init__(self, d_model: int, h: int, dropout: float) -> None:
        super().__init__()
        d_k = d_model // h
        self.h = h
        self.w_q, self.w_k, self.w_v = (nn.Parameter(torch.empty(h, d_model, d_k)) for _ in range(3))
        self.w_o = nn.Parameter(torch.empty(h * d_k, d_model))
        self.b_o = nn.Parameter(torch.zeros(d_model))
        for w in (self.w_q, self.w_k, self.w_v, self.w_o):
            nn.init.xavier_uniform_(w)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q_in: Tensor, k_in: Tensor, v_in: Tensor, mask: Tensor | None = None) -> Tensor:
        heads = []
        for i in range(self.h):
            q = torch.einsum("bnd,dk->bnk", q_in, self.w_q[i])
            k = torch.einsum("bnd,dk->bnk", k_in, self.w_k[i])
            v = torch.einsum("bnd,dk->bnk", v_in, self.w_v[i])
            heads.append(attention_head(q, k, v, mask))
        concat = torch.stack(heads, dim=2).flatten(2)
        return self.dropout(concat) @ self.w_o + self.b_o


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attn, self.ff = LoopMultiHead(d_model, h, 0.0), FeedForward(d_model, d_ff, 0.0)
        self.ln1, self.ln2, self.drop = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.ln1(x + self.drop(self.attn(x, x, x, mask)))
        return self.ln2(x + self.drop(self.ff(x)))


def causal(n: int, device: torch.device) -> Tensor:
    return torch.tril(torch.ones(n, n, dtype=torch.bool, device=device))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.src_attn = LoopMultiHead(d_model, h, 0.0), LoopMultiHead(d_model, h, 0.0)
        self.ff = FeedForward(d_model, d_ff, 0.0)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def masked_self_attention(self, x: Tensor) -> Tensor:
        return self.self_attn(x, x, x, causal(x.size(1), x.device))

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None) -> Tensor:
        x = self.ln1(x + self.drop(self.masked_self_attention(x)))
        x = self.ln2(x + self.drop(self.src_attn(x, memory, memory, src_mask)))
        return self.ln3(x + self.drop(self.ff(x)))


class LoopTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, h: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.emb = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.emb.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers))
        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.emb(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        mask, x = (src != PAD)[:, None, :], self.drop(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.enc:
            x = layer(x, mask)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.drop(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.dec:
            x = layer(x, memory, (src != PAD)[:, None, :])
        return x @ self.emb.weight.T


# -- the adapter ------------------------------------------------------------------------------

class LoopHeadsAdapter(PaperRecipe, Adapter):
    name = "heads looped with einsum, mask applied after the softmax (hand-written)"

    def attention(self, query, key, value, mask):
        return attention_head(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        return LoopMultiHead(d_model, n_heads, 0.0).eval()

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.linear1.weight.T, ff.linear1.bias, ff.linear2.weight.T, ff.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: LoopTransformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.emb.weight,
            target_embedding=net.emb.weight, output_projection=net.emb.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.enc),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.dec),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.enc],
            decoder_layers=[_decoder_parts(layer) for layer in net.dec])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(LoopTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(LoopTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(),
                           vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.attn(x, x, x), feed_forward=layer.ff,
                             norms=(layer.ln1, layer.ln2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.masked_self_attention,
                             cross_attention=lambda x, memory: layer.src_attn(x, memory, memory), feed_forward=layer.ff,
                             norms=(layer.ln1, layer.ln2, layer.ln3))


def adapter() -> Adapter:
    return LoopHeadsAdapter()
