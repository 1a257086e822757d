"""A tensor2tensor-style ``transformer_base`` (v2 hparams) written out in PyTorch, and an adapter
written from docs/audit.md (issue 43, fourth round).

tensor2tensor's choices kept: ``layer_preprocess_sequence="n"`` and ``postprocess="da"`` (pre-norm:
x + dropout(f(norm(x))), and a norm at the top of each stack), its ``layer_norm`` (``scale`` and
``bias``, variance inside rsqrt with eps 1e-6), ``multihead_attention`` with q, k, v and output
transforms without bias and q scaled by depth_per_head**-0.5, attention bias -1e9 on padding and
the future, ``attention_dropout`` on the weights, ``dense_relu_dense`` with ``relu_dropout``, the
symbol modality's embedding multiplied by sqrt(hidden_size) and zeroed at padding, one weight for
both embeddings and the softmax, ``get_timing_signal_1d`` (sines then cosines, timescales from 1 to
1e4 over num_timescales - 1 steps, positions from 0), ``shift_right_3d`` (the decoder's first
input is a zero vector, not an embedded start token). Training: label smoothing 0.1, Adam (0.9,
0.997, 1e-9), ``constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size`` with constant 2.0 and 8000
warm-up steps, batches of 4096 tokens, beam 4 and alpha 0.6.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.keys_values import memory_of
from repro.audit.zoo.stack_input import first_layer_input

PAD, EOS = 0, 1   # t2t's text encoders: <pad> 0, <EOS> 1


def get_timing_signal_1d(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0) -> Tensor:
    position = torch.arange(length, dtype=torch.float32) + start_index
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * torch.exp(torch.arange(num_timescales, dtype=torch.float32) * -log_timescale_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)
    return F.pad(signal, (0, channels % 2))


class LayerNorm(nn.Module):
    def __init__(self, depth: int, epsilon: float = 1e-6) -> None:
        super().__init__()
        self.scale, self.bias, self.epsilon = nn.Parameter(torch.ones(depth)), nn.Parameter(torch.zeros(depth)), epsilon

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) * torch.rsqrt(variance + self.epsilon) * self.scale + self.bias


class MultiheadAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, attention_dropout: float) -> None:
        super().__init__()
        self.heads, self.attention_dropout = heads, attention_dropout
        self.q, self.k, self.v, self.output_transform = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))

    def forward(self, query_antecedent: Tensor, memory_antecedent: Tensor | None, bias: Tensor | None) -> Tensor:
        memory = query_antecedent if memory_antecedent is None else memory_antecedent
        split = lambda t: t.view(t.size(0), t.size(1), self.heads, -1).transpose(1, 2)
        q, k, v = split(self.q(query_antecedent)), split(self.k(memory)), split(self.v(memory))
        q = q * (q.size(-1) ** -0.5)
        logits = q @ k.transpose(-1, -2)
        if bias is not None:
            logits = logits + bias
        weights = F.dropout(logits.softmax(-1), self.attention_dropout, self.training)
        out = (weights @ v).transpose(1, 2).reshape(query_antecedent.shape)
        return self.output_transform(out)


class DenseReluDense(nn.Module):
    def __init__(self, hidden: int, filter_size: int, relu_dropout: float) -> None:
        super().__init__()
        self.conv1, self.conv2, self.relu_dropout = nn.Linear(hidden, filter_size), nn.Linear(filter_size, hidden), relu_dropout

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(F.dropout(F.relu(self.conv1(x)), self.relu_dropout, self.training))


class HParams:
    def __init__(self, hidden_size=512, num_heads=8, filter_size=2048, num_hidden_layers=6, dropout=0.1) -> None:
        self.hidden_size, self.num_heads, self.filter_size, self.num_hidden_layers = hidden_size, num_heads, filter_size, num_hidden_layers
        self.layer_prepostprocess_dropout = self.attention_dropout = self.relu_dropout = dropout
        self.label_smoothing, self.learning_rate_warmup_steps, self.learning_rate_constant = 0.1, 8000, 2.0
        self.optimizer_adam_beta1, self.optimizer_adam_beta2, self.optimizer_adam_epsilon = 0.9, 0.997, 1e-9
        self.batch_size, self.beam_size, self.alpha = 4096, 4, 0.6


class Sublayer(nn.Module):
    """``layer_preprocess`` ("n") before f, ``layer_postprocess`` ("da") after it."""

    def __init__(self, hp: HParams) -> None:
        super().__init__()
        self.norm, self.dropout = LayerNorm(hp.hidden_size), hp.layer_prepostprocess_dropout

    def forward(self, x: Tensor, f) -> Tensor:
        return x + F.dropout(f(self.norm(x)), self.dropout, self.training)


class EncoderLayer(nn.Module):
    def __init__(self, hp: HParams) -> None:
        super().__init__()
        self.self_attention = MultiheadAttention(hp.hidden_size, hp.num_heads, hp.attention_dropout)
        self.ffn = DenseReluDense(hp.hidden_size, hp.filter_size, hp.relu_dropout)
        self.subs = nn.ModuleList([Sublayer(hp), Sublayer(hp)])

    def forward(self, x: Tensor, bias: Tensor | None) -> Tensor:
        x = self.subs[0](x, lambda y: self.self_attention(y, None, bias))
        return self.subs[1](x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, hp: HParams) -> None:
        super().__init__()
        self.self_attention = MultiheadAttention(hp.hidden_size, hp.num_heads, hp.attention_dropout)
        self.encdec_attention = MultiheadAttention(hp.hidden_size, hp.num_heads, hp.attention_dropout)
        self.ffn = DenseReluDense(hp.hidden_size, hp.filter_size, hp.relu_dropout)
        self.subs = nn.ModuleList([Sublayer(hp) for _ in range(3)])

    def forward(self, x, encoder_output, self_bias, encdec_bias):
        x = self.subs[0](x, lambda y: self.self_attention(y, None, self_bias))
        x = self.subs[1](x, lambda y: self.encdec_attention(y, encoder_output, encdec_bias))
        return self.subs[2](x, self.ffn)


def attention_bias_ignore_padding(tokens: Tensor) -> Tensor:
    return (tokens == PAD).float()[:, None, None, :] * -1e9


def attention_bias_lower_triangle(length: int, device=None) -> Tensor:
    return torch.ones(length, length, device=device).triu(1)[None, None] * -1e9


class Transformer(nn.Module):
    def __init__(self, hp: HParams, vocab: int) -> None:
        super().__init__()
        self.hp = hp
        self.shared = nn.Parameter(torch.randn(vocab, hp.hidden_size) * hp.hidden_size ** -0.5)
        self.encoder_layers = nn.ModuleList(EncoderLayer(hp) for _ in range(hp.num_hidden_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(hp) for _ in range(hp.num_hidden_layers))
        self.encoder_norm, self.decoder_norm = LayerNorm(hp.hidden_size), LayerNorm(hp.hidden_size)

    def bottom(self, ids: Tensor) -> Tensor:
        """The symbol modality: embedding x sqrt(hidden_size), zero at padding."""
        return F.embedding(ids, self.shared) * self.hp.hidden_size ** 0.5 * (ids != PAD).float()[..., None]

    def _timed(self, x: Tensor) -> Tensor:
        x = x + get_timing_signal_1d(x.size(1), x.size(2)).to(x.device)
        return F.dropout(x, self.hp.layer_prepostprocess_dropout, self.training)

    def encode(self, inputs: Tensor) -> Tensor:
        x, bias = self._timed(self.bottom(inputs)), attention_bias_ignore_padding(inputs)
        for layer in self.encoder_layers:
            x = layer(x, bias)
        return self.encoder_norm(x)

    def decode(self, targets: Tensor, encoder_output: Tensor, inputs: Tensor) -> Tensor:
        shifted = F.pad(self.bottom(targets), (0, 0, 1, 0))[:, :-1]          # shift_right_3d
        x = self._timed(shifted)
        self_bias = attention_bias_lower_triangle(targets.size(1), targets.device)
        encdec_bias = attention_bias_ignore_padding(inputs)
        for layer in self.decoder_layers:
            x = layer(x, encoder_output, self_bias, encdec_bias)
        return self.decoder_norm(x) @ self.shared.T

    def forward(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Logits for ``targets``: t2t's body shifts the embedded targets right itself."""
        return self.decode(targets, self.encode(inputs), inputs)


def learning_rate(step: int, hp: HParams) -> float:
    """``constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size``, at t2t's global step (from 0)."""
    return (hp.learning_rate_constant * min(1.0, step / hp.learning_rate_warmup_steps)
            * max(step, hp.learning_rate_warmup_steps) ** -0.5 * hp.hidden_size ** -0.5)


def smoothed_cross_entropy(logits: Tensor, labels: Tensor, confidence: float, pad: int) -> Tensor:
    """``smoothing_cross_entropy``: the soft target puts (1 - confidence) / (V - 1) on each other class."""
    vocab = logits.size(-1)
    low = (1.0 - confidence) / (vocab - 1)
    soft = torch.full_like(logits, low).scatter(-1, labels[:, None], confidence)
    xent = -(soft * F.log_softmax(logits, -1)).sum(-1)
    normalizing = -(confidence * math.log(confidence) + (vocab - 1) * low * math.log(low + 1e-20))
    return ((xent - normalizing) * (labels != pad).float()).sum()


# -- the adapter ------------------------------------------------------------------------------

class T2TAdapter(Adapter):
    name = "tensor2tensor-style transformer_base v2 (hand-written)"

    def attention(self, query, key, value, mask):
        bias = None if mask is None else (~mask).float() * -1e9
        weights = ((query * query.size(-1) ** -0.5) @ key.transpose(-1, -2) + (0 if bias is None else bias)).softmax(-1)
        return weights @ value

    def multi_head_attention(self, d_model, n_heads):
        attn = MultiheadAttention(d_model, n_heads, 0.0).eval()
        return lambda q, k, v: attn(q, memory_of(q, k, v, "t2t's multihead_attention"), None)

    def feed_forward(self, d_model, d_ff):
        ffn = DenseReluDense(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.conv1.weight.T, ffn.conv1.bias, ffn.conv2.weight.T, ffn.conv2.bias)

    def positional_encoding(self, length, d_model):
        return get_timing_signal_1d(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(HParams(d_model, n_heads, d_ff, 1, 0.0)).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(HParams(d_model, n_heads, d_ff, 1, 0.0)).eval())

    def _parts(self, net: Transformer, vocab: int, d_model: int) -> ModelParts:
        def forward(src, tgt_in):
            # the protocol's tgt_in is already shifted (BOS first); t2t shifts inside, so it is given
            # the targets tgt_in[1:] (the last position's own target never reaches the logits)
            targets = torch.cat([tgt_in[:, 1:], torch.full_like(tgt_in[:, :1], PAD)], dim=1)
            return net(src, targets)

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: forward(src, tgt)

        return ModelParts(
            forward=forward, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=PAD, eos_id=EOS, module=net,
            embed_source=net.bottom, embed_target=net.bottom,
            source_embedding=net.shared, target_embedding=net.shared, output_projection=net.shared,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder_layers),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder_layers),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder_layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(Transformer(HParams(d_model, n_heads, d_ff, n_layers, 0.0), vocab_size).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = Transformer(HParams(d_model, n_heads, d_ff, n_layers, dropout), vocab_size).train()
        return self._parts(net, vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return smoothed_cross_entropy(logits, target, 1.0 - smoothing, pad_id)

    def optimizer(self, params):
        hp = HParams()
        return torch.optim.Adam(params, lr=hp.learning_rate_constant,
                                betas=(hp.optimizer_adam_beta1, hp.optimizer_adam_beta2), eps=hp.optimizer_adam_epsilon)

    def learning_rate(self, step, d_model, warmup_steps):
        hp = HParams(hidden_size=d_model)
        hp.learning_rate_warmup_steps = warmup_steps
        return learning_rate(step - 1, hp)   # t2t's global_step is 0 at the first update

    def hyperparameters(self):
        hp = HParams()
        return {
            "label_smoothing": (hp.label_smoothing, "transformer_base: label_smoothing"),
            "warmup_steps": (hp.learning_rate_warmup_steps, "transformer_base_v2: learning_rate_warmup_steps"),
            "tokens_per_batch": (hp.batch_size, "transformer_base: batch_size (tokens per GPU)"),
            "dropout_base": (hp.layer_prepostprocess_dropout, "transformer_base: layer_prepostprocess_dropout"),
            "beam_size": (hp.beam_size, "t2t-decoder --decode_hparams beam_size=4"),
            "length_penalty": (hp.alpha, "t2t-decoder --decode_hparams alpha=0.6"),
        }


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=lambda x: layer(x, None),
        self_attention=lambda x: layer.self_attention(x, None, None),
        feed_forward=layer.ffn,
        norms=(layer.subs[0].norm, layer.subs[1].norm),
    )


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    causal = lambda x: attention_bias_lower_triangle(x.size(1), x.device)
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, causal(x), None),
        self_attention=lambda x: layer.self_attention(x, None, causal(x)),
        cross_attention=lambda x, memory: layer.encdec_attention(x, memory, None),
        feed_forward=layer.ffn,
        norms=tuple(s.norm for s in layer.subs),
    )


def adapter() -> Adapter:
    return T2TAdapter()
