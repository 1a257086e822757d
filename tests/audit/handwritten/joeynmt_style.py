"""A JoeyNMT-style (2.x) Transformer written out (``joeynmt/transformer_layers.py``,
``embeddings.py``, ``encoders.py``, ``decoders.py``, ``loss.py``), and an adapter written from
docs/audit.md (issue 43, fifth round).

JoeyNMT's code shape kept: ``MultiHeadedAttention.forward(k, v, q, mask)`` (keys first) with
``k_layer`` / ``v_layer`` / ``q_layer`` / ``output_layer``, the query divided by
sqrt(head_size), ``masked_fill(~mask, -inf)`` (True = may attend) and dropout on the attention
weights; ``PositionwiseFeedForward`` owning its ``layer_norm`` and its residual
(``layer_norm(pwff_layer(x) + x)`` with ``layer_norm="post"``, the class default), its
``pwff_layer`` a ``Sequential(Linear, ReLU, Dropout, Linear, Dropout)`` that ends with the residual
dropout; the encoder layer ``layer_norm(dropout(att(x, x, x)) + x)`` then the feed-forward
module; the decoder's cross-attention called ``src_trg_att(memory, memory, h1)``; no final norm in
post-norm stacks; ``Embeddings(scale=True)`` (sqrt(embedding_dim), as its Transformer configs set
it), ``PositionalEncoding`` interleaved; ``tied_embeddings`` (one table for both stacks, one
vocabulary) and ``tied_softmax`` (the ``output_layer``, no bias, is the table); special ids
unk 0, pad 1, bos 2, eos 3; ``XentLoss`` (``KLDivLoss(reduction="sum")`` against targets
smoothed with smoothing / (V - 2), padding column zeroed); Adam (0.9, 0.98) and the ``noam``
scheduler (factor 1, warm-up 4000), whose rate the trainer sets after each update for the next
(update k runs at step k).

Faithful to the paper in every claimed part.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

UNK, PAD, BOS, EOS = 0, 1, 2, 3


class MultiHeadedAttention(nn.Module):
    def __init__(self, num_heads: int, size: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.head_size, self.model_size, self.num_heads = size // num_heads, size, num_heads
        self.k_layer = nn.Linear(size, size)
        self.v_layer = nn.Linear(size, size)
        self.q_layer = nn.Linear(size, size)
        self.output_layer = nn.Linear(size, size)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, k: Tensor, v: Tensor, q: Tensor, mask: Tensor | None = None) -> Tensor:
        batch_size, num_heads = k.size(0), self.num_heads
        k = self.k_layer(k).view(batch_size, -1, num_heads, self.head_size).transpose(1, 2)
        v = self.v_layer(v).view(batch_size, -1, num_heads, self.head_size).transpose(1, 2)
        q = self.q_layer(q).view(batch_size, -1, num_heads, self.head_size).transpose(1, 2)
        context = attend(q, k, v, None if mask is None else mask.unsqueeze(1), self.softmax, self.dropout)
        context = context.transpose(1, 2).contiguous().view(batch_size, -1, num_heads * self.head_size)
        return self.output_layer(context)


def attend(q, k, v, mask, softmax=nn.Softmax(dim=-1), dropout=None) -> Tensor:
    """The middle of ``MultiHeadedAttention.forward``; ``mask``: True where a key may be attended."""
    q = q / math.sqrt(q.size(-1))
    scores = torch.matmul(q, k.transpose(2, 3))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    attention = softmax(scores)
    if dropout is not None:
        attention = dropout(attention)
    return torch.matmul(attention, v)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, input_size: int, ff_size: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(input_size, eps=1e-6)
        self.pwff_layer = nn.Sequential(nn.Linear(input_size, ff_size), nn.ReLU(), nn.Dropout(dropout),
                                        nn.Linear(ff_size, input_size), nn.Dropout(dropout))

    def forward(self, x: Tensor) -> Tensor:
        return self.layer_norm(self.pwff_layer(x) + x)


class PositionalEncoding(nn.Module):
    def __init__(self, size: int, max_len: int = 5000) -> None:
        super().__init__()
        pe = torch.zeros(max_len, size)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp((torch.arange(0, size, 2, dtype=torch.float) * -(math.log(10000.0) / size)))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, emb: Tensor) -> Tensor:
        return emb + self.pe[:, : emb.size(1)]


class Embeddings(nn.Module):
    def __init__(self, embedding_dim: int, vocab_size: int, scale: bool = True) -> None:
        super().__init__()
        self.embedding_dim, self.scale = embedding_dim, scale
        self.lut = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD)

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.embedding_dim) if self.scale else self.lut(x)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, size: int, ff_size: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(size, eps=1e-6)
        self.src_src_att = MultiHeadedAttention(num_heads, size, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(size, ff_size, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        residual = x
        x = self.src_src_att(x, x, x, mask)
        x = self.layer_norm(self.dropout(x) + residual)
        return self.feed_forward(x)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, size: int, ff_size: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.trg_trg_att = MultiHeadedAttention(num_heads, size, dropout=dropout)
        self.src_trg_att = MultiHeadedAttention(num_heads, size, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(size, ff_size, dropout)
        self.x_layer_norm = nn.LayerNorm(size, eps=1e-6)
        self.dec_layer_norm = nn.LayerNorm(size, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None, trg_mask: Tensor) -> Tensor:
        h1 = self.x_layer_norm(self.dropout(self.trg_trg_att(x, x, x, mask=trg_mask)) + x)
        h2 = self.dec_layer_norm(self.dropout(self.src_trg_att(memory, memory, h1, mask=src_mask)) + h1)
        return self.feed_forward(h2)


def subsequent_mask(size: int, device=None) -> Tensor:
    """(1, size, size), True on and below the diagonal."""
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).unsqueeze(0)


class Model(nn.Module):
    def __init__(self, vocab: int, num_layers: int, hidden_size: int, num_heads: int, ff_size: int, dropout: float) -> None:
        super().__init__()
        self.src_embed = Embeddings(hidden_size, vocab)
        self.trg_embed = self.src_embed                                   # tied_embeddings
        self.pe = PositionalEncoding(hidden_size)
        self.emb_dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(TransformerEncoderLayer(hidden_size, ff_size, num_heads, dropout)
                                            for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(TransformerDecoderLayer(hidden_size, ff_size, num_heads, dropout)
                                            for _ in range(num_layers))
        self.output_layer = nn.Linear(hidden_size, vocab, bias=False)
        self.output_layer.weight = self.trg_embed.lut.weight              # tied_softmax

    def encode(self, src: Tensor) -> Tensor:
        mask = (src != PAD).unsqueeze(1)                                  # (batch, 1, src_len)
        x = self.emb_dropout(self.pe(self.src_embed(src)))
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return x

    def forward(self, src: Tensor, trg_input: Tensor) -> Tensor:
        memory, src_mask = self.encode(src), (src != PAD).unsqueeze(1)
        trg_mask = (trg_input != PAD).unsqueeze(1) & subsequent_mask(trg_input.size(1), trg_input.device)
        x = self.emb_dropout(self.pe(self.trg_embed(trg_input)))
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, trg_mask)
        return self.output_layer(x)


class XentLoss(nn.Module):
    def __init__(self, pad_index: int, smoothing: float = 0.0) -> None:
        super().__init__()
        self.pad_index, self.smoothing = pad_index, smoothing
        self.criterion = nn.KLDivLoss(reduction="sum")

    def _smooth_targets(self, targets: Tensor, vocab_size: int) -> Tensor:
        smooth_dist = targets.new_zeros((targets.size(0), vocab_size), dtype=torch.float)
        smooth_dist.fill_(self.smoothing / (vocab_size - 2))
        smooth_dist.scatter_(1, targets.unsqueeze(1).data, 1.0 - self.smoothing)
        smooth_dist[:, self.pad_index] = 0
        padding_positions = torch.nonzero(targets.data == self.pad_index, as_tuple=False)
        if len(padding_positions) > 0:
            smooth_dist.index_fill_(0, padding_positions.squeeze(), 0.0)
        return smooth_dist

    def forward(self, log_probs: Tensor, targets: Tensor) -> Tensor:
        return self.criterion(log_probs, self._smooth_targets(targets, log_probs.size(-1)))


def noam_rate(step: int, hidden_size: int, factor: float = 1.0, warmup: int = 4000) -> float:
    return factor * (hidden_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


# -- the adapter ------------------------------------------------------------------------------

class JoeyAdapter(Adapter):
    name = "JoeyNMT-style (hand-written)"

    def attention(self, query, key, value, mask):
        return attend(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = MultiHeadedAttention(n_heads, d_model, 0.0).eval()
        return lambda q, k, v: attn(k, v, q)

    def multi_head_cross_attention(self, d_model, n_heads):
        return self.multi_head_attention(d_model, n_heads)

    def feed_forward(self, d_model, d_ff):
        ff = PositionwiseFeedForward(d_model, d_ff, 0.0).eval()
        first, last = ff.pwff_layer[0], ff.pwff_layer[3]
        return FeedForwardParts(ff.pwff_layer, first.weight.T, first.bias, last.weight.T, last.bias)

    def positional_encoding(self, length, d_model):
        return PositionalEncoding(d_model, max_len=length).pe[0]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(TransformerEncoderLayer(d_model, d_ff, n_heads, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(TransformerDecoderLayer(d_model, d_ff, n_heads, 0.0).eval())

    def _parts(self, net: Model, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.src_embed, embed_target=net.trg_embed,
            source_embedding=net.src_embed.lut.weight, target_embedding=net.trg_embed.lut.weight,
            output_projection=net.output_layer.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder_layers),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder_layers),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder_layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(Model(vocab_size, n_layers, d_model, n_heads, d_ff, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(Model(vocab_size, n_layers, d_model, n_heads, d_ff, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return XentLoss(pad_id, smoothing)(F.log_softmax(logits, dim=-1), target)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return noam_rate(step, d_model, warmup=warmup_steps)

    def hyperparameters(self):
        return {
            "label_smoothing": (0.1, "training: label_smoothing 0.1"), "warmup_steps": (4000, "training: learning_rate_warmup 4000"),
            "dropout_base": (0.1, "model: encoder/decoder dropout 0.1"),
        }


def _encoder_parts(layer: TransformerEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=lambda x: layer(x, None), self_attention=lambda x: layer.src_src_att(x, x, x, None),
                             feed_forward=layer.feed_forward.pwff_layer,
                             norms=(layer.layer_norm, layer.feed_forward.layer_norm))


def _decoder_parts(layer: TransformerDecoderLayer) -> DecoderLayerParts:
    causal = lambda x: subsequent_mask(x.size(1), x.device)
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, None, causal(x)),
        self_attention=lambda x: layer.trg_trg_att(x, x, x, mask=causal(x)),
        cross_attention=lambda x, memory: layer.src_trg_att(memory, memory, x, mask=None),
        feed_forward=layer.feed_forward.pwff_layer,
        norms=(layer.x_layer_norm, layer.dec_layer_norm, layer.feed_forward.layer_norm))


def adapter() -> Adapter:
    return JoeyAdapter()
