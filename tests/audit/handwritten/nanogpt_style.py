"""A "nanoGPT-style" encoder-decoder written out (nanoGPT's ``Block`` for each stack, plus a
cross-attention), and an adapter written from docs/audit.md (issue 43, fourth round).

Its choices, as researchers write them on top of nanoGPT: a fused ``c_attn`` projection
(d -> 3d) for self-attention and a fused ``c_kv`` (d -> 2d) beside ``c_q`` for cross-attention,
``F.scaled_dot_product_attention`` with ``is_causal=True`` in the decoder and a boolean key
padding mask in the encoder and the cross-attention, ``resid_dropout`` inside each sub-layer
(after ``c_proj``), pre-norm ``x = x + attn(ln_1(x))``, GELU in the MLP, learned absolute
positions (``wpe``, one table per stack), no sqrt(d_model) scale, ``ln_f`` at the top of each stack,
``lm_head`` tied to one shared ``wte``; AdamW (0.9, 0.95) with weight decay 0.1 and cosine decay
after a linear warm-up of 2000 steps; F.cross_entropy with ``ignore_index`` and no smoothing.
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


class Config:
    def __init__(self, vocab_size=37000, block_size=1024, n_layer=6, n_head=8, n_embd=512, d_ff=2048, dropout=0.0,
                 bias=True) -> None:
        self.vocab_size, self.block_size, self.n_layer, self.n_head, self.n_embd = vocab_size, block_size, n_layer, n_head, n_embd
        self.d_ff, self.dropout, self.bias = d_ff, dropout, bias


class SelfAttention(nn.Module):
    def __init__(self, config: Config, causal: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout, self.causal = config.n_head, config.n_embd, config.dropout, causal

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0,
                                           is_causal=self.causal)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class CrossAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.c_q = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.c_kv = nn.Linear(config.n_embd, 2 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor | None = None) -> Tensor:
        B, T, C = x.size()
        k, v = self.c_kv(memory).split(self.n_embd, dim=2)
        heads = lambda t: t.view(B, t.size(1), self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(self.c_q(x)), heads(k), heads(v), attn_mask=mask,
                                           dropout_p=self.dropout if self.training else 0)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.d_ff, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(config.d_ff, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class EncoderBlock(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(config.n_embd, bias=config.bias), SelfAttention(config, causal=False)
        self.ln_2, self.mlp = nn.LayerNorm(config.n_embd, bias=config.bias), MLP(config)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class DecoderBlock(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(config.n_embd, bias=config.bias), SelfAttention(config, causal=True)
        self.ln_2, self.cross = nn.LayerNorm(config.n_embd, bias=config.bias), CrossAttention(config)
        self.ln_3, self.mlp = nn.LayerNorm(config.n_embd, bias=config.bias), MLP(config)

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.cross(self.ln_2(x), memory, memory_mask)
        return x + self.mlp(self.ln_3(x))


class Seq2SeqGPT(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.enc_wpe, self.dec_wpe = nn.Embedding(config.block_size, config.n_embd), nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.enc = nn.ModuleList(EncoderBlock(config) for _ in range(config.n_layer))
        self.dec = nn.ModuleList(DecoderBlock(config) for _ in range(config.n_layer))
        self.enc_ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.dec_ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def _embed(self, idx: Tensor, wpe: nn.Embedding) -> Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        return self.drop(self.wte(idx) + wpe(pos))

    def encode(self, src: Tensor) -> Tensor:
        mask = (src != PAD)[:, None, None, :]
        x = self._embed(src, self.enc_wpe)
        for block in self.enc:
            x = block(x, mask)
        return self.enc_ln_f(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, mask = self.encode(src), (src != PAD)[:, None, None, :]
        x = self._embed(tgt, self.dec_wpe)
        for block in self.dec:
            x = block(x, memory, mask)
        return self.lm_head(self.dec_ln_f(x))


def get_lr(it: int, learning_rate=6e-4, warmup_iters=2000, lr_decay_iters=600000, min_lr=6e-5) -> float:
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (learning_rate - min_lr)


# -- the adapter ------------------------------------------------------------------------------

class NanoGPTAdapter(Adapter):
    name = "nanoGPT-style encoder-decoder (hand-written)"

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = SelfAttention(Config(n_head=n_heads, n_embd=d_model), causal=False).eval()

        def call(q, k, v):
            memory_of(q, k, v, "the fused c_attn self-attention")
            if not (k is q or torch.equal(k, q)):
                raise ValueError("the fused c_attn self-attention attends over its own input only")
            return attn(q)
        return call

    def feed_forward(self, d_model, d_ff):
        mlp = MLP(Config(n_embd=d_model, d_ff=d_ff)).eval()
        return FeedForwardParts(mlp, mlp.c_fc.weight.T, mlp.c_fc.bias, mlp.c_proj.weight.T, mlp.c_proj.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "learned tables, one per stack (wpe), no sinusoids")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderBlock(Config(n_head=n_heads, n_embd=d_model, d_ff=d_ff)).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderBlock(Config(n_head=n_heads, n_embd=d_model, d_ff=d_ff)).eval())

    def _parts(self, net: Seq2SeqGPT, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.wte, embed_target=net.wte,
            source_embedding=net.wte.weight, target_embedding=net.wte.weight, output_projection=net.lm_head.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.enc),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.dec),
            encode=net.encode,
            encoder_layers=[_encoder_parts(block) for block in net.enc],
            decoder_layers=[_decoder_parts(block) for block in net.dec],
            encoder_positions=lambda n: net.enc_wpe.weight[:n], decoder_positions=lambda n: net.dec_wpe.weight[:n],
        )

    def _net(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout) -> Seq2SeqGPT:
        return Seq2SeqGPT(Config(vocab_size, 1024, n_layers, n_heads, d_model, d_ff, dropout))

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return F.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")

    def optimizer(self, params):
        return torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)

    def learning_rate(self, step, d_model, warmup_steps):
        return get_lr(step - 1, warmup_iters=warmup_steps)   # nanoGPT's iter_num is 0 at the first update

    def hyperparameters(self):
        return {"dropout_base": (0.0, "nanoGPT's default dropout 0.0"), "warmup_steps": (2000, "warmup_iters = 2000")}


def _encoder_parts(block: EncoderBlock) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: block(x), self_attention=lambda x: block.attn(x),
                             feed_forward=block.mlp, norms=(block.ln_1, block.ln_2))


def _decoder_parts(block: DecoderBlock) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: block(x, memory), self_attention=lambda x: block.attn(x),
                             cross_attention=lambda x, memory: block.cross(x, memory), feed_forward=block.mlp,
                             norms=(block.ln_1, block.ln_2, block.ln_3))


def adapter() -> Adapter:
    return NanoGPTAdapter()
