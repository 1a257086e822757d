"""A "modern attention" encoder-decoder written out as people now write one on top of the paper's
model (Llama-style attention in a post-norm Transformer), and an adapter written from
docs/audit.md (issue 43, fifth round).

Its choices: grouped-query attention (``n_kv_heads = 2`` key/value heads shared by groups of the
8 query heads; ``wq`` d -> h x d_head and a fused ``wkv`` d -> 2 x n_kv x d_head, no biases),
rotary position embeddings (GPT-NeoX's ``rotate_half``, base 10000) applied to the queries and
keys of the self-attentions, nothing added to the embeddings; ``F.scaled_dot_product_attention``
with ``enable_gqa=True``, ``is_causal=True`` in the decoder's self-attention and a boolean key
padding mask elsewhere; the rest as the paper: post-norm ``nn.LayerNorm``, ReLU feed-forward
layers with biases, dropout on each sub-layer's output and on the embeddings, one shared
embedding table scaled by sqrt(d_model) and tied to the output, label smoothing 0.1, Adam
(0.9, 0.98, 1e-9), Eq. 3 with update k at step k.

Departures from the paper: no absolute positions (rotary), keys and values shared by groups of
heads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts, absent
from repro.audit.zoo.keys_values import memory_of
from repro.audit.zoo.stack_input import first_layer_input

PAD, BOS, EOS = 0, 1, 2
NO_POSITIONS = "rotary position embeddings: positions rotate the queries and keys, nothing is added to the embeddings"


def rotary(n: int, head_dim: int, device, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    freqs = torch.outer(torch.arange(n, device=device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return x * cos + rotate_half(x) * sin


class GQAttention(nn.Module):
    def __init__(self, dim: int, n_heads: int, n_kv_heads: int = 2, rope: bool = True, causal: bool = False) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, min(n_kv_heads, n_heads), dim // n_heads
        self.rope, self.causal = rope, causal
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x: Tensor, context: Tensor | None = None, key_mask: Tensor | None = None) -> Tensor:
        b, n, _ = x.shape
        kv_in = x if context is None else context
        q = self.wq(x).view(b, n, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.wkv(kv_in).view(b, kv_in.size(1), 2, self.n_kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rope:
            cos, sin = rotary(n, self.head_dim, x.device)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        mask = None if key_mask is None else key_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal and mask is None,
                                           enable_gqa=True)
        return self.wo(y.transpose(1, 2).reshape(b, n, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.relu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int, hidden: int, dropout: float, decoder: bool) -> None:
        super().__init__()
        self.attention = GQAttention(dim, n_heads, causal=decoder)
        self.attention_norm = nn.LayerNorm(dim)
        self.cross = GQAttention(dim, n_heads, rope=False) if decoder else None
        self.cross_norm = nn.LayerNorm(dim) if decoder else None
        self.feed_forward, self.ffn_norm = FeedForward(dim, hidden), nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, memory: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, key_mask=mask)))
        if self.cross is not None:
            x = self.cross_norm(x + self.dropout(self.cross(x, memory, memory_mask)))
        return self.ffn_norm(x + self.dropout(self.feed_forward(x)))


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        nn.init.normal_(self.tok_embeddings.weight, std=dim ** -0.5)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(Block(dim, n_heads, hidden, dropout, decoder=False) for _ in range(n_layers))
        self.decoder = nn.ModuleList(Block(dim, n_heads, hidden, dropout, decoder=True) for _ in range(n_layers))
        self.scale = math.sqrt(dim)

    def embed(self, ids: Tensor) -> Tensor:
        return self.tok_embeddings(ids) * self.scale

    def encode(self, src: Tensor) -> Tensor:
        h, mask = self.dropout(self.embed(src)), src != PAD
        for block in self.encoder:
            h = block(h, mask)
        return h

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, h = self.encode(src), self.dropout(self.embed(tgt))
        for block in self.decoder:
            h = block(h, memory=memory, memory_mask=src != PAD)
        return h @ self.tok_embeddings.weight.T


# -- the adapter ------------------------------------------------------------------------------

class RotaryGQAAdapter(Adapter):
    name = "Rotary + grouped-query attention, post-norm (hand-written)"

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = GQAttention(d_model, n_heads).eval()

        def call(q, k, v):
            if memory_of(q, k, v, "the self-attention (wkv)") is not None:
                raise ValueError("the rotary self-attention attends over its own input only")
            return attn(q)
        return call

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ff, ff.w1.weight.T, ff.w1.bias, ff.w2.weight.T, ff.w2.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", NO_POSITIONS)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(Block(d_model, n_heads, d_ff, 0.0, decoder=False).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(Block(d_model, n_heads, d_ff, 0.0, decoder=True).eval())

    def _parts(self, net: Seq2Seq, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed,
            source_embedding=net.tok_embeddings.weight, target_embedding=net.tok_embeddings.weight,
            output_projection=net.tok_embeddings.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(block) for block in net.encoder],
            decoder_layers=[_decoder_parts(block) for block in net.decoder],
            encoder_positions=absent(NO_POSITIONS), decoder_positions=absent(NO_POSITIONS),
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(Seq2Seq(vocab_size, d_model, n_layers, n_heads, d_ff, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(Seq2Seq(vocab_size, d_model, n_layers, n_heads, d_ff, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "label_smoothing=0.1"), "warmup_steps": (4000, "warmup 4000"),
                "dropout_base": (0.1, "dropout 0.1")}


def _encoder_parts(block: Block) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: block(x), self_attention=lambda x: block.attention(x),
                             feed_forward=block.feed_forward, norms=(block.attention_norm, block.ffn_norm))


def _decoder_parts(block: Block) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: block(x, memory=memory), self_attention=lambda x: block.attention(x),
                             cross_attention=lambda x, memory: block.cross(x, memory), feed_forward=block.feed_forward,
                             norms=(block.attention_norm, block.cross_norm, block.ffn_norm))


def adapter() -> Adapter:
    return RotaryGQAAdapter()
