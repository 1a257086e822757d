"""An x-transformers-style encoder-decoder written out by hand (issue 43, fifth round), and an
adapter written from docs/audit.md.

The code shape of lucidrains' ``x-transformers``: no layer module, an ``AttentionLayers`` stack
holding ``(norm, block, residual)`` triples in a flat ``ModuleList`` walked by ``layer_types``
(``("a", "f")`` per encoder layer, ``("a", "c", "f")`` per decoder layer); a fused ``to_qkv``
projection (d -> 3d, no bias) for self-attention and ``to_q`` / ``to_kv`` for cross-attention;
attention through ``einsum`` with ``masked_fill(~mask, -finfo.max)``, the causal mask built as
``triu(j - i + 1)``; ``Residual`` adds a dropped block output to the stream, post-norm
(``pre_norm=False``: the norm after the sum, ``final_norm`` an identity); a ``FeedForward`` with
GELU (x-transformers' default; the paper's Eq. 2 has max(0, .)); token embeddings shared by
both stacks and tied to the logits (``tie_token_emb``), scaled by sqrt(d); sinusoids computed
from ``inv_freq = 10000 ** -(arange(half) / half)`` and interleaved by ``stack(...).flatten(-2)``
(the library itself concatenates sin | cos; this family keeps the paper's layout).
Training: ``F.cross_entropy(label_smoothing=0.1)``, Adam (0.9, 0.98, 1e-9) and Eq. 3 under
``LambdaLR`` with the lambda shifted by one, so that update k runs at step_num = k.

One departure from the paper: GELU in the feed-forward layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, einsum, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.keys_values import memory_of
from repro.audit.zoo.stack_input import first_layer_input

PAD, BOS, EOS = 0, 1, 2


def split_heads(t: Tensor, h: int) -> Tensor:
    b, n, _ = t.shape
    return t.view(b, n, h, -1).transpose(1, 2)


def merge_heads(t: Tensor) -> Tensor:
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False,
           dropout: nn.Module | None = None) -> Tensor:
    scale = q.shape[-1] ** -0.5
    dots = einsum("b h i d, b h j d -> b h i j", q, k) * scale
    mask_value = -torch.finfo(dots.dtype).max
    if mask is not None:
        dots = dots.masked_fill(~mask, mask_value)
    if causal:
        i, j = dots.shape[-2:]
        causal_mask = torch.ones((i, j), dtype=torch.bool, device=dots.device).triu(j - i + 1)
        dots = dots.masked_fill(causal_mask, mask_value)
    attn = dots.softmax(dim=-1)
    if dropout is not None:
        attn = dropout(attn)
    return einsum("b h i j, b h j d -> b h i d", attn, v)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        key_mask = None if mask is None else mask[:, None, None, :]
        return self.to_out(merge_heads(attend(q, k, v, key_mask, self.causal)))


class CrossAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, 2 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: Tensor, context: Tensor, context_mask: Tensor | None = None) -> Tensor:
        k, v = (split_heads(t, self.heads) for t in self.to_kv(context).chunk(2, dim=-1))
        key_mask = None if context_mask is None else context_mask[:, None, None, :]
        return self.to_out(merge_heads(attend(split_heads(self.to_q(x), self.heads), k, v, key_mask)))


class FeedForward(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, inner), nn.GELU(), nn.Linear(inner, dim))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, out: Tensor, residual: Tensor) -> Tensor:
        return self.dropout(out) + residual


class AttentionLayers(nn.Module):
    def __init__(self, dim: int, depth: int, heads: int, ff_inner: int, dropout: float, cross: bool) -> None:
        super().__init__()
        self.layer_types = ("a", "c", "f") * depth if cross else ("a", "f") * depth
        self.layers = nn.ModuleList()
        for kind in self.layer_types:
            block = {"a": lambda: SelfAttention(dim, heads, causal=cross), "c": lambda: CrossAttention(dim, heads),
                     "f": lambda: FeedForward(dim, ff_inner)}[kind]()
            self.layers.append(nn.ModuleList([nn.LayerNorm(dim), block, Residual(dropout)]))
        self.final_norm = nn.Identity()   # pre_norm=False

    def forward(self, x: Tensor, mask: Tensor | None = None, context: Tensor | None = None,
                context_mask: Tensor | None = None, start: int = 0, stop: int | None = None) -> Tensor:
        for kind, (norm, block, residual_fn) in list(zip(self.layer_types, self.layers))[start:stop]:
            residual = x
            if kind == "a":
                out = block(x, mask)
            elif kind == "c":
                out = block(x, context, context_mask)
            else:
                out = block(x)
            x = norm(residual_fn(out, residual))
        return self.final_norm(x)


def sinusoids(length: int, dim: int, theta: float = 10000.0) -> Tensor:
    half = dim // 2
    inv_freq = theta ** -(torch.arange(half).float() / half)
    emb = einsum("i, j -> i j", torch.arange(length).float(), inv_freq)
    return torch.stack((emb.sin(), emb.cos()), dim=-1).flatten(-2)


class XTransformer(nn.Module):
    def __init__(self, num_tokens: int, dim: int, depth: int, heads: int, ff_inner: int, dropout: float,
                 max_seq_len: int = 1024) -> None:
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.register_buffer("pos_emb", sinusoids(max_seq_len, dim), persistent=False)
        self.emb_dropout = nn.Dropout(dropout)
        self.encoder = AttentionLayers(dim, depth, heads, ff_inner, dropout, cross=False)
        self.decoder = AttentionLayers(dim, depth, heads, ff_inner, dropout, cross=True)
        self.scale = dim ** 0.5
        nn.init.normal_(self.token_emb.weight, std=dim ** -0.5)

    def embed(self, ids: Tensor) -> Tensor:
        return self.emb_dropout(self.token_emb(ids) * self.scale + self.pos_emb[: ids.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        return self.encoder(self.embed(src), mask=src != PAD)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        x = self.decoder(self.embed(tgt), context=self.encode(src), context_mask=src != PAD)
        return x @ self.token_emb.weight.t()


# -- the adapter ------------------------------------------------------------------------------

class EinsumAdapter(Adapter):
    name = "x-transformers-style, einsum attention (hand-written)"

    def attention(self, query, key, value, mask):
        return attend(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = SelfAttention(d_model, n_heads).eval()

        def call(q, k, v):
            if memory_of(q, k, v, "the fused to_qkv self-attention") is not None:
                raise ValueError("the fused to_qkv self-attention attends over its own input only")
            return attn(q)
        return call

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff).eval()
        first, last = ff.net[0], ff.net[2]
        return FeedForwardParts(ff, first.weight.T, first.bias, last.weight.T, last.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(AttentionLayers(d_model, 1, n_heads, d_ff, 0.0, cross=False).eval(), 0)

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(AttentionLayers(d_model, 1, n_heads, d_ff, 0.0, cross=True).eval(), 0)

    def _parts(self, net: XTransformer, vocab: int, d_model: int) -> ModelParts:
        depth = len(net.encoder.layer_types) // 2

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=lambda ids: net.token_emb(ids) * net.scale, embed_target=lambda ids: net.token_emb(ids) * net.scale,
            source_embedding=net.token_emb.weight, target_embedding=net.token_emb.weight,
            output_projection=net.token_emb.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), [s[1] for s in net.encoder.layers[::2]]),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), [s[1] for s in net.decoder.layers[::3]]),
            encode=net.encode,
            encoder_layers=[_encoder_parts(net.encoder, i) for i in range(depth)],
            decoder_layers=[_decoder_parts(net.decoder, i) for i in range(depth)],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(XTransformer(vocab_size, d_model, n_layers, n_heads, d_ff, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(XTransformer(vocab_size, d_model, n_layers, n_heads, d_ff, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        # LambdaLR(opt, lambda s: rate(s + 1)) stepped after the optimizer: update k runs at rate(k)
        s = step
        return d_model ** -0.5 * min(s ** -0.5, s * warmup_steps ** -1.5)

    def hyperparameters(self):
        return {
            "label_smoothing": (0.1, "train.py: F.cross_entropy(label_smoothing=0.1)"),
            "warmup_steps": (4000, "train.py: warmup 4000"),
            "dropout_base": (0.1, "XTransformer(dropout=0.1)"),
            "beam_size": (4, "translate.py --beam 4"), "length_penalty": (0.6, "translate.py --alpha 0.6"),
        }


def _encoder_parts(stack: AttentionLayers, i: int) -> EncoderLayerParts:
    (n_a, attn, _), (n_f, ff, _) = stack.layers[2 * i], stack.layers[2 * i + 1]
    return EncoderLayerParts(layer=lambda x: stack(x, start=2 * i, stop=2 * i + 2), self_attention=lambda x: attn(x),
                             feed_forward=ff, norms=(n_a, n_f))


def _decoder_parts(stack: AttentionLayers, i: int) -> DecoderLayerParts:
    (n_a, attn, _), (n_c, cross, _), (n_f, ff, _) = stack.layers[3 * i], stack.layers[3 * i + 1], stack.layers[3 * i + 2]
    return DecoderLayerParts(
        layer=lambda x, memory: stack(x, context=memory, start=3 * i, stop=3 * i + 3),
        self_attention=lambda x: attn(x), cross_attention=lambda x, memory: cross(x, memory),
        feed_forward=ff, norms=(n_a, n_c, n_f))


def adapter() -> Adapter:
    return EinsumAdapter()
