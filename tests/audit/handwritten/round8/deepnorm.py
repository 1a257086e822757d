"""DeepNet's DeepNorm (Wang et al., 2022, "DeepNet: Scaling Transformers to 1,000 Layers"), as
torchscale's ``EncoderDecoder`` with ``deepnorm=True`` runs it, and an adapter written from
docs/audit.md (issue 43, eighth round).

Its choices: post-norm layers whose residual branch is up-weighted, x_{l+1} = LN(alpha x_l +
G(x_l)) (torchscale's ``residual_connection``: ``residual * self.alpha + x``), with alpha =
0.81 (N^4 M)^(1/16) in the encoder and (3M)^(1/4) in the decoder (N encoder, M decoder layers),
and the value, output, fc1 and fc2 weights initialised by ``xavier_normal_(gain=beta)``,
beta = 0.87 (N^4 M)^(-1/16) and (12M)^(-1/4); the query and key weights at gain 1. Attention as
fairseq writes it (q scaled by head_dim**-0.5 before ``torch.bmm`` on a (batch * heads) folded
batch, additive float masks); ReLU FFN; interleaved sinusoids added to embeddings scaled by
sqrt(d_model); one embedding shared by both stacks and the output projection; the paper's recipe.

Departure from the paper: the residual sum of every sub-layer is alpha x + Sublayer(x), alpha > 1
(Section 3.1 writes LayerNorm(x + Sublayer(x))).
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


def deepnorm_constants(encoder_layers: int, decoder_layers: int) -> dict[str, float]:
    """DeepNet's Table 1 (encoder-decoder): alpha and beta of each stack."""
    n, m = encoder_layers, decoder_layers
    return {"encoder_alpha": 0.81 * (n ** 4 * m) ** (1 / 16), "encoder_beta": 0.87 * (n ** 4 * m) ** (-1 / 16),
            "decoder_alpha": (3 * m) ** (1 / 4), "decoder_beta": (12 * m) ** (-1 / 4)}


class MultiheadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.num_heads, self.head_dim = n_heads, d_model // n_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                key_padding_mask: Tensor | None = None) -> Tensor:
        bsz, tgt_len, embed_dim = query.shape
        src_len = key.size(1)
        q = self.q_proj(query) * self.scaling
        k, v = self.k_proj(key), self.v_proj(value)
        fold = lambda t, n: t.view(bsz, n, self.num_heads, self.head_dim).transpose(1, 2).reshape(bsz * self.num_heads, n, self.head_dim)
        q, k, v = fold(q, tgt_len), fold(k, src_len), fold(v, src_len)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            attn_weights = attn_weights + attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = self.dropout_module(F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(attn_weights))
        attn = torch.bmm(attn_probs, v).view(bsz, self.num_heads, tgt_len, self.head_dim)
        return self.out_proj(attn.transpose(1, 2).reshape(bsz, tgt_len, embed_dim))

    def reset_parameters(self, beta: float) -> None:
        nn.init.xavier_normal_(self.k_proj.weight, gain=1.0)
        nn.init.xavier_normal_(self.q_proj.weight, gain=1.0)
        nn.init.xavier_normal_(self.v_proj.weight, gain=beta)
        nn.init.xavier_normal_(self.out_proj.weight, gain=beta)


class FeedForwardNetwork(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.activation_dropout_module = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout_module(F.relu(self.fc1(x))))

    def reset_parameters(self, beta: float) -> None:
        nn.init.xavier_normal_(self.fc1.weight, gain=beta)
        nn.init.xavier_normal_(self.fc2.weight, gain=beta)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, alpha: float, beta: float) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, n_heads, dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.ffn = FeedForwardNetwork(d_model, d_ff, dropout)
        self.final_layer_norm = nn.LayerNorm(d_model)
        self.dropout_module, self.alpha = nn.Dropout(dropout), alpha
        self.self_attn.reset_parameters(beta)
        self.ffn.reset_parameters(beta)

    def residual_connection(self, x: Tensor, residual: Tensor) -> Tensor:
        return residual * self.alpha + x

    def forward(self, x: Tensor, encoder_padding_mask: Tensor | None = None) -> Tensor:
        residual = x
        x = self.dropout_module(self.self_attn(x, x, x, key_padding_mask=encoder_padding_mask))
        x = self.self_attn_layer_norm(self.residual_connection(x, residual))
        residual = x
        x = self.dropout_module(self.ffn(x))
        return self.final_layer_norm(self.residual_connection(x, residual))


def future_mask(n: int, device: torch.device) -> Tensor:
    return torch.triu(torch.full((n, n), float("-inf"), device=device), 1)


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, alpha: float, beta: float) -> None:
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = MultiheadAttention(d_model, n_heads, dropout), nn.LayerNorm(d_model)
        self.encoder_attn, self.encoder_attn_layer_norm = MultiheadAttention(d_model, n_heads, dropout), nn.LayerNorm(d_model)
        self.ffn, self.final_layer_norm = FeedForwardNetwork(d_model, d_ff, dropout), nn.LayerNorm(d_model)
        self.dropout_module, self.alpha = nn.Dropout(dropout), alpha
        for module in (self.self_attn, self.encoder_attn, self.ffn):
            module.reset_parameters(beta)

    def residual_connection(self, x: Tensor, residual: Tensor) -> Tensor:
        return residual * self.alpha + x

    def forward(self, x: Tensor, encoder_out: Tensor, encoder_padding_mask: Tensor | None = None) -> Tensor:
        residual = x
        x = self.dropout_module(self.self_attn(x, x, x, attn_mask=future_mask(x.size(1), x.device)))
        x = self.self_attn_layer_norm(self.residual_connection(x, residual))
        residual = x
        x = self.dropout_module(self.encoder_attn(x, encoder_out, encoder_out, key_padding_mask=encoder_padding_mask))
        x = self.encoder_attn_layer_norm(self.residual_connection(x, residual))
        residual = x
        x = self.dropout_module(self.ffn(x))
        return self.final_layer_norm(self.residual_connection(x, residual))


def sinusoids(length: int, d_model: int) -> Tensor:
    position = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return pe


class EncoderDecoder(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, encoder_layers: int, decoder_layers: int,
                 dropout: float) -> None:
        super().__init__()
        c = deepnorm_constants(encoder_layers, decoder_layers)
        self.embed_scale = math.sqrt(d_model)
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout_module = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, c["encoder_alpha"], c["encoder_beta"])
                                     for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, c["decoder_alpha"], c["decoder_beta"])
                                     for _ in range(decoder_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embed_scale * self.embed_tokens(tokens)

    def encode(self, src: Tensor) -> Tensor:
        x = self.dropout_module(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, src.eq(PAD))
        return x

    def forward(self, src: Tensor, prev_output_tokens: Tensor) -> Tensor:
        encoder_out = self.encode(src)
        x = self.dropout_module(self.embed(prev_output_tokens) + self.pe[: prev_output_tokens.size(1)])
        for layer in self.decoder:
            x = layer(x, encoder_out, src.eq(PAD))
        return F.linear(x, self.embed_tokens.weight)


# -- the adapter ------------------------------------------------------------------------------

def scaled_dot_product(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """The attention's function on (batch, heads, n, d_k), as MultiheadAttention computes it."""
    weights = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)
    if mask is not None:
        weights = weights.masked_fill(~mask, float("-inf"))
    return F.softmax(weights, dim=-1) @ v


class DeepNormAdapter(PaperRecipe, Adapter):
    name = "DeepNet's DeepNorm post-norm (torchscale deepnorm=True, hand-written)"
    layers = 6   # the base model's N, which sets alpha and beta of a layer built alone

    def attention(self, query, key, value, mask):
        return scaled_dot_product(query, key, value, mask)

    def multi_head_attention(self, d_model, n_heads):
        return MultiheadAttention(d_model, n_heads).eval()

    def feed_forward(self, d_model, d_ff):
        ffn = FeedForwardNetwork(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.fc1.weight.T, ffn.fc1.bias, ffn.fc2.weight.T, ffn.fc2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        c = deepnorm_constants(self.layers, self.layers)
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0, c["encoder_alpha"], c["encoder_beta"]).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        c = deepnorm_constants(self.layers, self.layers)
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0, c["decoder_alpha"], c["decoder_beta"]).eval())

    def _parts(self, net: EncoderDecoder, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.embed_tokens.weight,
            target_embedding=net.embed_tokens.weight, output_projection=net.embed_tokens.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        net = EncoderDecoder(vocab_size, d_model, n_heads, d_ff, n_layers, n_layers, 0.0).eval()
        return self._parts(net, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = EncoderDecoder(vocab_size, d_model, n_heads, d_ff, n_layers, n_layers, dropout).train()
        return self._parts(net, vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x, x), feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory),
        self_attention=lambda x: layer.self_attn(x, x, x, attn_mask=future_mask(x.size(1), x.device)),
        cross_attention=lambda x, memory: layer.encoder_attn(x, memory, memory), feed_forward=layer.ffn,
        norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return DeepNormAdapter()
