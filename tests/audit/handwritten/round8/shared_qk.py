"""Shared-QK attention (Kitaev, Kaiser and Levskaya, 2020, "Reformer", Section 2: "Shared-QK
Transformer"), full (not hashed) as trax's ``SelfAttention(share_qk=True)`` computes it in the
paper's base model, and an adapter written from docs/audit.md (issue 43, eighth round).

Its choices: every self-attention (encoder and decoder) has no key projection: the keys are the
queries, length-normalised (trax's ``length_normalized``: k_j = q_j / ||q_j||), the queries are
scaled by d_k^-0.5, and a position may not attend to itself unless nothing else is visible:
trax's ``mask_self`` subtracts 1e5 on the diagonal (so the decoder's first position still
attends to itself). Masks are additive (-1e9 at the future and at padding keys). The
encoder-decoder attention is the ordinary scaled dot product with its own key projection. The
rest is the paper's base model: post-norm, ReLU FFN, interleaved sinusoids, embeddings scaled by
sqrt(d_model) and shared by both stacks and the output projection, the paper's recipe.

Departures from the paper: the self-attentions are not Eq. 1 on independent keys (K is the
normalised Q, the diagonal is suppressed), and have no W^K (Table 3's counts).
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
SELF_MASK_VALUE, MASK_VALUE = -1e5, -1e9


def length_normalized(x: Tensor, epsilon: float = 1e-6) -> Tensor:
    variance = (x * x).sum(-1, keepdim=True)
    return x * torch.rsqrt(variance + epsilon)


def shared_qk_attend(q: Tensor, shared: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
    """trax's ``attend`` with shared QK: the keys are ``shared`` (the queries, in the model)
    length-normalised; q, shared, v (batch, heads, n, d); bias additive, broadcast to the scores."""
    k = length_normalized(shared)
    dots = (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)
    dots = dots + SELF_MASK_VALUE * torch.eye(q.size(2), k.size(2), dtype=dots.dtype, device=dots.device)
    if bias is not None:
        dots = dots + bias
    return torch.softmax(dots, dim=-1) @ v


def dot_product_attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
    dots = (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)
    return torch.softmax(dots + bias if bias is not None else dots, dim=-1) @ v


def to_bias(keep: Tensor | None) -> Tensor | None:
    return None if keep is None else (~keep).to(torch.float32) * MASK_VALUE


class SelfAttention(nn.Module):
    """Shared-QK self-attention: a query and a value projection, no key projection."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        heads = lambda t: t.view(b, n, self.n_heads, d // self.n_heads).transpose(1, 2)
        q = heads(self.w_q(x))
        out = shared_qk_attend(q, q, heads(self.w_v(x)), to_bias(keep))
        return self.w_o(self.dropout(out).transpose(1, 2).reshape(b, n, d))


class EncDecAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, keep: Tensor | None = None, values: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        values = memory if values is None else values
        heads = lambda t: t.view(b, -1, self.n_heads, d // self.n_heads).transpose(1, 2)
        out = dot_product_attend(heads(self.w_q(x)), heads(self.w_k(memory)), heads(self.w_v(values)), to_bias(keep))
        return self.w_o(self.dropout(out).transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.dense_1, self.dense_2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dense_2(self.dropout(F.relu(self.dense_1(x))))


class EncoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attention, self.feed_forward = SelfAttention(d_model, n_heads, dropout), FeedForward(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        x = self.norm_1(x + self.dropout(self.attention(x, keep)))
        return self.norm_2(x + self.dropout(self.feed_forward(x)))


def causal_keep(n: int, device: torch.device) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attention, self.enc_dec_attention = SelfAttention(d_model, n_heads, dropout), EncDecAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm_1, self.norm_2, self.norm_3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, memory_keep: Tensor | None = None) -> Tensor:
        x = self.norm_1(x + self.dropout(self.attention(x, causal_keep(x.size(1), x.device))))
        x = self.norm_2(x + self.dropout(self.enc_dec_attention(x, memory, memory_keep)))
        return self.norm_3(x + self.dropout(self.feed_forward(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    position = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return pe


class SharedQKTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embedding.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        x, keep = self.dropout(self.embed(src) + self.pe[: src.size(1)]), src.ne(PAD)[:, None, None, :]
        for block in self.encoder:
            x = block(x, keep)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for block in self.decoder:
            x = block(x, memory, src.ne(PAD)[:, None, None, :])
        return x @ self.embedding.weight.T


# -- the adapter ------------------------------------------------------------------------------

class SharedQKAdapter(PaperRecipe, Adapter):
    name = "shared-QK attention, Reformer's full-attention form (trax share_qk=True, hand-written)"

    def attention(self, query, key, value, mask):
        return dot_product_attend(query, key, value, to_bias(mask))   # the encoder-decoder attention's function

    def attention_paths(self):
        # the self-attentions' function: the keys normalised, the diagonal suppressed (the model gives its queries as keys)
        return {"attention": self.attention,
                "shared-QK self-attention": lambda query, key, value, mask: shared_qk_attend(query, key, value, to_bias(mask))}

    def multi_head_attention(self, d_model, n_heads):
        attention = SelfAttention(d_model, n_heads).eval()
        return lambda q, k, v: attention(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        attention = EncDecAttention(d_model, n_heads).eval()
        return lambda q, k, v: attention(q, k, values=v)

    def feed_forward(self, d_model, d_ff):
        ffn = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.dense_1.weight.T, ffn.dense_1.bias, ffn.dense_2.weight.T, ffn.dense_2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderBlock(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderBlock(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: SharedQKTransformer, vocab: int, d_model: int) -> ModelParts:
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
            encoder_layers=[_encoder_parts(block) for block in net.encoder],
            decoder_layers=[_decoder_parts(block) for block in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(SharedQKTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(SharedQKTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(block: EncoderBlock) -> EncoderLayerParts:
    return EncoderLayerParts(layer=block, self_attention=lambda x: block.attention(x), feed_forward=block.feed_forward,
                             norms=(block.norm_1, block.norm_2))


def _decoder_parts(block: DecoderBlock) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: block(x, memory),
        self_attention=lambda x: block.attention(x, causal_keep(x.size(1), x.device)),
        cross_attention=lambda x, memory: block.enc_dec_attention(x, memory), feed_forward=block.feed_forward,
        norms=(block.norm_1, block.norm_2, block.norm_3))


def adapter() -> Adapter:
    return SharedQKAdapter()
