"""The paper's base model written channels-first, as audio and vision people write sequence models:
every hidden state is (batch, d_model, time), projections are 1x1 ``nn.Conv1d``s, heads are a
*leading* dimension (h, batch, time, d_k) and attention is ``F.scaled_dot_product_attention``
(``is_causal=True`` in the decoder's self-attention); an adapter written from docs/audit.md that
turns the checks' batch-first tensors into the model's layout and back (issue 43, tenth round).

Its choices, each the paper's: post-norm ``LN(x + Dropout(Sublayer(x)))`` with a LayerNorm over
the channel axis (``ChannelLayerNorm``, an ``nn.LayerNorm`` applied on the transposed tensor);
ReLU feed-forward as two 1x1 convolutions with biases (Eq. 2 position by position); interleaved
sinusoids stored channels-first (d_model, 1024); embeddings scaled by sqrt(d_model), one matrix
for both stacks and the output; dropout on the embedding sums and on each sub-layer's output;
no final norms; Adam (0.9, 0.98, 1e-9), Eq. 3, label smoothing 0.1 (the round-six recipe).

Departures from the paper: none. Every claim the adapter exposes should pass.
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


def channels_first_sinusoids(d_model: int, length: int) -> Tensor:
    """(d_model, length): row 2i is sin(pos / 10000^(2i/d_model)), row 2i+1 its cosine."""
    pos = torch.arange(length, dtype=torch.float32)[None, :]
    inv = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.empty(d_model, length)
    table[0::2], table[1::2] = torch.sin(inv[:, None] * pos), torch.cos(inv[:, None] * pos)
    return table


class ChannelLayerNorm(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:          # x (batch, d_model, time)
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ConvAttention(nn.Module):
    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Conv1d(d_model, d_model, 1) for _ in range(4))

    def split(self, x: Tensor) -> Tensor:
        """(batch, d_model, time) -> (heads, batch, time, d_k)."""
        b, _, t = x.shape
        return x.view(b, self.heads, -1, t).permute(1, 0, 3, 2)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, key_padding: Tensor | None = None,
                causal: bool = False) -> Tensor:
        """q (batch, d_model, t_q), k and v (batch, d_model, t_k); ``key_padding`` (batch, t_k), True = a real key."""
        mask = None if key_padding is None else key_padding[None, :, None, :]
        q, k, v = self.split(self.to_q(q)), self.split(self.to_k(k)), self.split(self.to_v(v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        h, b, t, d_k = out.shape
        return self.to_out(out.permute(1, 0, 3, 2).reshape(b, h * d_k, t))


class ConvFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(d_model, d_ff, 1), nn.Conv1d(d_ff, d_model, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(F.relu(self.conv1(x)))


class EncoderBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, p: float) -> None:
        super().__init__()
        self.attn, self.ff = ConvAttention(d_model, heads), ConvFeedForward(d_model, d_ff)
        self.ln_attn, self.ln_ff, self.drop = ChannelLayerNorm(d_model), ChannelLayerNorm(d_model), nn.Dropout(p)

    def forward(self, x: Tensor, key_padding: Tensor | None = None) -> Tensor:
        x = self.ln_attn(x + self.drop(self.attn(x, x, x, key_padding)))
        return self.ln_ff(x + self.drop(self.ff(x)))


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, p: float) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = ConvAttention(d_model, heads), ConvAttention(d_model, heads)
        self.ff = ConvFeedForward(d_model, d_ff)
        self.ln_self, self.ln_cross, self.ln_ff = (ChannelLayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(p)

    def forward(self, y: Tensor, memory: Tensor, key_padding: Tensor | None = None) -> Tensor:
        y = self.ln_self(y + self.drop(self.self_attn(y, y, y, causal=True)))
        y = self.ln_cross(y + self.drop(self.cross_attn(y, memory, memory, key_padding)))
        return self.ln_ff(y + self.drop(self.ff(y)))


class ChannelsFirstTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, d_ff: int, layers: int, p: float) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.tokens = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.tokens.weight, std=d_model ** -0.5)
        self.register_buffer("positions", channels_first_sinusoids(d_model, 1024), persistent=False)
        self.drop = nn.Dropout(p)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, heads, d_ff, p) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, heads, d_ff, p) for _ in range(layers))

    def embed(self, ids: Tensor) -> Tensor:
        """(batch, time) -> (batch, d_model, time), scaled, with positions, dropped out."""
        x = self.tokens(ids).transpose(1, 2) * self.scale
        return self.drop(x + self.positions[:, : ids.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        x, real = self.embed(src), src != PAD
        for block in self.encoder:
            x = block(x, real)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, y = self.encode(src), self.embed(tgt)
        for block in self.decoder:
            y = block(y, memory, src != PAD)
        return torch.einsum("bdt,vd->btv", y, self.tokens.weight)


# -- the adapter: the checks speak (batch, time, d_model) -------------------------------------

def cf(x: Tensor) -> Tensor:
    return x.transpose(1, 2)


class BatchFirst(nn.Module):
    """A channels-first norm as the checks call it, on (batch, time, d_model) (docs/audit.md: the
    norms take the checks' batch-first tensors); its parameters are the norm's own."""

    def __init__(self, norm: ChannelLayerNorm) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x: Tensor) -> Tensor:
        return cf(self.norm(cf(x)))


class ChannelsFirstAdapter(PaperRecipe, Adapter):
    name = "channels-first, heads leading, SDPA (hand-written)"

    def attention(self, query, key, value, mask):
        # the model's kernel, in its own layout: heads leading
        lead = lambda t: t.transpose(0, 1)
        mask = None if mask is None else lead(mask.expand(query.size(0), -1, -1, -1))
        return lead(F.scaled_dot_product_attention(lead(query), lead(key), lead(value), attn_mask=mask))

    def multi_head_attention(self, d_model, n_heads):
        attn = ConvAttention(d_model, n_heads).eval()
        return lambda q, k, v: cf(attn(cf(q), cf(k), cf(v)))

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = ConvFeedForward(d_model, d_ff).eval()
        return FeedForwardParts(lambda x: cf(ff(cf(x))), ff.conv1.weight[..., 0].T, ff.conv1.bias,
                                ff.conv2.weight[..., 0].T, ff.conv2.bias)

    def positional_encoding(self, length, d_model):
        return channels_first_sinusoids(d_model, length).T

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderBlock(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderBlock(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: ChannelsFirstTransformer, vocab: int, d_model: int) -> ModelParts:
        embed = lambda ids: net.tokens(ids) * net.scale

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=embed, embed_target=embed, source_embedding=net.tokens.weight,
            target_embedding=net.tokens.weight, output_projection=net.tokens.weight,
            encoder_input=lambda src: cf(first_layer_input(lambda: net.encode(src), net.encoder)),
            decoder_input=lambda tgt: cf(first_layer_input(decoder_run(tgt), net.decoder)),
            encode=lambda src: cf(net.encode(src)),
            encoder_layers=[_encoder_parts(block) for block in net.encoder],
            decoder_layers=[_decoder_parts(block) for block in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        net = ChannelsFirstTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval()
        return self._parts(net, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = ChannelsFirstTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train()
        return self._parts(net, vocab_size, d_model)


def _encoder_parts(block: EncoderBlock) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: cf(block(cf(x))),
                             self_attention=lambda x: cf(block.attn(cf(x), cf(x), cf(x))),
                             feed_forward=lambda x: cf(block.ff(cf(x))),
                             norms=(BatchFirst(block.ln_attn), BatchFirst(block.ln_ff)))


def _decoder_parts(block: DecoderBlock) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda y, memory: cf(block(cf(y), cf(memory))),
        self_attention=lambda y: cf(block.self_attn(cf(y), cf(y), cf(y), causal=True)),
        cross_attention=lambda y, memory: cf(block.cross_attn(cf(y), cf(memory), cf(memory))),
        feed_forward=lambda y: cf(block.ff(cf(y))),
        norms=(BatchFirst(block.ln_self), BatchFirst(block.ln_cross), BatchFirst(block.ln_ff)))


def adapter() -> Adapter:
    return ChannelsFirstAdapter()
