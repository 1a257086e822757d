"""A small encoder-decoder of the tests' own, in the layouts the audit met in unseen families (issue 43).

Each option reproduces one layout the structural checkers once misread:

* ``streams``: the decoder carries several streams of the target's length stacked along the
  sequence in one tensor (a main stream and n-gram predict streams, as ProphetNet): its norms
  and feed-forward layers see ``streams`` times the layer's rows; only the main stream makes logits;
* ``gated``: the feed-forward layer is gated and has no biases, (silu(x W_g) * x W_i) W_o: two
  input projections d_model -> d_ff feed one d_ff -> d_model;
* ``sandwich``: each sub-layer is x + Dropout(RMSNorm_post(Sublayer(RMSNorm_pre(x)))), with dropout
  inside the sub-layers too (attention weights, the feed-forward's hidden units): a norm after the
  inner dropout, as Gemma 2's sandwich norms;
* ``leak``: the logits at every position get ``leak`` times a summary of the whole target (the mean
  of its embeddings, projected): the future leaks into the past by a few units in the last place
  of the logits, below 1e-6 (a correct model moves them by exactly 0);
* ``wavelength``: the model's own sinusoid tables (one per stack, ``ModelParts.encoder_positions``
  / ``decoder_positions``) run from 2pi to ``wavelength`` x 2pi; 10000 ** ((d-2)/d) is the paper's;
* ``max_positions``: the model's own tables have this many rows and no more (a table of
  ``max_position_embeddings`` rows, as Blenderbot's 128): asked for more, they give what they have;
* ``scale_in_stack``: the stack multiplies the embedding by sqrt(d_model) in its forward pass and
  the adapter gives the bare embedding module as ``embed_source`` / ``embed_target`` (Pegasus's
  layout, read by an adapter copied from BART's, whose embedding module scales itself);
* ``window``: each encoder self-attention sees the positions within ``window`` of its own and no
  others (a sliding window, as LED's Longformer attention and LongT5's local attention): a stack
  of such layers reaches every token of a short sentence through its depth.

Otherwise it is the paper's: post-norm LayerNorm, ReLU, scaled and tied embeddings, residual and
embedding dropout. The adapter exposes what repro's does for the architecture (no training loop).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.checks.positional import reference_encoding

PAD = 0


@dataclasses.dataclass(frozen=True)
class Layout:
    streams: int = 1
    gated: bool = False
    sandwich: bool = False
    leak: float = 0.0
    wavelength: float | None = None
    dropout: float = 0.0
    max_positions: int | None = None
    scale_in_stack: bool = False
    window: int | None = None


def sinusoids(length: int, d_model: int, wavelength: float | None) -> Tensor:
    """The paper's table, or one whose last wavelength / 2pi is ``wavelength``."""
    if wavelength is None:
        return reference_encoding(length, d_model).float()
    pairs = d_model // 2
    rates = wavelength ** (-torch.arange(pairs, dtype=torch.float64) / (pairs - 1))
    angle = torch.arange(length, dtype=torch.float64)[:, None] * rates
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(length, d_model).float()


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.heads, self.dropout = heads, dropout

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        split = lambda t: t.view(b, -1, self.heads, d // self.heads).transpose(1, 2)
        out = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(memory)), split(self.v(memory)),
                                             attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        return self.o(out.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, layout: Layout) -> None:
        super().__init__()
        self.gated = layout.gated
        self.w_1 = nn.Linear(d_model, d_ff, bias=not layout.gated)
        self.w_gate = nn.Linear(d_model, d_ff, bias=False) if layout.gated else None
        self.w_2 = nn.Linear(d_ff, d_model, bias=not layout.gated)
        self.inner = nn.Dropout(layout.dropout if layout.sandwich else 0.0)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.w_gate(x)) * self.w_1(x) if self.gated else F.relu(self.w_1(x))
        return self.w_2(self.inner(hidden))


class Sublayer(nn.Module):
    """The residual connection around one sub-layer: post-norm, or sandwich (pre- and post-RMSNorm)."""

    def __init__(self, d_model: int, layout: Layout) -> None:
        super().__init__()
        self.sandwich = layout.sandwich
        self.norm = nn.RMSNorm(d_model) if layout.sandwich else nn.LayerNorm(d_model)
        self.post = nn.RMSNorm(d_model) if layout.sandwich else None
        self.dropout = nn.Dropout(layout.dropout)

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.sandwich:
            return x + self.dropout(self.post(fn(self.norm(x))))
        return self.norm(x + self.dropout(fn(x)))

    def part(self, fn):
        """The sub-layer as the protocol gives it: without residual, its first norm or dropout."""
        return (lambda *a: self.post(fn(*a))) if self.sandwich else fn


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, layout: Layout) -> None:
        super().__init__()
        inner = layout.dropout if layout.sandwich else 0.0
        self.attn, self.ffn = Attention(d_model, heads, inner), FeedForward(d_model, d_ff, layout)
        self.subs = nn.ModuleList(Sublayer(d_model, layout) for _ in range(2))
        self.window = layout.window

    def _mask(self, x: Tensor, mask: Tensor | None) -> Tensor | None:
        if self.window is None:
            return mask
        at = torch.arange(x.size(1), device=x.device)
        band = (at[:, None] - at[None, :]).abs() <= self.window
        return band if mask is None else mask & band

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.subs[0](x, lambda y: self.attn(y, y, self._mask(y, mask)))
        return self.subs[1](x, self.ffn)

    def parts(self) -> EncoderLayerParts:
        return EncoderLayerParts(self, self.subs[0].part(lambda y: self.attn(y, y, self._mask(y, None))),
                                 self.subs[1].part(self.ffn), (self.subs[0].norm, self.subs[1].norm))


class DecoderLayer(nn.Module):
    """Self-attention of every stream over the main stream's positions up to its own, attention
    over the memory, the FFN; all on the streams stacked in one tensor (batch, streams * n, d)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, layout: Layout) -> None:
        super().__init__()
        inner = layout.dropout if layout.sandwich else 0.0
        self.self_attn, self.cross = Attention(d_model, heads, inner), Attention(d_model, heads, inner)
        self.ffn = FeedForward(d_model, d_ff, layout)
        self.subs = nn.ModuleList(Sublayer(d_model, layout) for _ in range(3))
        self.streams = layout.streams
        self.stream_embedding = nn.Parameter(torch.randn(layout.streams, d_model) * 0.5)

    def _self(self, x: Tensor) -> Tensor:
        n = x.size(1) // self.streams
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril().repeat(self.streams, 1)
        return self.self_attn(x, x[:, :n], causal)

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        x = self.subs[0](x, self._self)
        x = self.subs[1](x, lambda y: self.cross(y, memory, memory_mask))
        return self.subs[2](x, self.ffn)

    def stacked(self, x: Tensor) -> Tensor:
        """The main stream ``x`` and the predict streams (the same, shifted by a stream embedding)."""
        return torch.cat([x] + [x + self.stream_embedding[s] for s in range(1, self.streams)], dim=1)

    def parts(self) -> DecoderLayerParts:
        n = lambda x: x.size(1)
        causal = lambda x: torch.ones(n(x), n(x), dtype=torch.bool, device=x.device).tril()
        return DecoderLayerParts(
            layer=lambda x, memory: self(self.stacked(x), memory)[:, :n(x)],
            self_attention=self.subs[0].part(lambda y: self.self_attn(y, y, causal(y))),
            cross_attention=self.subs[1].part(lambda y, memory: self.cross(y, memory)),
            feed_forward=self.subs[2].part(self.ffn),
            norms=tuple(s.norm for s in self.subs),
        )


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, d_ff: int, n_layers: int, layout: Layout) -> None:
        super().__init__()
        self.layout, self.d_model = layout, d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, heads, d_ff, layout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, heads, d_ff, layout) for _ in range(n_layers))
        self.dropout = nn.Dropout(layout.dropout)

    def positions(self, length: int) -> Tensor:
        rows = min(length, self.layout.max_positions or length)
        return sinusoids(rows, self.d_model, self.layout.wavelength).to(self.embed.weight.device)

    def embedded(self, tokens: Tensor) -> Tensor:
        return self.embed(tokens) * math.sqrt(self.d_model)

    def encoder_input(self, src: Tensor) -> Tensor:
        return self.dropout(self.embedded(src) + self.positions(src.size(1)))

    def decoder_input(self, tgt: Tensor) -> Tensor:
        return self.dropout(self.embedded(tgt) + self.positions(tgt.size(1)))

    def encode(self, src: Tensor) -> Tensor:
        x, mask = self.encoder_input(src), (src != PAD)[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, mask)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, mask = self.encode(src), (src != PAD)[:, None, None, :]
        x = self.decoder[0].stacked(self.decoder_input(tgt))
        for layer in self.decoder:
            x = layer(x, memory, mask)
        logits = x[:, :tgt.size(1)] @ self.embed.weight.T
        if self.layout.leak:
            logits = logits + self.layout.leak * (self.embed(tgt).mean(dim=1, keepdim=True) @ self.embed.weight.T)
        return logits


class LayoutAdapter(Adapter):
    """The tests' encoder-decoder in one :class:`Layout`."""

    def __init__(self, layout: Layout = Layout(), name: str = "") -> None:
        self.layout, self.name = layout, f"layout probe ({name or layout})"

    def _parts(self, net: Seq2Seq, vocab: int) -> ModelParts:
        embedded = net.embed if self.layout.scale_in_stack else net.embedded
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=net.d_model, pad_id=PAD, module=net,
            embed_source=embedded, embed_target=embedded, source_embedding=net.embed.weight,
            target_embedding=net.embed.weight, output_projection=net.embed.weight,
            encoder_input=net.encoder_input, decoder_input=net.decoder_input, encode=net.encode,
            encoder_layers=[layer.parts() for layer in net.encoder],
            decoder_layers=[layer.parts() for layer in net.decoder],
            encoder_positions=net.positions, decoder_positions=net.positions,
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers) -> ModelParts:
        net = Seq2Seq(vocab_size, d_model, n_heads, d_ff, n_layers, dataclasses.replace(self.layout, dropout=0.0))
        return self._parts(net.eval(), vocab_size)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout) -> ModelParts:
        net = Seq2Seq(vocab_size, d_model, n_heads, d_ff, n_layers, dataclasses.replace(self.layout, dropout=dropout))
        return self._parts(net.train(), vocab_size)

    def positional_encoding(self, length, d_model) -> Tensor:
        """The paper's table, as an adapter-wide function (the model's own tables may depart)."""
        return sinusoids(length, d_model, None)

    def feed_forward(self, d_model, d_ff) -> FeedForwardParts:
        ffn = FeedForward(d_model, d_ff, dataclasses.replace(self.layout, dropout=0.0)).eval()
        w_1 = ffn.w_1.weight.T
        return FeedForwardParts(ffn, w_1, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def encoder_layer(self, d_model, n_heads, d_ff) -> EncoderLayerParts:
        return EncoderLayer(d_model, n_heads, d_ff, dataclasses.replace(self.layout, dropout=0.0)).eval().parts()

    def decoder_layer(self, d_model, n_heads, d_ff) -> DecoderLayerParts:
        return DecoderLayer(d_model, n_heads, d_ff, dataclasses.replace(self.layout, dropout=0.0)).eval().parts()
