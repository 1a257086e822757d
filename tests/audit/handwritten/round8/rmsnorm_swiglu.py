"""An encoder-decoder written as LLaMA writes its blocks (``RMSNorm``, SwiGLU feed-forward layers,
no biases, pre-norm, no dropout), with GPT-2's learned absolute position tables, untied
embeddings and nanoGPT's training loop, and an adapter written from docs/audit.md (issue 43,
eighth round).

Its choices: each block is ``h = x + attention(attention_norm(x))``, ``out = h +
feed_forward(ffn_norm(h))`` with ``RMSNorm(eps=1e-6)`` (x * rsqrt(mean(x^2) + eps) * weight: no
mean subtracted, no bias) and a final RMSNorm per stack; ``FeedForward`` is LLaMA's
``w2(silu(w1(x)) * w3(x))`` with hidden = 2/3 of the d_ff asked for, rounded up to a multiple of
256 (1536 for d_ff = 2048); attention through ``F.scaled_dot_product_attention`` with
``is_causal=True`` in the decoder's self-attention and a boolean key-padding mask elsewhere;
``nn.Linear(..., bias=False)`` everywhere; a learned position table per stack
(``nn.Embedding(1024, d_model)``) added to the unscaled token embeddings; a source embedding, a
target embedding and an output head, each its own matrix. Training as nanoGPT's ``train.py``:
AdamW (0.9, 0.95), eps 1e-8, weight decay 0.1, ``get_lr``: linear warmup over 2000 iterations
then cosine decay from 6e-4 to 6e-5 over 600000, set before each step (iteration ``it`` = update
k - 1), ``F.cross_entropy(ignore_index=pad)`` with no label smoothing, dropout 0.

Departures: pre-norm RMS norms, a gated feed-forward layer of three matrices and another width,
no biases, learned positions, no sqrt(d_model) scale and no sharing of the embeddings, AdamW and
another schedule, no label smoothing, no dropout.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

PAD, BOS, EOS = 0, 1, 2
MULTIPLE_OF = 256
BLOCK_SIZE = 1024
LEARNING_RATE, MIN_LR, WARMUP_ITERS, LR_DECAY_ITERS = 6e-4, 6e-5, 2000, 600000


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def _norm(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        return self._norm(x.float()).type_as(x) * self.weight


def hidden_width(d_ff: int) -> int:
    """LLaMA's ``FeedForward``: 2/3 of the width asked for, rounded up to a multiple of 256."""
    hidden = int(2 * d_ff / 3)
    return MULTIPLE_OF * ((hidden + MULTIPLE_OF - 1) // MULTIPLE_OF)


class FeedForward(nn.Module):
    def __init__(self, dim: int, d_ff: int) -> None:
        super().__init__()
        hidden = hidden_width(d_ff)
        self.w1, self.w2, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False), nn.Linear(dim, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        memory = x if memory is None else memory
        bsz, seqlen, _ = x.shape
        heads = lambda t: t.view(bsz, t.size(1), self.n_heads, self.head_dim).transpose(1, 2)
        xq, xk, xv = heads(self.wq(x)), heads(self.wk(memory)), heads(self.wv(memory))
        output = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=mask, is_causal=is_causal)
        return self.wo(output.transpose(1, 2).reshape(bsz, seqlen, -1))


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.attention, self.feed_forward = Attention(dim, n_heads), FeedForward(dim, d_ff)
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        h = x + self.attention(self.attention_norm(x), mask=mask)
        return h + self.feed_forward(self.ffn_norm(h))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.attention, self.cross_attention, self.feed_forward = Attention(dim, n_heads), Attention(dim, n_heads), FeedForward(dim, d_ff)
        self.attention_norm, self.cross_attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim), RMSNorm(dim)

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        h = x + self.attention(self.attention_norm(x), is_causal=True)
        h = h + self.cross_attention(self.cross_attention_norm(h), memory, memory_mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, vocab: int, dim: int, n_heads: int, d_ff: int, n_layers: int) -> None:
        super().__init__()
        self.src_embeddings, self.tgt_embeddings = nn.Embedding(vocab, dim), nn.Embedding(vocab, dim)
        self.src_positions, self.tgt_positions = nn.Embedding(BLOCK_SIZE, dim), nn.Embedding(BLOCK_SIZE, dim)
        self.encoder = nn.ModuleList(EncoderBlock(dim, n_heads, d_ff) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(dim, n_heads, d_ff) for _ in range(n_layers))
        self.encoder_norm, self.decoder_norm = RMSNorm(dim), RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed_source(self, src: Tensor) -> Tensor:
        return self.src_embeddings(src) + self.src_positions(torch.arange(src.size(1), device=src.device))

    def embed_target(self, tgt: Tensor) -> Tensor:
        return self.tgt_embeddings(tgt) + self.tgt_positions(torch.arange(tgt.size(1), device=tgt.device))

    def encode(self, src: Tensor) -> Tensor:
        h, mask = self.embed_source(src), src.ne(PAD)[:, None, None, :]
        for layer in self.encoder:
            h = layer(h, mask)
        return self.encoder_norm(h)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, h = self.encode(src), self.embed_target(tgt)
        for layer in self.decoder:
            h = layer(h, memory, src.ne(PAD)[:, None, None, :])
        return self.output(self.decoder_norm(h)).float()


def get_lr(it: int) -> float:
    """nanoGPT's ``get_lr``: linear warmup, then cosine decay to ``MIN_LR``."""
    if it < WARMUP_ITERS:
        return LEARNING_RATE * (it + 1) / (WARMUP_ITERS + 1)
    if it > LR_DECAY_ITERS:
        return MIN_LR
    decay_ratio = (it - WARMUP_ITERS) / (LR_DECAY_ITERS - WARMUP_ITERS)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (LEARNING_RATE - MIN_LR)


def configure_optimizers(params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=LEARNING_RATE, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


# -- the adapter ------------------------------------------------------------------------------

class LlamaStyleAdapter(Adapter):
    name = "RMSNorm + SwiGLU encoder-decoder, LLaMA blocks with nanoGPT's loop (hand-written)"

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        attention = Attention(d_model, n_heads).eval()
        return lambda q, k, v: attention(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        attention = Attention(d_model, n_heads).eval()
        return lambda q, k, v: _cross(attention, q, k, v)

    def feed_forward(self, d_model, d_ff):
        # Eq. 2's W_1 and W_2 are the gate's w1 and the output's w2; the value branch w3 has no place in it
        ffn = FeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ffn, ffn.w1.weight.T, None, ffn.w2.weight.T, None)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "learned position tables only (ModelParts.encoder_positions)")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderBlock(d_model, n_heads, d_ff).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderBlock(d_model, n_heads, d_ff).eval())

    def _parts(self, net: Transformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.src_embeddings, embed_target=net.tgt_embeddings,
            source_embedding=net.src_embeddings.weight, target_embedding=net.tgt_embeddings.weight,
            output_projection=net.output.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encoder_positions=lambda n: net.src_positions.weight[:n], decoder_positions=lambda n: net.tgt_positions.weight[:n],
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(Transformer(vocab_size, d_model, n_heads, d_ff, n_layers).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        # the model has no dropout: the rate asked for has nowhere to go
        return self._parts(Transformer(vocab_size, d_model, n_heads, d_ff, n_layers).train(), vocab_size, d_model)

    def optimizer(self, params):
        return configure_optimizers(params)

    def learning_rate(self, step, d_model, warmup_steps):
        return get_lr(step - 1)   # train.py sets the rate of iteration it = step - 1 before its update

    def loss(self, logits, target, pad_id, smoothing):
        # the project's loss: no smoothing term whatever the rate asked for
        return F.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")

    def hyperparameters(self):
        return {"label_smoothing": (0.0, "train.py: F.cross_entropy(ignore_index=pad), no label_smoothing"),
                "warmup_steps": (WARMUP_ITERS, "train.py warmup_iters = 2000"),
                "dropout_base": (0.0, "model.py: LLaMA blocks have no dropout")}


def _cross(attention: Attention, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    bsz, n, dim = q.shape
    heads = lambda t: t.view(bsz, t.size(1), attention.n_heads, attention.head_dim).transpose(1, 2)
    out = F.scaled_dot_product_attention(heads(attention.wq(q)), heads(attention.wk(k)), heads(attention.wv(v)))
    return attention.wo(out.transpose(1, 2).reshape(bsz, n, dim))


def _encoder_parts(block: EncoderBlock) -> EncoderLayerParts:
    return EncoderLayerParts(layer=block, self_attention=lambda x: block.attention(x), feed_forward=block.feed_forward,
                             norms=(block.attention_norm, block.ffn_norm))


def _decoder_parts(block: DecoderBlock) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: block(x, memory), self_attention=lambda x: block.attention(x, is_causal=True),
        cross_attention=lambda x, memory: block.cross_attention(x, memory), feed_forward=block.feed_forward,
        norms=(block.attention_norm, block.cross_attention_norm, block.ffn_norm))


def adapter() -> Adapter:
    return LlamaStyleAdapter()
