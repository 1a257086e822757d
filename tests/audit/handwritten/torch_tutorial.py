"""PyTorch's tutorial "Language Translation with nn.Transformer and torchtext", written out as the
tutorial has it, and an adapter written from docs/audit.md (issue 43, fourth round).

The tutorial's choices kept: ``Seq2SeqTransformer`` around ``nn.Transformer`` (post-norm, time
first, with torch's final norm on both stacks), its ``PositionalEncoding`` (frequencies from
exp/log, sines at 0::2 and cosines at 1::2, dropout on the sum), ``TokenEmbedding`` scaled by
sqrt(emb_size), separate source and target vocabularies and an untied ``generator``; special ids
unk 0, pad 1, bos 2, eos 3; ``create_mask`` (a float causal mask and boolean padding masks);
``CrossEntropyLoss(ignore_index=PAD_IDX)``, Adam(lr 1e-4, (0.9, 0.98), 1e-9) with no schedule.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2, 3


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000) -> None:
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding)

    def forward(self, token_embedding: Tensor) -> Tensor:
        return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size, tgt_vocab_size,
                 dim_feedforward=512, dropout=0.1) -> None:
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask,
                                memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src, src_mask):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)


def generate_square_subsequent_mask(sz: int, device=None) -> Tensor:
    mask = (torch.triu(torch.ones((sz, sz), device=device)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))


def create_mask(src: Tensor, tgt: Tensor):
    """The tutorial's masks, time first: src (n, batch), tgt (m, batch)."""
    src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len, src.device)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=src.device).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


def build(src_vocab, tgt_vocab, n_layers, emb_size, nhead, ffn, dropout) -> Seq2SeqTransformer:
    model = Seq2SeqTransformer(n_layers, n_layers, emb_size, nhead, src_vocab, tgt_vocab, ffn, dropout)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


# -- the adapter ------------------------------------------------------------------------------

def _quiet(fn):
    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)
    return call


class TimeFirst(nn.Module):
    """Batch-first calls of a time-first callable of one input."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Tensor, *rest: Tensor) -> Tensor:
        return self.fn(x.transpose(0, 1), *(r.transpose(0, 1) for r in rest)).transpose(0, 1)


class TutorialAdapter(Adapter):
    name = "PyTorch tutorial Seq2SeqTransformer (hand-written)"

    def attention(self, query, key, value, mask):
        return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        mha = nn.MultiheadAttention(d_model, n_heads, dropout=0.0).eval()
        return TimeFirst(lambda q, k, v: mha(q, k, v, need_weights=False)[0])

    multi_head_cross_attention = multi_head_attention

    def _layers(self, d_model, n_heads, d_ff):
        return build(10, 10, 1, d_model, n_heads, d_ff, 0.0).eval().transformer

    def feed_forward(self, d_model, d_ff):
        layer = self._layers(d_model, 1, d_ff).encoder.layers[0]
        return FeedForwardParts(layer._ff_block, layer.linear1.weight.T, layer.linear1.bias,
                                layer.linear2.weight.T, layer.linear2.bias)

    def positional_encoding(self, length, d_model):
        return PositionalEncoding(d_model, 0.0, maxlen=length).pos_embedding[:, 0]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(self._layers(d_model, n_heads, d_ff).encoder.layers[0])

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(self._layers(d_model, n_heads, d_ff).decoder.layers[0])

    def _parts(self, model: Seq2SeqTransformer, vocab: int, d_model: int) -> ModelParts:
        @_quiet
        def forward(src, tgt_in):
            src, tgt = src.T, tgt_in.T
            src_mask, tgt_mask, src_pad, tgt_pad = create_mask(src, tgt)
            return model(src, tgt, src_mask, tgt_mask, src_pad, tgt_pad, src_pad).transpose(0, 1)

        @_quiet
        def encode(src):
            src_mask, _, src_pad, _ = create_mask(src.T, src.T)
            return model.transformer.encoder(model.positional_encoding(model.src_tok_emb(src.T)), src_mask,
                                             src_key_padding_mask=src_pad).transpose(0, 1)

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: forward(src, tgt)

        t = model.transformer
        return ModelParts(
            forward=forward, vocab_size=vocab, d_model=d_model, pad_id=PAD_IDX, bos_id=BOS_IDX, eos_id=EOS_IDX,
            module=model, embed_source=model.src_tok_emb, embed_target=model.tgt_tok_emb,
            source_embedding=model.src_tok_emb.embedding.weight, target_embedding=model.tgt_tok_emb.embedding.weight,
            output_projection=model.generator.weight,
            encoder_input=lambda src: first_layer_input(lambda: encode(src), t.encoder.layers).transpose(0, 1),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), t.decoder.layers).transpose(0, 1),
            encode=encode,
            encoder_layers=[_encoder_parts(layer) for layer in t.encoder.layers],
            decoder_layers=[_decoder_parts(layer) for layer in t.decoder.layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(build(vocab_size, vocab_size, n_layers, d_model, n_heads, d_ff, 0.0).eval(),
                           vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(build(vocab_size, vocab_size, n_layers, d_model, n_heads, d_ff, dropout).train(),
                           vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        # the tutorial's loss is a mean; summed here as the protocol asks (the tutorial has no smoothing)
        return nn.CrossEntropyLoss(ignore_index=pad_id, reduction="sum")(logits, target)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=0.0001, betas=(0.9, 0.98), eps=1e-9)

    def learning_rate(self, step, d_model, warmup_steps):
        return 0.0001   # Adam(lr=0.0001) and no scheduler: no warm-up, no decay

    def hyperparameters(self):
        return {"dropout_base": (0.1, "Seq2SeqTransformer(dropout=0.1)"), "beam_size": (1, "greedy_decode"),
                "label_smoothing": (0.0, "CrossEntropyLoss(ignore_index=PAD_IDX): no label_smoothing")}


def _encoder_parts(layer: nn.TransformerEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=TimeFirst(lambda x: layer(x)),
        self_attention=TimeFirst(lambda x: layer._sa_block(x, None, None)),
        feed_forward=layer._ff_block,
        norms=(layer.norm1, layer.norm2),
    )


def _decoder_parts(layer: nn.TransformerDecoderLayer) -> DecoderLayerParts:
    causal = lambda x: generate_square_subsequent_mask(x.size(0), x.device)
    return DecoderLayerParts(
        layer=TimeFirst(lambda x, memory: layer(x, memory, tgt_mask=causal(x))),
        self_attention=TimeFirst(lambda x: layer._sa_block(x, causal(x), None)),
        cross_attention=TimeFirst(lambda x, memory: layer._mha_block(x, memory, None, None)),
        feed_forward=layer._ff_block,
        norms=(layer.norm1, layer.norm2, layer.norm3),
    )


def adapter() -> Adapter:
    return TutorialAdapter()
