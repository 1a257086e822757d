"""A T5-style encoder-decoder written out as mesh-tensorflow's T5 (v1.0) runs it, in torch, and an
adapter written from docs/audit.md (issue 43, sixth round).

T5's choices, each a departure the audit should find: position enters only as a learned
relative-position bias on the self-attention logits (32 log-spaced buckets, shared by the layers
of a stack, computed in the first layer), no absolute positional encoding; no 1/sqrt(d_k) on
q k^T (folded into the query's initialisation, std (d_model d_k)^-0.5); pre-norm,
``x + dropout(sublayer(norm(x)))``; the norm an RMS norm with a weight and no bias or mean; no
biases anywhere (FFN ``wi``, ``wo`` included); a final RMS norm (and dropout) at the top of each
stack; one embedding shared by both stacks, unscaled, tied to the output with the decoder's output
multiplied by d_model^-0.5. Boolean masks turned into the additive -inf of the position bias.
Trained with Adafactor and an inverse-square-root schedule, no label smoothing: the optimizer is not
exposed here, only the loss and the settings.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts, absent
from repro.audit.zoo.stack_input import first_layer_input

PAD, EOS, UNK = 0, 1, 2   # T5's vocabulary: the decoder starts from the padding id


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def relative_position_bucket(relative_position: Tensor, bidirectional: bool, num_buckets: int = 32,
                             max_distance: int = 128) -> Tensor:
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret = (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return ret + torch.where(is_small, n, large)


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, has_bias: bool, bidirectional: bool, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads, self.d_kv, self.bidirectional = heads, d_model // heads, bidirectional
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))
        nn.init.normal_(self.q.weight, std=(d_model * self.d_kv) ** -0.5)   # the 1/sqrt(d_k), folded in
        for w in (self.k, self.v, self.o):
            nn.init.normal_(w.weight, std=d_model ** -0.5)
        self.relative_attention_bias = nn.Embedding(32, heads) if has_bias else None
        self.dropout = dropout

    def compute_bias(self, q_len: int, k_len: int, device=None) -> Tensor:
        ctx = torch.arange(q_len, device=device)[:, None]
        mem = torch.arange(k_len, device=device)[None, :]
        buckets = relative_position_bucket(mem - ctx, self.bidirectional)
        return self.relative_attention_bias(buckets).permute(2, 0, 1).unsqueeze(0)   # (1, heads, q, k)

    def forward(self, x: Tensor, kv: Tensor | None = None, position_bias: Tensor | None = None) -> Tensor:
        kv = x if kv is None else kv
        b = x.size(0)
        split = lambda t: t.view(b, -1, self.heads, self.d_kv).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(kv)), split(self.v(kv))
        scores = q @ k.transpose(-2, -1)          # no 1/sqrt(d_kv)
        if position_bias is not None:
            scores = scores + position_bias
        weights = F.dropout(torch.softmax(scores.float(), dim=-1), self.dropout, self.training)
        return self.o((weights @ v).transpose(1, 2).reshape(b, -1, self.heads * self.d_kv))


class DenseReluDense(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.wi, self.wo = nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.wo(self.dropout(F.relu(self.wi(x))))


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float, is_decoder: bool, has_bias: bool) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.self_attn = Attention(d_model, heads, has_bias, not is_decoder, dropout)
        self.norms = nn.ModuleList(RMSNorm(d_model) for _ in range(3 if is_decoder else 2))
        self.cross_attn = Attention(d_model, heads, False, True, dropout) if is_decoder else None
        self.ff = DenseReluDense(d_model, d_ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, position_bias: Tensor | None, memory: Tensor | None = None,
                memory_bias: Tensor | None = None) -> Tensor:
        x = x + self.drop(self.self_attn(self.norms[0](x), position_bias=position_bias))
        if self.is_decoder:
            x = x + self.drop(self.cross_attn(self.norms[1](x), memory, memory_bias))
        return x + self.drop(self.ff(self.norms[-1](x)))


def mask_bias(keep: Tensor) -> Tensor:
    return torch.zeros(keep.shape, device=keep.device).masked_fill(~keep, float("-inf"))


class Stack(nn.Module):
    def __init__(self, embed: nn.Embedding, d_model, heads, d_ff, n, dropout, is_decoder) -> None:
        super().__init__()
        self.embed_tokens, self.is_decoder = embed, is_decoder
        self.block = nn.ModuleList(Block(d_model, heads, d_ff, dropout, is_decoder, i == 0) for i in range(n))
        self.final_layer_norm, self.dropout = RMSNorm(d_model), nn.Dropout(dropout)

    def self_bias(self, n: int, device=None) -> Tensor:
        """The relative-position bias (1, heads, n, n) every layer adds, the causal mask apart."""
        return self.block[0].self_attn.compute_bias(n, n, device)

    def forward(self, ids: Tensor, memory: Tensor | None = None, memory_keep: Tensor | None = None) -> Tensor:
        n = ids.size(1)
        keep = ids.ne(PAD)[:, None, None, :] if not self.is_decoder else \
            torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        bias = self.self_bias(n, ids.device) + mask_bias(keep)
        x = self.dropout(self.embed_tokens(ids))
        memory_bias = None if memory_keep is None else mask_bias(memory_keep)
        for block in self.block:
            x = block(x, bias, memory, memory_bias)
        return self.dropout(self.final_layer_norm(x))


class T5Style(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, d_ff: int, n: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.shared = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.shared.weight, std=1.0)
        self.encoder = Stack(self.shared, d_model, heads, d_ff, n, dropout, False)
        self.decoder = Stack(self.shared, d_model, heads, d_ff, n, dropout, True)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory = self.encoder(src)
        out = self.decoder(tgt, memory, src.ne(PAD)[:, None, None, :])
        return (out * self.d_model ** -0.5) @ self.shared.weight.T


def adafactor_rsqrt(step: int, warmup: int = 10000) -> float:
    return 1.0 / math.sqrt(max(step, warmup))


# -- the adapter ------------------------------------------------------------------------------

class T5StyleAdapter(Adapter):
    name = "T5-style encoder-decoder (hand-written, mesh-tf v1.0)"

    def attention(self, query, key, value, mask):
        scores = query @ key.transpose(-2, -1)
        if mask is not None:
            scores = scores + mask_bias(mask)
        return torch.softmax(scores, dim=-1) @ value

    def multi_head_attention(self, d_model, n_heads):
        attn = Attention(d_model, n_heads, False, True).eval()

        def call(q, k, v):
            if not torch.equal(k, v):
                raise ValueError("T5's attention projects keys and values from one tensor")
            return attn(q, None if torch.equal(k, q) else k)
        return call

    def feed_forward(self, d_model, d_ff):
        ff = DenseReluDense(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.wi.weight.T, None, ff.wo.weight.T, None)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "T5 adds no positions to its embeddings; a learned relative bias "
                                                 "on the self-attention logits instead")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(Block(d_model, n_heads, d_ff, 0.0, False, False).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(Block(d_model, n_heads, d_ff, 0.0, True, False).eval())

    def _parts(self, net: T5Style, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        no_positions = absent("T5 adds no positions to its embeddings (relative bias on the logits)")
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=PAD, eos_id=EOS, module=net,
            embed_source=net.shared, embed_target=net.shared, source_embedding=net.shared.weight,
            target_embedding=net.shared.weight, output_projection=net.shared.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encoder(src), net.encoder.block),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder.block),
            encode=net.encoder,
            encoder_layers=[_encoder_parts(b, net.encoder) for b in net.encoder.block],
            decoder_layers=[_decoder_parts(b, net.decoder) for b in net.decoder.block],
            encoder_positions=no_positions, decoder_positions=no_positions,
            encoder_attention_bias=lambda n: net.encoder.self_bias(n)[0],
            decoder_attention_bias=lambda n: net.decoder.self_bias(n)[0],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(T5Style(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(T5Style(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return F.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")

    def learning_rate(self, step, d_model, warmup_steps):
        return adafactor_rsqrt(step, warmup_steps)

    def hyperparameters(self):
        return {"label_smoothing": (0.0, "T5: no label smoothing"), "dropout_base": (0.1, "T5: dropout_rate 0.1"),
                "warmup_steps": (10000, "rsqrt_decay warmup 10000"), "beam_size": (4, "T5 decoding: beam 4"),
                "length_penalty": (0.6, "T5 decoding: alpha 0.6")}


def _encoder_parts(block: Block, stack: Stack | None = None) -> EncoderLayerParts:
    bias = lambda x: stack.self_bias(x.size(1), x.device) if stack is not None else None
    return EncoderLayerParts(layer=lambda x: block(x, bias(x)),
                             self_attention=lambda x: block.self_attn(x, position_bias=bias(x)),
                             feed_forward=block.ff, norms=(block.norms[0], block.norms[1]))


def _decoder_parts(block: Block, stack: Stack | None = None) -> DecoderLayerParts:
    def bias(x):
        causal = mask_bias(torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril())
        return causal if stack is None else causal + stack.self_bias(x.size(1), x.device)
    return DecoderLayerParts(layer=lambda x, memory: block(x, bias(x), memory),
                             self_attention=lambda x: block.self_attn(x, position_bias=bias(x)),
                             cross_attention=lambda x, memory: block.cross_attn(x, memory),
                             feed_forward=block.ff, norms=tuple(block.norms))


def adapter() -> Adapter:
    return T5StyleAdapter()
