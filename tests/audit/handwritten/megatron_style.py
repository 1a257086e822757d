"""A Megatron-LM-style encoder-decoder (its T5 model on ``ParallelTransformer``, one GPU, no
tensor parallelism) written out, and an adapter written from docs/audit.md (issue 43, fifth round).

Megatron's code shape kept: hidden states time first, [s, b, h]; a fused ``query_key_value``
projection whose output is viewed per head as (np, 3 * hn) and split (q, k, v interleaved *per
head*, not three d-wide blocks), ``query`` and fused ``key_value`` for the inter-attention;
``CoreAttention`` computing the scores with ``torch.baddbmm(buffer, q, k^T, beta=0, alpha=1 /
sqrt(hn))``, a boolean mask that is True where a key is *hidden*, filled with -10000.0
(``attention_mask_func``), dropout on the probabilities and ``bmm`` with the values; every
``dense`` layer with ``skip_bias_add`` (the bias returned apart and added inside
``bias_dropout_add``: dropout(x + bias) + residual); pre-norm (``input_layernorm``,
``post_attention_layernorm``, ``post_inter_attention_layernorm``) and a ``final_layernorm`` on each
stack; ``dense_h_to_4h`` -> GeLU -> ``dense_4h_to_h``; one ``Embedding`` (word embeddings plus
*learned* ``position_embeddings``, 512 rows, no sqrt(d) scale, ``embedding_dropout``) shared by the
encoder and the decoder, the logits ``parallel_lm_logits`` on the word embeddings plus
``T5LMHead``'s bias.

Departures from the paper: pre-norm and final norms, GeLU, learned positions, unscaled embeddings.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.keys_values import memory_of
from repro.audit.zoo.stack_input import first_layer_input

PAD, BOS, EOS = 0, 1, 2
MAX_POSITIONS = 512


class Dense(nn.Module):
    """``ColumnParallelLinear`` / ``RowParallelLinear`` with ``skip_bias_add=True``: (x W^T, b)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(x, self.weight), self.bias


def core_attention(query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                   attention_dropout: nn.Module | None = None) -> Tensor:
    """``CoreAttention.forward``: query [sq, b, np, hn], key / value [sk, b, np, hn];
    ``attention_mask`` True where hidden, broadcast to [b, np, sq, sk]. Returns [sq, b, np * hn]."""
    sq, b, np_, hn = query.shape
    sk = key.size(0)
    query_layer = query.reshape(sq, b * np_, hn)
    key_layer = key.reshape(sk, b * np_, hn)
    matmul_input_buffer = torch.empty(b * np_, sq, sk, dtype=query.dtype, device=query.device)
    matmul_result = torch.baddbmm(matmul_input_buffer, query_layer.transpose(0, 1),
                                  key_layer.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(hn))
    attention_scores = matmul_result.view(b, np_, sq, sk)
    if attention_mask is not None:
        attention_scores = attention_scores.masked_fill(attention_mask, -10000.0)
    attention_probs = torch.softmax(attention_scores, dim=-1)
    if attention_dropout is not None:
        attention_probs = attention_dropout(attention_probs)
    context = torch.bmm(attention_probs.view(b * np_, sq, sk), value.reshape(sk, b * np_, -1).transpose(0, 1))
    return context.view(b, np_, sq, -1).permute(2, 0, 1, 3).reshape(sq, b, -1)


class ParallelAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, cross: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.np, self.hn, self.cross = heads, hidden // heads, cross
        if cross:
            self.query, self.key_value = Dense(hidden, hidden), Dense(hidden, 2 * hidden)
        else:
            self.query_key_value = Dense(hidden, 3 * hidden)
        self.attention_dropout = nn.Dropout(dropout)
        self.dense = Dense(hidden, hidden)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None,
                encoder_output: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if not self.cross:
            mixed, bias = self.query_key_value(hidden_states)
            mixed = (mixed + bias).view(*mixed.shape[:-1], self.np, 3 * self.hn)
            query, key, value = torch.split(mixed, self.hn, dim=-1)
        else:
            mixed_kv, kv_bias = self.key_value(encoder_output)
            mixed_kv = (mixed_kv + kv_bias).view(*mixed_kv.shape[:-1], self.np, 2 * self.hn)
            key, value = torch.split(mixed_kv, self.hn, dim=-1)
            q, q_bias = self.query(hidden_states)
            query = (q + q_bias).view(*q.shape[:-1], self.np, self.hn)
        context = core_attention(query, key, value, attention_mask, self.attention_dropout)
        return self.dense(context)


class ParallelMLP(nn.Module):
    def __init__(self, hidden: int, ffn_hidden: int) -> None:
        super().__init__()
        self.dense_h_to_4h, self.dense_4h_to_h = Dense(hidden, ffn_hidden), Dense(ffn_hidden, hidden)

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor]:
        intermediate, bias = self.dense_h_to_4h(hidden_states)
        return self.dense_4h_to_h(F.gelu(intermediate + bias))


def bias_dropout_add(x: Tensor, bias: Tensor, residual: Tensor, prob: float, training: bool) -> Tensor:
    return residual + F.dropout(x + bias, p=prob, training=training)


class ParallelTransformerLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn_hidden: int, dropout: float, decoder: bool) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.self_attention = ParallelAttention(hidden, heads, dropout=dropout)
        self.post_attention_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.inter_attention = ParallelAttention(hidden, heads, cross=True, dropout=dropout) if decoder else None
        self.post_inter_attention_layernorm = nn.LayerNorm(hidden, eps=1e-5) if decoder else None
        self.mlp = ParallelMLP(hidden, ffn_hidden)
        self.hidden_dropout = dropout

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None, encoder_output: Tensor | None = None,
                enc_dec_attn_mask: Tensor | None = None) -> Tensor:
        layernorm_output = self.input_layernorm(hidden_states)
        attention_output, attention_bias = self.self_attention(layernorm_output, attention_mask)
        layernorm_input = bias_dropout_add(attention_output, attention_bias, hidden_states, self.hidden_dropout, self.training)
        layernorm_output = self.post_attention_layernorm(layernorm_input)
        if self.inter_attention is not None:
            attention_output, attention_bias = self.inter_attention(layernorm_output, enc_dec_attn_mask, encoder_output)
            layernorm_input = bias_dropout_add(attention_output, attention_bias, layernorm_input, self.hidden_dropout,
                                               self.training)
            layernorm_output = self.post_inter_attention_layernorm(layernorm_input)
        mlp_output, mlp_bias = self.mlp(layernorm_output)
        return bias_dropout_add(mlp_output, mlp_bias, layernorm_input, self.hidden_dropout, self.training)


class ParallelTransformer(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, ffn_hidden: int, dropout: float, decoder: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList(ParallelTransformerLayer(hidden, heads, ffn_hidden, dropout, decoder)
                                    for _ in range(layers))
        self.final_layernorm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, hidden_states, attention_mask, encoder_output=None, enc_dec_attn_mask=None) -> Tensor:
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, encoder_output, enc_dec_attn_mask)
        return self.final_layernorm(hidden_states)


class Embedding(nn.Module):
    def __init__(self, hidden: int, vocab: int, dropout: float) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(MAX_POSITIONS, hidden)
        for table in (self.word_embeddings, self.position_embeddings):
            nn.init.normal_(table.weight, std=0.02)
        self.embedding_dropout = nn.Dropout(dropout)

    def forward(self, input_ids: Tensor) -> Tensor:
        position_ids = torch.arange(input_ids.size(1), device=input_ids.device)[None]
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.embedding_dropout(embeddings.transpose(0, 1).contiguous())   # [b, s, h] -> [s, b, h]


class T5Model(nn.Module):
    def __init__(self, vocab: int, layers: int, hidden: int, heads: int, ffn_hidden: int, dropout: float) -> None:
        super().__init__()
        self.embedding = Embedding(hidden, vocab, dropout)
        self.encoder = ParallelTransformer(layers, hidden, heads, ffn_hidden, dropout, decoder=False)
        self.decoder = ParallelTransformer(layers, hidden, heads, ffn_hidden, dropout, decoder=True)
        self.lm_head_bias = nn.Parameter(torch.zeros(vocab))   # T5LMHead.bias

    def encode(self, src: Tensor) -> Tensor:
        """[b, s, h], batch first for the adapter."""
        return self.encoder(self.embedding(src), (src == PAD)[:, None, None, :]).transpose(0, 1)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        enc_mask = (src == PAD)[:, None, None, :]
        encoder_output = self.encoder(self.embedding(src), enc_mask)
        n = tgt.size(1)
        dec_mask = torch.ones(n, n, dtype=torch.bool, device=tgt.device).triu(1)[None, None]
        hidden = self.decoder(self.embedding(tgt), dec_mask, encoder_output, enc_mask)
        return F.linear(hidden.transpose(0, 1), self.embedding.word_embeddings.weight) + self.lm_head_bias


# -- the adapter ------------------------------------------------------------------------------

def time_first(f):
    """A batch-first view of a Megatron function on time-first states (what the protocol calls)."""
    return lambda x, *rest: f(x.transpose(0, 1), *(r.transpose(0, 1) for r in rest)).transpose(0, 1)


def with_bias(f):
    """A ``skip_bias_add`` layer's output with its bias added, as ``bias_dropout_add`` adds it."""
    def call(*args):
        out, bias = f(*args)
        return out + bias
    return call


def causal(x: Tensor) -> Tensor:
    return torch.ones(x.size(0), x.size(0), dtype=torch.bool, device=x.device).triu(1)[None, None]


class MegatronAdapter(Adapter):
    name = "Megatron-LM-style T5 (hand-written)"

    def attention(self, query, key, value, mask):
        # protocol: (batch, heads, n, d) and True = may attend; Megatron: [s, b, np, hn] and True = hidden
        out = core_attention(query.permute(2, 0, 1, 3), key.permute(2, 0, 1, 3), value.permute(2, 0, 1, 3),
                             None if mask is None else ~mask)
        b, h, n = query.shape[:3]
        return out.view(n, b, h, -1).permute(1, 2, 0, 3)

    def multi_head_attention(self, d_model, n_heads):
        attn = ParallelAttention(d_model, n_heads).eval()
        run = time_first(with_bias(lambda x: attn(x, None)))

        def call(q, k, v):
            if memory_of(q, k, v, "query_key_value (fused)") is not None:
                raise ValueError("the fused query_key_value self-attention attends over its own input only")
            return run(q)
        return call

    def feed_forward(self, d_model, d_ff):
        mlp = ParallelMLP(d_model, d_ff).eval()
        return FeedForwardParts(with_bias(mlp), mlp.dense_h_to_4h.weight.T, mlp.dense_h_to_4h.bias,
                                mlp.dense_4h_to_h.weight.T, mlp.dense_4h_to_h.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "learned position_embeddings (512 rows, shared by both stacks)")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(ParallelTransformerLayer(d_model, n_heads, d_ff, 0.0, decoder=False).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(ParallelTransformerLayer(d_model, n_heads, d_ff, 0.0, decoder=True).eval())

    def _parts(self, net: T5Model, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        def first_input(run, layers):
            return first_layer_input(run, layers).transpose(0, 1)

        words, positions = net.embedding.word_embeddings, net.embedding.position_embeddings
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=words, embed_target=words,
            source_embedding=words.weight, target_embedding=words.weight, output_projection=words.weight,
            encoder_input=lambda src: first_input(lambda: net.encode(src), net.encoder.layers),
            decoder_input=lambda tgt: first_input(decoder_run(tgt), net.decoder.layers),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder.layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder.layers],
            encoder_positions=lambda n: positions.weight[:n], decoder_positions=lambda n: positions.weight[:n],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(T5Model(vocab_size, n_layers, d_model, n_heads, d_ff, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(T5Model(vocab_size, n_layers, d_model, n_heads, d_ff, dropout).train(), vocab_size, d_model)

    def hyperparameters(self):
        return {"dropout_base": (0.1, "--hidden-dropout 0.1 --attention-dropout 0.1")}


def _encoder_parts(layer: ParallelTransformerLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=time_first(lambda x: layer(x, None)),
        self_attention=time_first(with_bias(lambda x: layer.self_attention(x, None))),
        feed_forward=with_bias(layer.mlp),
        norms=(layer.input_layernorm, layer.post_attention_layernorm))


def _decoder_parts(layer: ParallelTransformerLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=time_first(lambda x, memory: layer(x, causal(x), memory, None)),
        self_attention=time_first(with_bias(lambda x: layer.self_attention(x, causal(x)))),
        cross_attention=time_first(with_bias(lambda x, memory: layer.inter_attention(x, None, memory))),
        feed_forward=with_bias(layer.mlp),
        norms=(layer.input_layernorm, layer.post_attention_layernorm, layer.post_inter_attention_layernorm))


def adapter() -> Adapter:
    return MegatronAdapter()
