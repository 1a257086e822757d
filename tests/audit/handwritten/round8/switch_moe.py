"""A mixture-of-experts Transformer as fairseq's ``moe`` branch builds it (``--moe-freq 2
--moe-expert-count 8``, Switch-style top-1 gating, ``fairseq/modules/moe/top1gate.py`` and
``moe_layer.py``) on the paper's base model, and an adapter written from docs/audit.md (issue 43,
eighth round).

Its choices: every second layer of each stack (layers 1, 3, 5 counted from 0) replaces its
feed-forward network by ``MOELayer``: a router ``wg = nn.Linear(d_model, 8, bias=False)``,
softmax gates, each token sent to its argmax expert (padding tokens to none), experts that are
the paper's FFN (d_model -> d_ff -> d_model, ReLU), the output the expert's times its gate; an
expert takes at most ``capacity`` tokens of the batch, in order: ``int(capacity_factor *
ceil(tokens / experts))`` in training (factor 1.0), ``ceil(0.25 * tokens)`` at evaluation
(``moe_eval_capacity_token_fraction``), and a token past the capacity is dropped (its FFN output
is zero, the residual carries it on). The load-balancing loss ``l_aux`` (0.01) is added in
training. Everything else is the paper's base model: post-norm, interleaved sinusoids,
embeddings scaled by sqrt(d_model) and shared by both stacks and the output, the paper's recipe.

Departures from the paper: half the feed-forward layers are not Eq. 2 (gated, per-token experts)
nor position-wise (what a token gets depends on the tokens before it in the batch through the
capacity), and each holds 8 experts (Table 3's counts).
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
EXPERTS, MOE_FREQ, EVAL_CAPACITY_TOKEN_FRACTION = 8, 2, 0.25


def top1gating(logits: Tensor, input_mask: Tensor | None, capacity_factor: float, eval_mode: bool) -> tuple[Tensor, Tensor]:
    """fairseq's ``top1gating`` on (tokens, experts) logits: the combine weights (tokens, experts,
    capacity) and ``l_aux``. ``input_mask`` is True at padding."""
    gates = F.softmax(logits, dim=1)
    num_tokens, num_experts = gates.shape
    if eval_mode:
        capacity = math.ceil(EVAL_CAPACITY_TOKEN_FRACTION * num_tokens)
    else:
        capacity = int(capacity_factor * math.ceil(num_tokens / num_experts))
    indices1_s = torch.argmax(gates, dim=1)
    mask1 = F.one_hot(indices1_s, num_classes=num_experts)
    if input_mask is not None and input_mask.any():
        mask1 = mask1 * (~input_mask).unsqueeze(-1).to(mask1.dtype)
    me, ce = gates.mean(dim=0), mask1.to(gates.dtype).mean(dim=0)
    l_aux = (me * ce).mean() * num_experts * num_experts
    locations1 = torch.cumsum(mask1, dim=0) - 1
    mask1 = mask1 * torch.lt(locations1, capacity)
    locations1_s = torch.sum(locations1 * mask1, dim=1)
    gates1_s = (gates * mask1).sum(dim=1)
    locations1_sc = F.one_hot(locations1_s, num_classes=capacity).to(gates.dtype)
    combine_weights = gates1_s[:, None, None] * mask1.to(gates.dtype)[:, :, None] * locations1_sc[:, None, :]
    return combine_weights, l_aux


class Expert(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1, self.fc2, self.activation_dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(F.relu(self.fc1(x))))


class MOELayer(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float, capacity_factor: float = 1.0) -> None:
        super().__init__()
        self.wg = nn.Linear(d_model, EXPERTS, bias=False)
        self.experts = nn.ModuleList(Expert(d_model, d_ff, dropout) for _ in range(EXPERTS))
        self.capacity_factor, self.l_aux = capacity_factor, torch.zeros(())

    def forward(self, x: Tensor, input_padding_mask: Tensor | None = None) -> Tensor:
        d_model = x.size(-1)
        reshaped = x.reshape(-1, d_model)
        padding = None if input_padding_mask is None else input_padding_mask.reshape(-1)
        combine_weights, self.l_aux = top1gating(self.wg(reshaped), padding, self.capacity_factor, not self.training)
        dispatch_mask = combine_weights.bool().to(x.dtype)
        dispatched = torch.einsum("sec,sm->ecm", dispatch_mask, reshaped)
        expert_outputs = torch.stack([expert(chunk) for expert, chunk in zip(self.experts, dispatched)])
        combined = torch.einsum("sec,ecm->sm", combine_weights, expert_outputs)
        return combined.reshape(x.shape)


class FeedForwardNetwork(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1, self.fc2, self.activation_dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, input_padding_mask: Tensor | None = None) -> Tensor:
        return self.fc2(self.activation_dropout(F.relu(self.fc1(x))))


def sinusoids(length: int, d_model: int) -> Tensor:
    position = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return pe


def future_mask(n: int, device: torch.device) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, is_moe_layer: bool) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ffn = MOELayer(d_model, d_ff, dropout) if is_moe_layer else FeedForwardNetwork(d_model, d_ff, dropout)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def attend(self, x: Tensor, padding: Tensor | None = None) -> Tensor:
        return self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False)[0]

    def forward(self, x: Tensor, padding: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.attend(x, padding)))
        return self.final_layer_norm(x + self.dropout(self.ffn(x, padding)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, is_moe_layer: bool) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.encoder_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ffn = MOELayer(d_model, d_ff, dropout) if is_moe_layer else FeedForwardNetwork(d_model, d_ff, dropout)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.final_layer_norm, self.dropout = nn.LayerNorm(d_model), nn.Dropout(dropout)

    def attend(self, x: Tensor) -> Tensor:
        return self.self_attn(x, x, x, attn_mask=future_mask(x.size(1), x.device), need_weights=False)[0]

    def cross(self, x: Tensor, memory: Tensor, padding: Tensor | None = None) -> Tensor:
        return self.encoder_attn(x, memory, memory, key_padding_mask=padding, need_weights=False)[0]

    def forward(self, x: Tensor, memory: Tensor, padding: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.attend(x)))
        x = self.encoder_attn_layer_norm(x + self.dropout(self.cross(x, memory, padding)))
        return self.final_layer_norm(x + self.dropout(self.ffn(x)))


def is_moe(layer: int) -> bool:
    return (layer + 1) % MOE_FREQ == 0


class MoETransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.embed_scale = math.sqrt(d_model)
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, is_moe(i)) for i in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, is_moe(i)) for i in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embed_scale * self.embed_tokens(tokens)

    def encode(self, src: Tensor) -> Tensor:
        x = self.dropout(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, src.eq(PAD))
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src.eq(PAD))
        return F.linear(x, self.embed_tokens.weight)

    def l_aux(self) -> Tensor:
        return sum(m.l_aux for m in self.modules() if isinstance(m, MOELayer))


# -- the adapter ------------------------------------------------------------------------------

class SwitchMoEAdapter(PaperRecipe, Adapter):
    name = "top-1 mixture-of-experts FFN every second layer (fairseq moe, Switch gating, hand-written)"

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        layer = EncoderLayer(d_model, n_heads, 1, 0.0, False).eval()
        return lambda q, k, v: layer.attend(q)

    def multi_head_cross_attention(self, d_model, n_heads):
        layer = DecoderLayer(d_model, n_heads, 1, 0.0, False).eval()
        return lambda q, k, v: layer.encoder_attn(q, k, v, need_weights=False)[0]

    def feed_forward(self, d_model, d_ff):
        # the feed-forward sub-layer of a MoE layer; Eq. 2's weights read as its first expert's
        moe = MOELayer(d_model, d_ff, 0.0).eval()
        first = moe.experts[0]
        return FeedForwardParts(moe, first.fc1.weight.T, first.fc1.bias, first.fc2.weight.T, first.fc2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0, True).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0, True).eval())

    def _parts(self, net: MoETransformer, vocab: int, d_model: int) -> ModelParts:
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
        return self._parts(MoETransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(MoETransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=layer.attend, feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.attend,
                             cross_attention=lambda x, memory: layer.cross(x, memory), feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return SwitchMoEAdapter()
