"""A Transformer whose feed-forward layers are convolutions, as FastSpeech's "FFT block" and
Conformer-lite speech/translation hybrids write them, and an adapter written from docs/audit.md
(issue 43, seventh round).

Its choices: each layer's feed-forward sub-layer is ``Conv1d(d_model, d_ff, kernel_size=3)`` ->
ReLU -> ``Conv1d(d_ff, d_model, kernel_size=1)`` over the time axis, so each position's hidden
units read its neighbours (FastSpeech's ``PositionwiseFeedForward`` keeps the name); the
encoder's convolution is centred (padding 1) and the positions of padding are zeroed before it
(``masked_fill``), the decoder's is causal (left padding 2, as fairseq's ``LightConv`` decoder
pads), so no future token reaches an output. Attention is ``nn.MultiheadAttention(batch_first=True)``
with a True-is-padding ``key_padding_mask`` and a boolean causal ``attn_mask`` (True = hidden).
Everything else is the paper's base model: post-norm, interleaved sinusoids, embeddings scaled by
sqrt(d_model) and shared by both stacks and the output, no final norms, the paper's recipe.

Departures from the paper: the feed-forward layers are not position-wise (Section 3.3, Eq. 2),
and their first convolution holds three d_model x d_ff matrices (Table 3's counts).
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
KERNEL = 3


class ConvFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float, causal: bool = False) -> None:
        super().__init__()
        self.w_1 = nn.Conv1d(d_model, d_ff, KERNEL, padding=0)
        self.w_2 = nn.Conv1d(d_ff, d_model, 1)
        self.dropout, self.causal = nn.Dropout(dropout), causal

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        if keep is not None:
            x = x.masked_fill(~keep[..., None], 0.0)
        pad = (KERNEL - 1, 0) if self.causal else ((KERNEL - 1) // 2, (KERNEL - 1) // 2)
        h = F.relu(self.w_1(F.pad(x.transpose(1, 2), pad)))
        return self.w_2(self.dropout(h)).transpose(1, 2)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.slf_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.pos_ffn = ConvFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        pad_mask = None if keep is None else ~keep
        x = self.norm1(x + self.dropout(self.slf_attn(x, x, x, key_padding_mask=pad_mask, need_weights=False)[0]))
        return self.norm2(x + self.dropout(self.pos_ffn(x, keep)))


def future(n: int, device: torch.device) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.slf_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.enc_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.pos_ffn = ConvFeedForward(d_model, d_ff, dropout, causal=True)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def self_attention(self, x: Tensor) -> Tensor:
        return self.slf_attn(x, x, x, attn_mask=future(x.size(1), x.device), need_weights=False)[0]

    def forward(self, x: Tensor, memory: Tensor, memory_keep: Tensor | None = None) -> Tensor:
        pad_mask = None if memory_keep is None else ~memory_keep
        x = self.norm1(x + self.dropout(self.self_attention(x)))
        x = self.norm2(x + self.dropout(self.enc_attn(x, memory, memory, key_padding_mask=pad_mask, need_weights=False)[0]))
        return self.norm3(x + self.dropout(self.pos_ffn(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


class ConvTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.src_word_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.src_word_emb.weight, 0, d_model ** -0.5)
        self.register_buffer("position_enc", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.src_word_emb(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        keep, x = src != PAD, self.dropout(self.embed(src) + self.position_enc[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, keep)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.position_enc[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src != PAD)
        return F.linear(x, self.src_word_emb.weight)


# -- the adapter ------------------------------------------------------------------------------

def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """What ``nn.MultiheadAttention`` computes per head, with the protocol's boolean mask."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class ConvFFNAdapter(PaperRecipe, Adapter):
    name = "convolutional feed-forward layers, FFT-block style (hand-written)"

    def attention(self, query, key, value, mask):
        return scaled_dot_product(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
        return lambda q, k, v: mha(q, k, v, need_weights=False)[0]

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = ConvFeedForward(d_model, d_ff, 0.0).eval()
        # the centre tap of the width-3 convolution is the matrix a position applies to itself
        return FeedForwardParts(ff, ff.w_1.weight[:, :, 1].T, ff.w_1.bias, ff.w_2.weight[:, :, 0].T, ff.w_2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: ConvTransformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.src_word_emb.weight,
            target_embedding=net.src_word_emb.weight, output_projection=net.src_word_emb.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(ConvTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(ConvTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.slf_attn(x, x, x, need_weights=False)[0],
                             feed_forward=layer.pos_ffn, norms=(layer.norm1, layer.norm2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.self_attention,
                             cross_attention=lambda x, memory: layer.enc_attn(x, memory, memory, need_weights=False)[0],
                             feed_forward=layer.pos_ffn, norms=(layer.norm1, layer.norm2, layer.norm3))


def adapter() -> Adapter:
    return ConvFFNAdapter()
