"""A purely functional Transformer, as JAX/haiku/flax ports are written, translated to torch: every
weight in one flat ``nn.ParameterDict`` keyed by path ("encoder/layer_0/attention/query/w"), the
model a set of functions of (params, inputs), no ``nn.Module`` per layer; and an adapter written
from docs/audit.md (issue 43, sixth round).

Its choices: linear weights stored (in, out) and applied as ``x @ w + b`` (haiku's ``Linear``);
masks as t2t/flax build them, a float 1 = keep turned into an additive bias of -1e9 on the
logits; post-norm layers with a LayerNorm written out (eps 1e-6); ReLU FFN; one embedding
matrix shared by both stacks and the output (``logits = x @ embed.T``), scaled by sqrt(d_model);
dropout through an ``is_training`` flag (the torch wrapper passes ``self.training``); the paper's
training recipe. One departure: the positional table is flax's WMT example's
``sinusoidal_init``, the paper's frequencies with all sines before all cosines (the layout, which
``sec3.pe.equations`` and ``sec3.pe.layout`` read).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from tests.audit.handwritten.round6.paper_recipe import PaperRecipe

PAD, BOS, EOS = 0, 1, 2
NEG_INF = -1e9


class Config:
    def __init__(self, vocab=37000, d_model=512, heads=8, d_ff=2048, layers=6, dropout=0.1, max_len=512) -> None:
        self.vocab, self.d_model, self.heads, self.d_ff, self.layers = vocab, d_model, heads, d_ff, layers
        self.dropout, self.max_len = dropout, max_len


# -- parameters: a flat dict of paths --------------------------------------------------------

def _linear_params(gen: torch.Generator, fan_in: int, fan_out: int) -> dict[str, Tensor]:
    return {"w": torch.randn(fan_in, fan_out, generator=gen) / math.sqrt(fan_in), "b": torch.zeros(fan_out)}


def _layer_params(gen: torch.Generator, cfg: Config, prefix: str, cross: bool) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    blocks = ["self_attention", "cross_attention"] if cross else ["self_attention"]
    for block in blocks:
        for proj in ("query", "key", "value", "output"):
            for k, v in _linear_params(gen, cfg.d_model, cfg.d_model).items():
                out[f"{prefix}/{block}/{proj}/{k}"] = v
    for name, (a, b) in {"mlp/linear_1": (cfg.d_model, cfg.d_ff), "mlp/linear_2": (cfg.d_ff, cfg.d_model)}.items():
        for k, v in _linear_params(gen, a, b).items():
            out[f"{prefix}/{name}/{k}"] = v
    for norm in [f"{b}_norm" for b in blocks] + ["mlp_norm"]:
        out[f"{prefix}/{norm}/scale"], out[f"{prefix}/{norm}/offset"] = torch.ones(cfg.d_model), torch.zeros(cfg.d_model)
    return out


def init_params(cfg: Config, seed: int = 0) -> nn.ParameterDict:
    gen = torch.Generator().manual_seed(seed)
    flat = {"embed/embeddings": torch.randn(cfg.vocab, cfg.d_model, generator=gen) * cfg.d_model ** -0.5}
    for i in range(cfg.layers):
        flat.update(_layer_params(gen, cfg, f"encoder/layer_{i}", cross=False))
        flat.update(_layer_params(gen, cfg, f"decoder/layer_{i}", cross=True))
    # ParameterDict keys may not hold dots; slashes are fine
    return nn.ParameterDict({k: nn.Parameter(v) for k, v in flat.items()})


# -- the model: functions of (params, inputs) -------------------------------------------------

def sinusoidal_init(max_len: int, d_feature: int) -> Tensor:
    """flax examples/wmt: ``pe[:, :d//2] = sin(position * div_term); pe[:, d//2:] = cos(...)``."""
    pe = torch.zeros(max_len, d_feature)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_feature, 2).float() * -(math.log(10000.0) / d_feature))
    pe[:, : d_feature // 2] = torch.sin(position * div_term)
    pe[:, d_feature // 2: 2 * (d_feature // 2)] = torch.cos(position * div_term)
    return pe


def linear(params, name: str, x: Tensor) -> Tensor:
    return x @ params[f"{name}/w"] + params[f"{name}/b"]


def layer_norm(x: Tensor, scale: Tensor, offset: Tensor, eps: float = 1e-6) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * scale + offset


def dropout(x: Tensor, rate: float, is_training: bool) -> Tensor:
    return F.dropout(x, rate, training=is_training)


def dot_product_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None) -> Tensor:
    """(batch, heads, n, d_k) each; ``bias`` additive (0 keep, -1e9 masked), broadcast on the logits."""
    logits = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
    if bias is not None:
        logits = logits + bias
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(logits, dim=-1), v)


def attention_bias(keep: Tensor) -> Tensor:
    """A float mask, 1 = keep, to the additive bias the logits take."""
    return (1.0 - keep) * NEG_INF


def multi_head_attention(params, name: str, inputs_q: Tensor, inputs_kv: Tensor, bias: Tensor | None, heads: int) -> Tensor:
    b, n, d = inputs_q.shape
    split = lambda t: t.reshape(b, t.size(1), heads, d // heads).transpose(1, 2)
    q, k, v = (split(linear(params, f"{name}/{p}", x)) for p, x in
               (("query", inputs_q), ("key", inputs_kv), ("value", inputs_kv)))
    out = dot_product_attention(q, k, v, bias).transpose(1, 2).reshape(b, n, d)
    return linear(params, f"{name}/output", out)


def mlp(params, name: str, x: Tensor, rate: float, is_training: bool) -> Tensor:
    hidden = dropout(torch.relu(linear(params, f"{name}/linear_1", x)), rate, is_training)
    return linear(params, f"{name}/linear_2", hidden)


def norm(params, name: str, x: Tensor) -> Tensor:
    return layer_norm(x, params[f"{name}/scale"], params[f"{name}/offset"])


def encoder_block(params, prefix: str, x: Tensor, bias: Tensor | None, cfg: Config, is_training: bool) -> Tensor:
    y = multi_head_attention(params, f"{prefix}/self_attention", x, x, bias, cfg.heads)
    x = norm(params, f"{prefix}/self_attention_norm", x + dropout(y, cfg.dropout, is_training))
    y = mlp(params, f"{prefix}/mlp", x, cfg.dropout, is_training)
    return norm(params, f"{prefix}/mlp_norm", x + dropout(y, cfg.dropout, is_training))


def decoder_block(params, prefix: str, x: Tensor, memory: Tensor, self_bias: Tensor, cross_bias: Tensor | None,
                  cfg: Config, is_training: bool) -> Tensor:
    y = multi_head_attention(params, f"{prefix}/self_attention", x, x, self_bias, cfg.heads)
    x = norm(params, f"{prefix}/self_attention_norm", x + dropout(y, cfg.dropout, is_training))
    y = multi_head_attention(params, f"{prefix}/cross_attention", x, memory, cross_bias, cfg.heads)
    x = norm(params, f"{prefix}/cross_attention_norm", x + dropout(y, cfg.dropout, is_training))
    y = mlp(params, f"{prefix}/mlp", x, cfg.dropout, is_training)
    return norm(params, f"{prefix}/mlp_norm", x + dropout(y, cfg.dropout, is_training))


def causal_bias(n: int, device=None) -> Tensor:
    return attention_bias(torch.tril(torch.ones(n, n, device=device)))


def embed(params, tokens: Tensor, cfg: Config, is_training: bool) -> Tensor:
    x = params["embed/embeddings"][tokens] * math.sqrt(cfg.d_model)
    x = x + sinusoidal_init(tokens.size(1), cfg.d_model).to(x.device)
    return dropout(x, cfg.dropout, is_training)


def encode(params, src: Tensor, cfg: Config, is_training: bool = False) -> Tensor:
    bias = attention_bias(src.ne(PAD).float())[:, None, None, :]
    x = embed(params, src, cfg, is_training)
    for i in range(cfg.layers):
        x = encoder_block(params, f"encoder/layer_{i}", x, bias, cfg, is_training)
    return x


def decode(params, tgt: Tensor, memory: Tensor, src: Tensor, cfg: Config, is_training: bool = False) -> Tensor:
    cross = attention_bias(src.ne(PAD).float())[:, None, None, :]
    self_bias = causal_bias(tgt.size(1), tgt.device)
    x = embed(params, tgt, cfg, is_training)
    for i in range(cfg.layers):
        x = decoder_block(params, f"decoder/layer_{i}", x, memory, self_bias, cross, cfg, is_training)
    return x @ params["embed/embeddings"].T


def transformer(params, src: Tensor, tgt: Tensor, cfg: Config, is_training: bool = False) -> Tensor:
    return decode(params, tgt, encode(params, src, cfg, is_training), src, cfg, is_training)


class Functional(nn.Module):
    """The torch wrapper of the port: the flat dict and ``is_training = self.training``."""

    def __init__(self, cfg: Config, seed: int = 0) -> None:
        super().__init__()
        self.cfg, self.params = cfg, init_params(cfg, seed)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return transformer(self.params, src, tgt, self.cfg, self.training)


# -- the adapter ------------------------------------------------------------------------------

class FunctionalAdapter(PaperRecipe, Adapter):
    name = "functional Transformer, weights in a flat ParameterDict (hand-written, flax/haiku port)"

    def attention(self, query, key, value, mask):
        return dot_product_attention(query, key, value, None if mask is None else attention_bias(mask.float()))

    def _layer(self, d_model, n_heads, d_ff, cross) -> tuple[nn.ParameterDict, Config]:
        cfg = Config(vocab=8, d_model=d_model, heads=n_heads, d_ff=d_ff, layers=0, dropout=0.0)
        gen = torch.Generator().manual_seed(0)
        return nn.ParameterDict({k: nn.Parameter(v) for k, v in _layer_params(gen, cfg, "layer", cross).items()}), cfg

    def multi_head_attention(self, d_model, n_heads):
        params, _ = self._layer(d_model, n_heads, 4, cross=False)
        return lambda q, k, v: multi_head_attention(params, "layer/self_attention", q, k, None, n_heads) \
            if torch.equal(k, v) else _refuse()

    def feed_forward(self, d_model, d_ff):
        params, _ = self._layer(d_model, 1, d_ff, cross=False)
        return FeedForwardParts(functools.partial(mlp, params, "layer/mlp", rate=0.0, is_training=False),
                                params["layer/mlp/linear_1/w"], params["layer/mlp/linear_1/b"],
                                params["layer/mlp/linear_2/w"], params["layer/mlp/linear_2/b"])

    def positional_encoding(self, length, d_model):
        return sinusoidal_init(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        params, cfg = self._layer(d_model, n_heads, d_ff, cross=False)
        return _encoder_parts(params, "layer", cfg, lambda: False)

    def decoder_layer(self, d_model, n_heads, d_ff):
        params, cfg = self._layer(d_model, n_heads, d_ff, cross=True)
        return _decoder_parts(params, "layer", cfg, lambda: False)

    def _parts(self, net: Functional, vocab: int, d_model: int) -> ModelParts:
        p, cfg = net.params, net.cfg
        emb = p["embed/embeddings"]
        scaled = lambda t: emb[t] * math.sqrt(d_model)
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=scaled, embed_target=scaled, source_embedding=emb, target_embedding=emb, output_projection=emb,
            encoder_input=lambda src: embed(p, src, cfg, net.training),
            decoder_input=lambda tgt: embed(p, tgt, cfg, net.training),
            encode=lambda src: encode(p, src, cfg, net.training),
            encoder_layers=[_encoder_parts(p, f"encoder/layer_{i}", cfg, lambda: net.training) for i in range(cfg.layers)],
            decoder_layers=[_decoder_parts(p, f"decoder/layer_{i}", cfg, lambda: net.training) for i in range(cfg.layers)],
        )

    def _net(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout) -> Functional:
        return Functional(Config(vocab_size, d_model, n_heads, d_ff, n_layers, dropout))

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(self._net(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _refuse():
    raise ValueError("multi_head_attention's module is self-attention: keys and values apart go through "
                     "multi_head_cross_attention")


def _encoder_parts(p, prefix: str, cfg: Config, training) -> EncoderLayerParts:
    """``training()``: the wrapper's mode, read at each call (the checks switch it)."""
    return EncoderLayerParts(
        layer=lambda x: encoder_block(p, prefix, x, None, cfg, training()),
        self_attention=lambda x: multi_head_attention(p, f"{prefix}/self_attention", x, x, None, cfg.heads),
        feed_forward=lambda x: mlp(p, f"{prefix}/mlp", x, cfg.dropout, training()),
        norms=(functools.partial(norm, p, f"{prefix}/self_attention_norm"), functools.partial(norm, p, f"{prefix}/mlp_norm")))


def _decoder_parts(p, prefix: str, cfg: Config, training) -> DecoderLayerParts:
    causal = lambda x: causal_bias(x.size(1), x.device)
    return DecoderLayerParts(
        layer=lambda x, memory: decoder_block(p, prefix, x, memory, causal(x), None, cfg, training()),
        self_attention=lambda x: multi_head_attention(p, f"{prefix}/self_attention", x, x, causal(x), cfg.heads),
        cross_attention=lambda x, memory: multi_head_attention(p, f"{prefix}/cross_attention", x, memory, None, cfg.heads),
        feed_forward=lambda x: mlp(p, f"{prefix}/mlp", x, cfg.dropout, training()),
        norms=tuple(functools.partial(norm, p, f"{prefix}/{n}") for n in
                    ("self_attention_norm", "cross_attention_norm", "mlp_norm")))


def adapter() -> Adapter:
    return FunctionalAdapter()
