"""A Transformer with ALBERT-style factorised embeddings, written as a compact research codebase
writes one, and an adapter written from docs/audit.md (issue 43, seventh round).

Its choices: the token embedding is factorised (Lan et al., 2020): ``word_embeddings``
(vocab x 128) and ``embedding_hidden_mapping_in`` (128 -> d_model, no bias), the product scaled by
sqrt(d_model); one such pair serves both stacks, and the logits are tied through the same
factorisation, x W_map E^T (so the vocab x d_model matrix of Section 3.4 is E W_map^T, one matrix
shared three ways, but never a parameter); attention with a fused ``qkv`` projection (d -> 3d) for
self-attention and ``q`` / ``kv`` for the cross-attention, ``masked_fill(~mask, -inf)``, scaled
by sqrt(d_k); post-norm layers, ReLU FFN, interleaved sinusoids. Training: AdamW (0.9, 0.98,
1e-9) with weight decay 0.01 (the script's default, on every parameter), Eq. 3's schedule, and a
hand-written label-smoothed loss ``(1 - eps) * nll + eps * smooth`` whose nll term skips padding
and whose smoothing term does not: padded target positions still get a gradient.

Departures from the paper: the embeddings hold vocab x 128 + 128 x d_model parameters (Table 3's
counts), decoupled weight decay (Section 5.3's Adam), padding in the smoothed loss (Section 5.4).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input
from tests.audit.handwritten.round6.paper_recipe import rate

PAD, BOS, EOS = 0, 1, 2
EMBEDDING_SIZE = 128


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, cross: bool = False) -> None:
        super().__init__()
        self.n_heads, self.cross = n_heads, cross
        if cross:
            self.q, self.kv = nn.Linear(d_model, d_model), nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        if self.cross:
            q, (k, v) = self.q(x), self.kv(memory).chunk(2, dim=-1)
        else:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
        heads = lambda t: t.reshape(b, -1, self.n_heads, d // self.n_heads).transpose(1, 2)
        return self.proj(attend(heads(q), heads(k), heads(v), mask).transpose(1, 2).reshape(b, n, d))


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc, self.out, self.drop = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.drop(F.relu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, decoder: bool) -> None:
        super().__init__()
        self.attn, self.mlp, self.drop = Attention(d_model, n_heads), MLP(d_model, d_ff, dropout), nn.Dropout(dropout)
        self.ln_attn, self.ln_mlp = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.decoder = decoder
        if decoder:
            self.cross, self.ln_cross = Attention(d_model, n_heads, cross=True), nn.LayerNorm(d_model)

    def self_attention(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.decoder:
            mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()
        return self.attn(x, mask=mask)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
        x = self.ln_attn(x + self.drop(self.self_attention(x, None if self.decoder else mask)))
        if self.decoder:
            x = self.ln_cross(x + self.drop(self.cross(x, memory, mask)))
        return self.ln_mlp(x + self.drop(self.mlp(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


class FactorizedEmbedding(nn.Module):
    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, EMBEDDING_SIZE, padding_idx=PAD)
        self.embedding_hidden_mapping_in = nn.Linear(EMBEDDING_SIZE, d_model, bias=False)
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding_hidden_mapping_in(self.word_embeddings(tokens)) * self.scale

    def logits(self, x: Tensor) -> Tensor:
        return (x @ self.embedding_hidden_mapping_in.weight) @ self.word_embeddings.weight.T

    def matrix(self) -> Tensor:
        """The vocab x d_model matrix the factorisation stands for, E W_map^T."""
        return self.word_embeddings.weight @ self.embedding_hidden_mapping_in.weight.T


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.embeddings = FactorizedEmbedding(vocab, d_model)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(Block(d_model, n_heads, d_ff, dropout, False) for _ in range(n_layers))
        self.decoder = nn.ModuleList(Block(d_model, n_heads, d_ff, dropout, True) for _ in range(n_layers))

    def inputs(self, tokens: Tensor) -> Tensor:
        return self.drop(self.embeddings(tokens) + self.pe[: tokens.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        x, mask = self.inputs(src), (src != PAD)[:, None, None, :]
        for block in self.encoder:
            x = block(x, mask=mask)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.inputs(tgt)
        for block in self.decoder:
            x = block(x, memory, (src != PAD)[:, None, None, :])
        return self.embeddings.logits(x)


def smoothed_loss(logits: Tensor, target: Tensor, pad: int, eps: float) -> Tensor:
    lprobs = F.log_softmax(logits.float(), dim=-1)
    nll = F.nll_loss(lprobs, target, ignore_index=pad, reduction="sum")
    smooth = -lprobs.mean(dim=-1).sum()               # every position, padding included
    return (1 - eps) * nll + eps * smooth


# -- the adapter ------------------------------------------------------------------------------

class FactorizedAdapter(Adapter):
    name = "ALBERT-style factorised embeddings, AdamW (hand-written)"

    def attention(self, query, key, value, mask):
        return attend(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = Attention(d_model, n_heads).eval()
        return lambda q, k, v: attn(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        attn = Attention(d_model, n_heads, cross=True).eval()
        return lambda q, k, v: _cross(attn, q, k, v)

    def feed_forward(self, d_model, d_ff):
        mlp = MLP(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(mlp, mlp.fc.weight.T, mlp.fc.bias, mlp.out.weight.T, mlp.out.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(Block(d_model, n_heads, d_ff, 0.0, False).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(Block(d_model, n_heads, d_ff, 0.0, True).eval())

    def _parts(self, net: Seq2Seq, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        matrix = net.embeddings.matrix()   # the one vocab x d_model matrix the three uses share
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embeddings, embed_target=net.embeddings, source_embedding=matrix,
            target_embedding=matrix, output_projection=matrix,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(block) for block in net.encoder],
            decoder_layers=[_decoder_parts(block) for block in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(Seq2Seq(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(Seq2Seq(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    def optimizer(self, params):
        return torch.optim.AdamW(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)

    def learning_rate(self, step, d_model, warmup_steps):
        return rate(step, d_model, warmup_steps)

    def loss(self, logits, target, pad_id, smoothing):
        return smoothed_loss(logits, target, pad_id, smoothing)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "train.py --smoothing 0.1"), "warmup_steps": (4000, "train.py --warmup 4000"),
                "dropout_base": (0.1, "train.py --dropout 0.1"), "beam_size": (4, "translate.py --beam 4"),
                "length_penalty": (0.6, "translate.py --alpha 0.6")}


def _cross(attn: Attention, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Keys and values apart through the fused kv projection's two halves."""
    b, n, d = q.shape
    w_k, w_v = attn.kv.weight.chunk(2, dim=0)
    b_k, b_v = attn.kv.bias.chunk(2)
    heads = lambda t: t.reshape(b, -1, attn.n_heads, d // attn.n_heads).transpose(1, 2)
    out = attend(heads(attn.q(q)), heads(F.linear(k, w_k, b_k)), heads(F.linear(v, w_v, b_v)), None)
    return attn.proj(out.transpose(1, 2).reshape(b, n, d))


def _encoder_parts(block: Block) -> EncoderLayerParts:
    return EncoderLayerParts(layer=block, self_attention=block.self_attention, feed_forward=block.mlp,
                             norms=(block.ln_attn, block.ln_mlp))


def _decoder_parts(block: Block) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: block(x, memory), self_attention=block.self_attention,
                             cross_attention=lambda x, memory: block.cross(x, memory), feed_forward=block.mlp,
                             norms=(block.ln_attn, block.ln_cross, block.ln_mlp))


def adapter() -> Adapter:
    return FactorizedAdapter()
