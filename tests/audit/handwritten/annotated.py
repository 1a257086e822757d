"""The Annotated Transformer (Harvard NLP, 2018/2022 edition), written out as its notebook has it,
and an adapter written from docs/audit.md (issue 43, fourth round: hand-written families).

The notebook's choices kept: pre-norm ``SublayerConnection`` (x + dropout(sublayer(norm(x)))),
its own ``LayerNorm`` (a_2 * (x - mean) / (std + eps) + b_2, torch's *unbiased* std, eps added to
the std), a final norm on both stacks, ``PositionalEncoding`` with dropout on the sum,
``Embeddings`` scaled by sqrt(d_model), a ``Generator`` giving log_softmax, untied source and
target embeddings and generator, dropout on the attention weights and the FFN's hidden units,
``LabelSmoothing`` (KLDivLoss summed, smoothing / (V - 2) on every class but the label and
padding), Adam (0.9, 0.98, 1e-9) and ``rate()`` under ``LambdaLR`` (stepped after the optimizer).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

PAD, BOS, EOS = 2, 0, 1   # the notebook's vocab: <s> 0, </s> 1, <blank> 2, <unk> 3


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class LayerNorm(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    def __init__(self, size: int, dropout: float) -> None:
        super().__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h: int, d_model: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout) -> None:
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, layer, n) -> None:
        super().__init__()
        self.layers, self.norm = clones(layer, n), LayerNorm(layer.size)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout) -> None:
        super().__init__()
        self.size, self.self_attn, self.src_attn, self.feed_forward = size, self_attn, src_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer, n) -> None:
        super().__init__()
        self.layers, self.norm = clones(layer, n), LayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Embeddings(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.lut, self.d_model = nn.Embedding(vocab, d_model), d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)].requires_grad_(False))


class Generator(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_embed, self.tgt_embed, self.generator = src_embed, tgt_embed, generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1) -> EncoderDecoder:
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model, dropout)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def subsequent_mask(size: int, device=None) -> Tensor:
    return torch.triu(torch.ones((1, size, size), device=device), diagonal=1).type(torch.uint8) == 0


def make_masks(src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
    """``Batch``'s masks: (batch, 1, n) over the source, (batch, m, m) over the target."""
    src_mask = (src != PAD).unsqueeze(-2)
    tgt_mask = (tgt != PAD).unsqueeze(-2) & subsequent_mask(tgt.size(-1), tgt.device)
    return src_mask, tgt_mask


class LabelSmoothing(nn.Module):
    def __init__(self, size: int, padding_idx: int, smoothing: float = 0.0) -> None:
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx, self.confidence, self.smoothing, self.size = padding_idx, 1.0 - smoothing, smoothing, size

    def forward(self, x: Tensor, target: Tensor) -> Tensor:
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        return self.criterion(x, true_dist.clone().detach())


def rate(step: int, model_size: int, factor: float, warmup: int) -> float:
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


# -- the adapter ------------------------------------------------------------------------------

class AnnotatedAdapter(Adapter):
    name = "The Annotated Transformer (hand-written)"

    def attention(self, query, key, value, mask):
        return attention(query, key, value, mask=mask)[0]

    def multi_head_attention(self, d_model, n_heads):
        return MultiHeadedAttention(n_heads, d_model, 0.0).eval()

    def multi_head_cross_attention(self, d_model, n_heads):
        return MultiHeadedAttention(n_heads, d_model, 0.0).eval()

    def feed_forward(self, d_model, d_ff):
        ff = PositionwiseFeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.w_1.weight.T, ff.w_1.bias, ff.w_2.weight.T, ff.w_2.bias)

    def positional_encoding(self, length, d_model):
        return PositionalEncoding(d_model, 0.0, max_len=length).pe[0]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(make_model(10, 10, 1, d_model, d_ff, n_heads, 0.0).eval().encoder.layers[0])

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(make_model(10, 10, 1, d_model, d_ff, n_heads, 0.0).eval().decoder.layers[0])

    def _parts(self, model: EncoderDecoder, vocab: int, d_model: int) -> ModelParts:
        def forward(src, tgt_in):
            src_mask, tgt_mask = make_masks(src, tgt_in)
            return model.generator(model(src, tgt_in, src_mask, tgt_mask))

        def encode(src):
            return model.encode(src, make_masks(src, src)[0])

        def decode_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: forward(src, tgt)

        return ModelParts(
            forward=forward, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=model,
            embed_source=model.src_embed[0], embed_target=model.tgt_embed[0],
            source_embedding=model.src_embed[0].lut.weight, target_embedding=model.tgt_embed[0].lut.weight,
            output_projection=model.generator.proj.weight,
            encoder_input=lambda src: first_layer_input(lambda: encode(src), model.encoder.layers),
            decoder_input=lambda tgt: first_layer_input(decode_run(tgt), model.decoder.layers),
            encode=encode,
            encoder_layers=[_encoder_parts(layer) for layer in model.encoder.layers],
            decoder_layers=[_decoder_parts(layer) for layer in model.decoder.layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(make_model(vocab_size, vocab_size, n_layers, d_model, d_ff, n_heads, 0.0).eval(),
                           vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(make_model(vocab_size, vocab_size, n_layers, d_model, d_ff, n_heads, dropout).train(),
                           vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return LabelSmoothing(logits.size(-1), pad_id, smoothing)(F.log_softmax(logits, dim=-1), target)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        # LambdaLR stepped after optimizer.step(): update k runs at the lambda's value for k - 1
        return rate(step - 1, d_model, 1.0, warmup_steps)

    def hyperparameters(self):
        return {
            "label_smoothing": (0.1, "train_model: LabelSmoothing(..., smoothing=0.1)"),
            "warmup_steps": (3000, "the notebook's config: warmup 3000"),
            "dropout_base": (0.1, "make_model(dropout=0.1)"),
            "beam_size": (1, "greedy_decode"),
        }


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=lambda x: layer(x, None),
        self_attention=lambda x: layer.self_attn(x, x, x, None),
        feed_forward=layer.feed_forward,
        norms=(layer.sublayer[0].norm, layer.sublayer[1].norm),
    )


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    causal = lambda x: subsequent_mask(x.size(1), x.device)
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, None, causal(x)),
        self_attention=lambda x: layer.self_attn(x, x, x, causal(x)),
        cross_attention=lambda x, memory: layer.src_attn(x, memory, memory, None),
        feed_forward=layer.feed_forward,
        norms=tuple(s.norm for s in layer.sublayer),
    )


def adapter() -> Adapter:
    return AnnotatedAdapter()
