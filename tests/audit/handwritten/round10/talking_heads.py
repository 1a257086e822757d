"""Talking-heads attention (Shazeer et al., 2020) in an otherwise paper-faithful encoder-decoder, as
a user adds it to a plain PyTorch Transformer, and an adapter written from docs/audit.md (issue 43,
tenth round).

Its choices: q, k and v projected by three ``nn.Linear``s and split into h heads; the scaled
logits Q K^T / sqrt(d_k) of the h heads are mixed by a learned (h, h) matrix *before* the softmax,
and the h weight matrices by another (h, h) matrix *after* it (both ``einsum("bhnm,hg->bgnm")``,
initialised N(0, 1/h) as the paper's mesh-tensorflow code does); boolean masks (True = attend) are
applied to the mixed logits. The shell (``TalkingHeadsTransformer``) is the paper's base model:
post-norm, ReLU feed-forward layers, interleaved sinusoids, embeddings scaled by sqrt(d_model) and
shared by both stacks and the output, no final norms, the paper's recipe; the attention class is an
attribute of the shell (``Attention``) so that experiments swap it.

Departures from the paper: the heads are not h independent Attention(Q W_i^Q, K W_i^K, V W_i^V):
each head's logits and weights are mixtures of every head's (Eq. 1 does not hold for one head).
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


def mixing(h: int) -> nn.Parameter:
    return nn.Parameter(torch.randn(h, h) * h ** -0.5)


def talking_heads_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, pre: Tensor,
                            post: Tensor) -> Tensor:
    """q, k, v (batch, h, n, d); ``pre``/``post`` (h, h) mix the heads' logits and weights."""
    logits = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    logits = torch.einsum("bhnm,hg->bgnm", logits, pre)
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    weights = torch.einsum("bhnm,hg->bgnm", logits.softmax(dim=-1), post)
    return weights @ v


class TalkingHeadsAttention(nn.Module):
    def __init__(self, d_model: int, h: int) -> None:
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.pre_softmax, self.post_softmax = mixing(h), mixing(h)

    def split(self, x: Tensor) -> Tensor:
        return x.view(x.size(0), x.size(1), self.h, self.d_k).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = self.split(self.q_proj(query)), self.split(self.k_proj(key)), self.split(self.v_proj(value))
        out = talking_heads_attention(q, k, v, mask, self.pre_softmax, self.post_softmax)
        return self.out_proj(out.transpose(1, 2).reshape(query.shape))


def causal(n: int, device: torch.device) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


class EncoderLayer(nn.Module):
    def __init__(self, attention: type, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.ffn = attention(d_model, h), FeedForward(d_model, d_ff, 0.0)
        self.norm1, self.norm2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def attend(self, x: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        return self.self_attn(x, x, x, pad_mask)

    def forward(self, x: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.attend(x, pad_mask)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, attention: type, cross: type, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = attention(d_model, h), cross(d_model, h)
        self.ffn = FeedForward(d_model, d_ff, 0.0)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def attend(self, x: Tensor) -> Tensor:
        return self.self_attn(x, x, x, causal(x.size(1), x.device))

    def attend_memory(self, x: Tensor, memory: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        return self.cross_attn(x, memory, memory, pad_mask)

    def forward(self, x: Tensor, memory: Tensor, pad_mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.attend(x)))
        x = self.norm2(x + self.dropout(self.attend_memory(x, memory, pad_mask)))
        return self.norm3(x + self.dropout(self.ffn(x)))


class TalkingHeadsTransformer(nn.Module):
    Attention: type = TalkingHeadsAttention
    CrossAttention: type = TalkingHeadsAttention
    Encoder: type = EncoderLayer
    Decoder: type = DecoderLayer

    def __init__(self, vocab: int, d_model: int, h: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, 0.0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(self.Encoder(self.Attention, d_model, h, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(self.Decoder(self.Attention, self.CrossAttention, d_model, h, d_ff, dropout)
                                     for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        x, pad_mask = self.dropout(self.embed(src) + self.pe[: src.size(1)]), (src != PAD)[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, pad_mask)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, (src != PAD)[:, None, None, :])
        return F.linear(x, self.embedding.weight)


# -- the adapter ------------------------------------------------------------------------------

class ShellAdapter(PaperRecipe, Adapter):
    """An adapter of the shell, for any ``Net`` built on :class:`TalkingHeadsTransformer`."""

    Net: type = TalkingHeadsTransformer

    def multi_head_attention(self, d_model, n_heads):
        return self.Net.Attention(d_model, n_heads).eval()

    def multi_head_cross_attention(self, d_model, n_heads):
        return self.Net.CrossAttention(d_model, n_heads).eval()

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.linear1.weight.T, ff.linear1.bias, ff.linear2.weight.T, ff.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return encoder_parts(self.Net.Encoder(self.Net.Attention, d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        layer = self.Net.Decoder(self.Net.Attention, self.Net.CrossAttention, d_model, n_heads, d_ff, 0.0)
        return decoder_parts(layer.eval())

    def _parts(self, net: TalkingHeadsTransformer, vocab: int, d_model: int) -> ModelParts:
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
            encoder_layers=[encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(self.Net(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(self.Net(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=layer.attend, feed_forward=layer.ffn,
                             norms=(layer.norm1, layer.norm2))


def decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.attend,
                             cross_attention=layer.attend_memory, feed_forward=layer.ffn,
                             norms=(layer.norm1, layer.norm2, layer.norm3))


class TalkingHeadsAdapter(ShellAdapter):
    name = "talking-heads attention (hand-written)"

    def attention(self, query, key, value, mask):
        h = query.size(1)
        with torch.random.fork_rng():
            torch.manual_seed(h)
            pre, post = mixing(h).to(query.device), mixing(h).to(query.device)
        return talking_heads_attention(query, key, value, mask, pre.detach(), post.detach())


def adapter() -> Adapter:
    return TalkingHeadsAdapter()
