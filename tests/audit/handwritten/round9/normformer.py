"""NormFormer (Shleifer et al., 2021) as fairseq's ``TransformerDecoderLayer`` runs it with
``--scale-attn --scale-fc --scale-heads``, in both stacks of an encoder-decoder, with fairseq's
``--layernorm-embedding --no-scale-embedding --encoder-learned-pos --decoder-learned-pos
--share-all-embeddings``, trained under a ``SequentialLR`` of ``LinearLR`` and ``LambdaLR``; an
adapter written from docs/audit.md (issue 43, ninth round).

Its choices: pre-norm layers (``normalize_before``) and a final LayerNorm per stack; after each
self-attention the heads are scaled by the learned ``c_attn`` (h scalars, initialised 1, applied
per head-sized slice of the output, after ``out_proj``, as fairseq does) and normalised by
``attn_ln`` before the dropout and the residual sum; the feed-forward layers normalise their
hidden ReLU activations (``ffn_layernorm``) before ``fc2``. Learned positions (fairseq's
``LearnedPositionalEmbedding``, rows from padding_idx + 1, one table per stack), a LayerNorm on
the sum of embeddings and positions, embeddings not scaled. Ids bos 0 / pad 1 / eos 2.
The recipe: Adam (0.9, 0.98, 1e-9); Eq. 3 written as ``SequentialLR([LinearLR(1/warmup -> 1 over
warmup - 1 steps), LambdaLR(sqrt(warmup / (k + warmup + 1)))], milestones=[warmup])`` on a base
rate of d_model^-0.5 warmup^-0.5, stepped after each update; fairseq's
``label_smoothed_nll_loss`` (eps / (V - 1) on each wrong class), padding ignored.

Departures from the paper: pre-norm with extra norms (Section 3.1), final norms, a LayerNorm
inside the feed-forward layer (Eq. 2), learned positions (Section 3.5), embeddings not scaled
(Section 3.4).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

BOS, PAD, EOS = 0, 1, 2
MAX_POSITIONS = 1024


class LearnedPositionalEmbedding(nn.Embedding):
    def __init__(self, num_embeddings: int, dim: int, padding_idx: int) -> None:
        super().__init__(num_embeddings + padding_idx + 1, dim, padding_idx)
        nn.init.normal_(self.weight, 0, dim ** -0.5)
        nn.init.constant_(self.weight[padding_idx], 0)

    def forward(self, tokens: Tensor) -> Tensor:
        mask = tokens.ne(self.padding_idx).int()
        positions = (torch.cumsum(mask, dim=1) * mask).long() + self.padding_idx
        return super().forward(positions)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.fc1, self.fc2, self.ffn_layernorm = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.LayerNorm(d_ff)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.ffn_layernorm(F.relu(self.fc1(x))))


class ScaledSelfAttention(nn.Module):
    """fairseq's self-attention with NormFormer's head scales and attn_ln (the sub-layer's own output norm)."""

    def __init__(self, d_model: int, h: int, causal: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, h, batch_first=True)
        self.c_attn = nn.Parameter(torch.ones(h))
        self.attn_ln, self.h, self.causal = nn.LayerNorm(d_model), h, causal

    def forward(self, x: Tensor, pad: Tensor | None = None) -> Tensor:
        future = torch.full((x.size(1),) * 2, float("-inf"), device=x.device).triu(1) if self.causal else None
        out = self.attn(x, x, x, key_padding_mask=pad, attn_mask=future, need_weights=False)[0]
        out = torch.einsum("bthd,h->bthd", out.view(*out.shape[:2], self.h, -1), self.c_attn).flatten(2)
        return self.attn_ln(out)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.ffn = ScaledSelfAttention(d_model, h, causal=False), FeedForward(d_model, d_ff)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, pad: Tensor | None = None) -> Tensor:
        x = x + self.dropout(self.self_attn(self.self_attn_layer_norm(x), pad))
        return x + self.dropout(self.ffn(self.final_layer_norm(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = ScaledSelfAttention(d_model, h, causal=True)
        self.encoder_attn = nn.MultiheadAttention(d_model, h, batch_first=True)
        self.ffn = FeedForward(d_model, d_ff)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.final_layer_norm, self.dropout = nn.LayerNorm(d_model), nn.Dropout(dropout)

    def cross(self, x: Tensor, memory: Tensor, pad: Tensor | None = None) -> Tensor:
        return self.encoder_attn(x, memory, memory, key_padding_mask=pad, need_weights=False)[0]

    def forward(self, x: Tensor, memory: Tensor, pad: Tensor | None = None) -> Tensor:
        x = x + self.dropout(self.self_attn(self.self_attn_layer_norm(x)))
        x = x + self.dropout(self.cross(self.encoder_attn_layer_norm(x), memory, pad))
        return x + self.dropout(self.ffn(self.final_layer_norm(x)))


class Stack(nn.Module):
    def __init__(self, embed_tokens: nn.Embedding, layers: list[nn.Module], dropout: float) -> None:
        super().__init__()
        d_model = embed_tokens.embedding_dim
        self.embed_tokens = embed_tokens
        self.embed_positions = LearnedPositionalEmbedding(MAX_POSITIONS, d_model, PAD)
        self.layernorm_embedding, self.layer_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.layers, self.dropout = nn.ModuleList(layers), nn.Dropout(dropout)

    def embed(self, tokens: Tensor) -> Tensor:
        return self.dropout(self.layernorm_embedding(self.embed_tokens(tokens) + self.embed_positions(tokens)))


class NormFormer(nn.Module):
    def __init__(self, vocab: int, d_model: int, h: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, d_model ** -0.5)
        nn.init.constant_(self.embed_tokens.weight[PAD], 0)
        self.encoder = Stack(self.embed_tokens, [EncoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers)], dropout)
        self.decoder = Stack(self.embed_tokens, [DecoderLayer(d_model, h, d_ff, dropout) for _ in range(n_layers)], dropout)

    def encode(self, src: Tensor) -> Tensor:
        x, pad = self.encoder.embed(src), src.eq(PAD)
        for layer in self.encoder.layers:
            x = layer(x, pad)
        return self.encoder.layer_norm(x)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.decoder.embed(tgt)
        for layer in self.decoder.layers:
            x = layer(x, memory, src.eq(PAD))
        return F.linear(self.decoder.layer_norm(x), self.embed_tokens.weight)


# -- the recipe -------------------------------------------------------------------------------

def make_optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98), eps=1e-9)


def make_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup: int) -> torch.optim.lr_scheduler.SequentialLR:
    peak = d_model ** -0.5 * warmup ** -0.5
    for group in optimizer.param_groups:
        group["lr"] = peak
    sched = torch.optim.lr_scheduler
    ramp = sched.LinearLR(optimizer, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1)
    decay = sched.LambdaLR(optimizer, lambda k: math.sqrt(warmup / (k + warmup + 1)))
    return sched.SequentialLR(optimizer, [ramp, decay], milestones=[warmup])


def label_smoothed_nll_loss(lprobs: Tensor, target: Tensor, epsilon: float, ignore_index: int) -> Tensor:
    target = target.unsqueeze(-1)
    nll_loss = -lprobs.gather(dim=-1, index=target)
    smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
    pad_mask = target.eq(ignore_index)
    nll_loss, smooth_loss = nll_loss.masked_fill(pad_mask, 0.0).sum(), smooth_loss.masked_fill(pad_mask, 0.0).sum()
    eps_i = epsilon / (lprobs.size(-1) - 1)
    return (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss


# -- the adapter ------------------------------------------------------------------------------

class NormFormerAdapter(Adapter):
    name = "NormFormer, fairseq --scale-attn --scale-fc --scale-heads (hand-written)"

    def __init__(self) -> None:
        self._rates: dict[tuple[int, int], list[float]] = {}

    def attention(self, query, key, value, mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def multi_head_attention(self, d_model, n_heads):
        attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
        return lambda q, k, v: attn(q, k, v, need_weights=False)[0]

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ff, ff.fc1.weight.T, ff.fc1.bias, ff.fc2.weight.T, ff.fc2.bias)

    def positional_encoding(self, length, d_model):
        raise self.absent("positional_encoding", "learned tables, one per stack (--encoder-learned-pos), no sinusoids")

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(EncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(DecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: NormFormer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        rows = lambda table: (lambda n: table.weight[PAD + 1: PAD + 1 + n])
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed_tokens, embed_target=net.embed_tokens, source_embedding=net.embed_tokens.weight,
            target_embedding=net.embed_tokens.weight, output_projection=net.embed_tokens.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder.layers),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder.layers),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder.layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder.layers],
            encoder_positions=rows(net.encoder.embed_positions), decoder_positions=rows(net.decoder.embed_positions))

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(NormFormer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(NormFormer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    def optimizer(self, params):
        return make_optimizer(params)

    def update_rates(self, steps, d_model, warmup_steps):
        # the training loop: optimizer.step() at the scheduler's current rate, then scheduler.step()
        rates = self._rates.get((d_model, warmup_steps), [])
        if len(rates) < max(steps):
            optimizer = make_optimizer([nn.Parameter(torch.zeros(1))])
            scheduler, rates = make_scheduler(optimizer, d_model, warmup_steps), []
            for _ in range(max(steps)):
                rates.append(optimizer.param_groups[0]["lr"])
                scheduler.step()
            self._rates[(d_model, warmup_steps)] = rates
        return [rates[k - 1] for k in steps]

    def learning_rate(self, step, d_model, warmup_steps):
        return self.update_rates([step], d_model, warmup_steps)[0]

    def loss(self, logits, target, pad_id, smoothing):
        return label_smoothed_nll_loss(F.log_softmax(logits.float(), dim=-1), target, smoothing, pad_id)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "--label-smoothing 0.1"), "warmup_steps": (4000, "--warmup-updates 4000"),
                "dropout_base": (0.1, "--dropout 0.1")}


def _encoder_parts(layer: EncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=layer.self_attn, feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: DecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory), self_attention=layer.self_attn,
                             cross_attention=layer.cross, feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return NormFormerAdapter()
