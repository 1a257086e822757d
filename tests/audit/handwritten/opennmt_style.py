"""An OpenNMT-py-style (v3) Transformer written out (``onmt/modules/multi_headed_attn.py``,
``position_ffn.py``, ``embeddings.py``, ``encoders/transformer.py``, ``decoders/transformer.py``),
and an adapter written from docs/audit.md (issue 43, fifth round).

OpenNMT-py's code shape kept: ``MultiHeadedAttention.forward(key, value, query, mask)`` with
separate ``linear_keys`` / ``linear_values`` / ``linear_query`` (no bias: ``add_qkvbias=False``)
and ``final_linear``, the *query* divided by sqrt(dim_per_head) before ``matmul``, and a mask that
is True where a key is *hidden* (``masked_fill(mask, -1e18)``); ``PositionwiseFeedForward`` owns
its ``layer_norm`` *and* its residual (``w_2(dropout(relu(w_1(layer_norm(x))))) + x``); the
encoder layer is ``ffn(dropout(self_attn(ln(x))) + x)``: pre-norm, the only layout v3 has, with a
final ``layer_norm`` on both stacks; ``PositionalEncoding`` multiplies the embedding by
sqrt(dim) itself, adds ``SinusoidalInterleaved`` (the default ``position_encoding_type``) and
``Embeddings`` drops the sum; relative positions off (``max_relative_positions=0``); a
``generator`` Linear with a bias, *not* shared with the decoder's embeddings
(``share_decoder_embeddings`` off) and one ``share_embeddings`` source/target table off too;
``CrossEntropyLoss(label_smoothing=0.1, reduction="sum")``; Adam (0.9, 0.998, eps 1e-9) and
``noam`` decay with ``learning_rate 2``, ``warmup_steps 8000`` (the FAQ's Transformer recipe),
the decay step counted from 1 before each update.

Departures from the paper: pre-norm and the final norms, untied embeddings and generator,
beta_2 0.998, twice Eq. 3's rate, warm-up 8000.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

UNK, PAD, BOS, EOS = 0, 1, 2, 3   # <unk>, <blank>, <s>, </s>


class MultiHeadedAttention(nn.Module):
    def __init__(self, head_count: int, model_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.dim_per_head, self.head_count = model_dim // head_count, head_count
        self.linear_keys = nn.Linear(model_dim, model_dim, bias=False)
        self.linear_values = nn.Linear(model_dim, model_dim, bias=False)
        self.linear_query = nn.Linear(model_dim, model_dim, bias=False)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.final_linear = nn.Linear(model_dim, model_dim, bias=False)

    def forward(self, key: Tensor, value: Tensor, query: Tensor, mask: Tensor | None = None) -> Tensor:
        batch_size = key.size(0)

        def shape(x):
            return x.view(batch_size, -1, self.head_count, self.dim_per_head).transpose(1, 2)

        key, value, query = shape(self.linear_keys(key)), shape(self.linear_values(value)), shape(self.linear_query(query))
        return self.final_linear(unshape(scaled_attention(query, key, value, mask, self.softmax, self.dropout)))


def unshape(x: Tensor) -> Tensor:
    b, h, n, d = x.shape
    return x.transpose(1, 2).contiguous().view(b, n, h * d)


def scaled_attention(query, key, value, mask, softmax=nn.Softmax(dim=-1), dropout=None) -> Tensor:
    """The middle of ``MultiHeadedAttention.forward``; ``mask``: True where the key is hidden."""
    query = query / math.sqrt(query.size(-1))
    scores = torch.matmul(query, key.transpose(2, 3)).float()
    if mask is not None:
        scores = scores.masked_fill(mask, -1e18)
    attn = softmax(scores).to(query.dtype)
    drop_attn = dropout(attn) if dropout is not None else attn
    return torch.matmul(drop_attn, value)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.dropout_1, self.dropout_2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.activation = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        inter = self.dropout_1(self.activation(self.w_1(self.layer_norm(x))))
        return self.dropout_2(self.w_2(inter)) + x


class PositionalEncoding(nn.Module):
    def __init__(self, dim: int, max_len: int = 5000) -> None:
        super().__init__()
        pe = torch.zeros(max_len, dim)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp((torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim)))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))
        self.dim = dim

    def forward(self, emb: Tensor, step: int | None = None) -> Tensor:
        emb = emb * math.sqrt(self.dim)
        step = step or 0
        return emb + self.pe[:, step: emb.size(1) + step, :]


class Embeddings(nn.Module):
    def __init__(self, word_vec_size: int, vocab: int, dropout: float) -> None:
        super().__init__()
        self.word_lut = nn.Embedding(vocab, word_vec_size, padding_idx=PAD)
        self.pe = PositionalEncoding(word_vec_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, source: Tensor, step: int | None = None) -> Tensor:
        return self.dropout(self.pe(self.word_lut(source), step=step))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, d_model, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, layer_in: Tensor, mask: Tensor | None) -> Tensor:
        layer_in_norm = self.layer_norm(layer_in)
        context = self.self_attn(layer_in_norm, layer_in_norm, layer_in_norm, mask=mask)
        return self.feed_forward(self.dropout(context) + layer_in)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, d_model, dropout=dropout)
        self.context_attn = MultiHeadedAttention(heads, d_model, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.layer_norm_1 = nn.LayerNorm(d_model, eps=1e-6)
        self.layer_norm_2 = nn.LayerNorm(d_model, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, layer_in: Tensor, enc_out: Tensor, src_pad_mask: Tensor | None, dec_mask: Tensor) -> Tensor:
        norm_layer_in = self.layer_norm_1(layer_in)
        self_attn = self.dropout(self.self_attn(norm_layer_in, norm_layer_in, norm_layer_in, mask=dec_mask))
        query = self_attn + layer_in
        norm_query = self.layer_norm_2(query)
        ctx_attn = self.dropout(self.context_attn(enc_out, enc_out, norm_query, mask=src_pad_mask))
        return self.feed_forward(ctx_attn + query)


def future_mask(n: int, device=None) -> Tensor:
    """(1, 1, n, n), True above the diagonal: the future is hidden."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)[None, None]


class NMTModel(nn.Module):
    def __init__(self, vocab: int, layers: int, d_model: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.src_emb, self.tgt_emb = Embeddings(d_model, vocab, dropout), Embeddings(d_model, vocab, dropout)
        self.encoder = nn.ModuleList(TransformerEncoderLayer(d_model, heads, d_ff, dropout) for _ in range(layers))
        self.decoder = nn.ModuleList(TransformerDecoderLayer(d_model, heads, d_ff, dropout) for _ in range(layers))
        self.enc_layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.dec_layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():   # param_init_glorot
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: Tensor) -> Tensor:
        mask = (src == PAD)[:, None, None, :]
        enc_out = self.src_emb(src)
        for layer in self.encoder:
            enc_out = layer(enc_out, mask)
        return self.enc_layer_norm(enc_out)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        enc_out, src_pad_mask = self.encode(src), (src == PAD)[:, None, None, :]
        dec_mask = (tgt == PAD)[:, None, None, :] | future_mask(tgt.size(1), tgt.device)
        dec_out = self.tgt_emb(tgt)
        for layer in self.decoder:
            dec_out = layer(dec_out, enc_out, src_pad_mask, dec_mask)
        return self.generator(self.dec_layer_norm(dec_out))


def noam_decay(step: int, warmup_steps: int, model_size: int) -> float:
    return model_size ** (-0.5) * min(step ** (-0.5), step * warmup_steps ** (-1.5))


# -- the adapter ------------------------------------------------------------------------------

class OpenNMTAdapter(Adapter):
    name = "OpenNMT-py-style (hand-written)"

    def attention(self, query, key, value, mask):
        return scaled_attention(query, key, value, None if mask is None else ~mask)   # OpenNMT masks where True

    def multi_head_attention(self, d_model, n_heads):
        attn = MultiHeadedAttention(n_heads, d_model, 0.0).eval()
        return lambda q, k, v: attn(k, v, q)

    def multi_head_cross_attention(self, d_model, n_heads):
        return self.multi_head_attention(d_model, n_heads)

    def feed_forward(self, d_model, d_ff):
        ff = PositionwiseFeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(_ffn(ff), ff.w_1.weight.T, ff.w_1.bias, ff.w_2.weight.T, ff.w_2.bias)

    def positional_encoding(self, length, d_model):
        return PositionalEncoding(d_model, max_len=length).pe[0]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(TransformerEncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(TransformerDecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: NMTModel, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        scaled = lambda emb: (lambda ids: emb.word_lut(ids) * math.sqrt(d_model))
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=scaled(net.src_emb), embed_target=scaled(net.tgt_emb),
            source_embedding=net.src_emb.word_lut.weight, target_embedding=net.tgt_emb.word_lut.weight,
            output_projection=net.generator.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(NMTModel(vocab_size, n_layers, d_model, n_heads, d_ff, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(NMTModel(vocab_size, n_layers, d_model, n_heads, d_ff, dropout).train(), vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return nn.CrossEntropyLoss(ignore_index=pad_id, reduction="sum", label_smoothing=smoothing)(logits, target)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=2.0, betas=(0.9, 0.998), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        # Optimizer.step(): lr = learning_rate * noam_decay(self._decay_step) with _decay_step from 1
        return 2.0 * noam_decay(step, warmup_steps, d_model)

    def hyperparameters(self):
        return {
            "label_smoothing": (0.1, "-label_smoothing 0.1"), "warmup_steps": (8000, "-warmup_steps 8000"),
            "dropout_base": (0.1, "-dropout 0.1"), "tokens_per_batch": (4096 * 2, "-batch_size 4096 -batch_type tokens -accum_count 2"),
            "beam_size": (5, "onmt_translate -beam_size 5 (default)"),
        }


def _ffn(ff: PositionwiseFeedForward):
    """The feed-forward sub-layer without the norm and the residual its module owns."""
    return lambda x: ff.dropout_2(ff.w_2(ff.dropout_1(ff.activation(ff.w_1(x)))))


def _encoder_parts(layer: TransformerEncoderLayer) -> EncoderLayerParts:
    def self_attention(x):
        return layer.self_attn(x, x, x, mask=None)
    return EncoderLayerParts(layer=lambda x: layer(x, None), self_attention=self_attention,
                             feed_forward=_ffn(layer.feed_forward), norms=(layer.layer_norm, layer.feed_forward.layer_norm))


def _decoder_parts(layer: TransformerDecoderLayer) -> DecoderLayerParts:
    def self_attention(x):
        return layer.self_attn(x, x, x, mask=future_mask(x.size(1), x.device))
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, None, future_mask(x.size(1), x.device)),
        self_attention=self_attention,
        cross_attention=lambda x, memory: layer.context_attn(memory, memory, x, mask=None),
        feed_forward=_ffn(layer.feed_forward),
        norms=(layer.layer_norm_1, layer.layer_norm_2, layer.feed_forward.layer_norm))


def adapter() -> Adapter:
    return OpenNMTAdapter()
