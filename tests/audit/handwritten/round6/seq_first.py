"""A sequence-first translation model in the style of PyTorch 1.x code (the word-language-model and
translation examples before ``batch_first`` existed), written out, and an adapter written from
docs/audit.md (issue 43, sixth round).

Everything is (seq, batch, dim): ``nn.MultiheadAttention(batch_first=False)``, the positional table
stored as (max_len, 1, d_model) and added by broadcasting, ids (seq, batch) in and logits
(seq, batch, vocab) out. Masks in torch's two other conventions: ``key_padding_mask`` with True
= padding, and the decoder's causal mask as an additive float matrix (0 / -inf) from
``generate_square_subsequent_mask``. Otherwise the paper's base model: post-norm layers written out,
ReLU FFN, sinusoids interleaved (sin at 2i, cos at 2i+1), embeddings scaled by sqrt(d_model), one
shared embedding tied to the output projection, no final norms; the paper's training recipe.
Faithful: every architectural claim should pass.
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


def generate_square_subsequent_mask(sz: int) -> Tensor:
    mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))   # (max_len, 1, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[:x.size(0), :])


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def ff(self, src: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(src))))

    def forward(self, src: Tensor, src_key_padding_mask: Tensor | None = None) -> Tensor:
        src2 = self.self_attn(src, src, src, key_padding_mask=src_key_padding_mask)[0]
        src = self.norm1(src + self.dropout1(src2))
        return self.norm2(src + self.dropout2(self.ff(src)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def ff(self, tgt: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(tgt))))

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None) -> Tensor:
        tgt2 = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask)[0]
        tgt = self.norm1(tgt + self.dropout1(tgt2))
        tgt2 = self.multihead_attn(tgt, memory, memory, key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        return self.norm3(tgt + self.dropout3(self.ff(tgt)))


class TransformerModel(nn.Module):
    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(ntoken, d_model, padding_idx=PAD)
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, nhead, d_hid, dropout) for _ in range(nlayers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, nhead, d_hid, dropout) for _ in range(nlayers))
        self.generator = nn.Linear(d_model, ntoken, bias=False)
        self.generator.weight = self.embedding.weight
        nn.init.normal_(self.embedding.weight, 0, d_model ** -0.5)

    def embed(self, tokens: Tensor) -> Tensor:
        return self.pos_encoder(self.embedding(tokens) * math.sqrt(self.d_model))

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (S, N) -> memory (S, N, E) and its key_padding_mask (N, S), True = padding."""
        src_key_padding_mask = (src == PAD).transpose(0, 1)
        x = self.embed(src)
        for layer in self.encoder_layers:
            x = layer(x, src_key_padding_mask=src_key_padding_mask)
        return x, src_key_padding_mask

    def decode(self, tgt: Tensor, memory: Tensor, memory_key_padding_mask: Tensor) -> Tensor:
        tgt_mask = generate_square_subsequent_mask(tgt.size(0)).to(tgt.device)
        x = self.embed(tgt)
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_key_padding_mask=memory_key_padding_mask)
        return self.generator(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, *self.encode(src))


def attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
              key_padding_mask: Tensor | None = None) -> Tensor:
    """What ``F.multi_head_attention_forward`` computes per head (batch, heads, n, d_k), its masks
    in torch's conventions: ``attn_mask`` additive float, ``key_padding_mask`` (batch, n_k) True =
    padding."""
    q = query / math.sqrt(query.size(-1))
    scores = q @ key.transpose(-2, -1)
    if attn_mask is not None:
        scores = scores + attn_mask
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return F.softmax(scores, dim=-1) @ value


# -- the adapter ------------------------------------------------------------------------------

class SeqFirst(nn.Module):
    """Calls a (seq, batch, ...) function with the protocol's batch-first tensors."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Tensor) -> Tensor:
        return self.fn(*(x.transpose(0, 1) for x in xs)).transpose(0, 1)


class SeqFirstAdapter(PaperRecipe, Adapter):
    name = "sequence-first Transformer, nn.MultiheadAttention(batch_first=False) (hand-written)"

    def attention(self, query, key, value, mask):
        # the protocol's mask: boolean, True = attend; this model's: an additive float matrix
        additive = None if mask is None else torch.zeros(mask.shape, device=query.device).masked_fill(~mask, float("-inf"))
        return attention(query, key, value, attn_mask=additive)

    def multi_head_attention(self, d_model, n_heads):
        mha = nn.MultiheadAttention(d_model, n_heads).eval()
        return SeqFirst(lambda q, k, v: mha(q, k, v)[0])

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        layer = EncoderLayer(d_model, 1, d_ff, 0.0).eval()
        return FeedForwardParts(layer.ff, layer.linear1.weight.T, layer.linear1.bias, layer.linear2.weight.T, layer.linear2.bias)

    def positional_encoding(self, length, d_model):
        return PositionalEncoding(d_model, 0.0, max_len=max(length, 1)).pe[:length, 0]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: TransformerModel, vocab: int, d_model: int) -> ModelParts:
        scaled = lambda t: net.embedding(t) * math.sqrt(d_model)

        def decoder_run(tgt):
            src = torch.full((3, tgt.size(0)), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt.t())

        return ModelParts(
            forward=lambda src, tgt: net(src.t(), tgt.t()).transpose(0, 1),
            vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=scaled, embed_target=scaled, source_embedding=net.embedding.weight,
            target_embedding=net.embedding.weight, output_projection=net.generator.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src.t()), net.encoder_layers).transpose(0, 1),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder_layers).transpose(0, 1),
            encode=lambda src: net.encode(src.t())[0].transpose(0, 1),
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder_layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(TransformerModel(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = TransformerModel(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train()
        return self._parts(net, vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=SeqFirst(layer), self_attention=SeqFirst(lambda x: layer.self_attn(x, x, x)[0]),
                             feed_forward=layer.ff, norms=(layer.norm1, layer.norm2))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    causal = lambda x: generate_square_subsequent_mask(x.size(0)).to(x.device)
    return DecoderLayerParts(
        layer=SeqFirst(lambda x, memory: layer(x, memory, tgt_mask=causal(x))),
        self_attention=SeqFirst(lambda x: layer.self_attn(x, x, x, attn_mask=causal(x))[0]),
        cross_attention=SeqFirst(lambda x, memory: layer.multihead_attn(x, memory, memory)[0]),
        feed_forward=layer.ff, norms=(layer.norm1, layer.norm2, layer.norm3))


def adapter() -> Adapter:
    return SeqFirstAdapter()
