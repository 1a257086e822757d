"""A fairseq-style ``TransformerModel`` written out (``transformer_wmt_en_de`` with
``--share-all-embeddings``), time first as fairseq runs it, and an adapter written from
docs/audit.md (issue 43, fourth round).

fairseq's choices kept: post-norm by default (``normalize_before=False``, no norm at the top of
either stack), ``SinusoidalPositionalEmbedding.get_embedding`` (all sines then all cosines,
frequencies exp(-i log(10000) / (half - 1))), positions from ``make_positions`` (padding_idx + 1
on, the padding row zero), ``embed_scale = sqrt(d)``, dropout on the embedded input, attention
dropout on the weights and activation dropout on the FFN's hidden units (the recipe sets both to
0.1 here), biased q/k/v/out projections with q scaled by head_dim**-0.5 before q k^T, the output
projection tied to the one shared embedding; ``label_smoothed_nll_loss`` summed; Adam (0.9, 0.98)
eps 1e-8 and ``inverse_sqrt`` (lr 5e-4, warmup 4000 from 1e-7), stepped after each update.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

BOS, PAD, EOS, UNK = 0, 1, 2, 3   # fairseq's Dictionary


def get_embedding(num_embeddings: int, embedding_dim: int, padding_idx: int | None = None) -> Tensor:
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
    if embedding_dim % 2 == 1:
        emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb


def make_positions(tensor: Tensor, padding_idx: int) -> Tensor:
    mask = tensor.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


class SinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, embedding_dim: int, padding_idx: int, init_size: int = 1024) -> None:
        super().__init__()
        self.embedding_dim, self.padding_idx = embedding_dim, padding_idx
        self.register_buffer("weights", get_embedding(init_size, embedding_dim, padding_idx), persistent=False)

    def forward(self, tokens: Tensor) -> Tensor:
        positions = make_positions(tokens, self.padding_idx)
        return self.weights.index_select(0, positions.view(-1)).view(tokens.size(0), tokens.size(1), -1).detach()


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout = dropout
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        tgt_len, bsz, embed_dim = query.size()
        q = self.q_proj(query) * self.scaling
        k, v = self.k_proj(key), self.v_proj(value)
        heads = lambda t: t.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        q, k, v = heads(q), heads(k), heads(v)
        src_len = k.size(1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            attn_weights += attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2).bool(), float("-inf"))
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = F.dropout(F.softmax(attn_weights.float(), dim=-1), p=self.dropout, training=self.training)
        attn = torch.bmm(attn_probs, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn), None


class TransformerEncoderLayer(nn.Module):
    def __init__(self, args) -> None:
        super().__init__()
        self.embed_dim = args.encoder_embed_dim
        self.self_attn = MultiheadAttention(self.embed_dim, args.encoder_attention_heads, args.attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.dropout, self.activation_dropout = args.dropout, args.activation_dropout
        self.normalize_before = args.encoder_normalize_before
        self.fc1, self.fc2 = nn.Linear(self.embed_dim, args.encoder_ffn_embed_dim), nn.Linear(args.encoder_ffn_embed_dim, self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim)

    def forward(self, x, encoder_padding_mask):
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=encoder_padding_mask)
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = residual + x
        if not self.normalize_before:
            x = self.self_attn_layer_norm(x)
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=self.activation_dropout, training=self.training)
        x = self.fc2(x)
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = residual + x
        if not self.normalize_before:
            x = self.final_layer_norm(x)
        return x


class TransformerDecoderLayer(nn.Module):
    def __init__(self, args) -> None:
        super().__init__()
        d = self.embed_dim = args.decoder_embed_dim
        self.self_attn = MultiheadAttention(d, args.decoder_attention_heads, args.attention_dropout)
        self.encoder_attn = MultiheadAttention(d, args.decoder_attention_heads, args.attention_dropout)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm, self.final_layer_norm = (nn.LayerNorm(d) for _ in range(3))
        self.fc1, self.fc2 = nn.Linear(d, args.decoder_ffn_embed_dim), nn.Linear(args.decoder_ffn_embed_dim, d)
        self.dropout, self.activation_dropout = args.dropout, args.activation_dropout
        self.normalize_before = args.decoder_normalize_before

    def _block(self, x, norm, fn):
        residual = x
        if self.normalize_before:
            x = norm(x)
        x = F.dropout(fn(x), p=self.dropout, training=self.training)
        x = residual + x
        return x if self.normalize_before else norm(x)

    def ffn(self, x):
        x = F.dropout(F.relu(self.fc1(x)), p=self.activation_dropout, training=self.training)
        return self.fc2(x)

    def forward(self, x, encoder_out, encoder_padding_mask, self_attn_mask, self_attn_padding_mask=None):
        x = self._block(x, self.self_attn_layer_norm, lambda y: self.self_attn(
            y, y, y, key_padding_mask=self_attn_padding_mask, attn_mask=self_attn_mask)[0])
        x = self._block(x, self.encoder_attn_layer_norm, lambda y: self.encoder_attn(
            y, encoder_out, encoder_out, key_padding_mask=encoder_padding_mask)[0])
        return self._block(x, self.final_layer_norm, self.ffn)


def buffered_future_mask(tensor: Tensor) -> Tensor:
    dim = tensor.size(0)
    return torch.triu(torch.full((dim, dim), float("-inf"), device=tensor.device), 1)


class Args:
    def __init__(self, d_model=512, heads=8, d_ff=2048, layers=6, dropout=0.1, attention_dropout=0.1,
                 activation_dropout=0.1, normalize_before=False) -> None:
        self.encoder_embed_dim = self.decoder_embed_dim = d_model
        self.encoder_attention_heads = self.decoder_attention_heads = heads
        self.encoder_ffn_embed_dim = self.decoder_ffn_embed_dim = d_ff
        self.encoder_layers = self.decoder_layers = layers
        self.dropout, self.attention_dropout, self.activation_dropout = dropout, attention_dropout, activation_dropout
        self.encoder_normalize_before = self.decoder_normalize_before = normalize_before


class TransformerModel(nn.Module):
    """Encoder and decoder over one shared embedding (``--share-all-embeddings``), batch-first ids in."""

    def __init__(self, args: Args, vocab: int) -> None:
        super().__init__()
        d = args.encoder_embed_dim
        self.args = args
        self.embed_tokens = nn.Embedding(vocab, d, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, mean=0, std=d ** -0.5)
        nn.init.constant_(self.embed_tokens.weight[PAD], 0)
        self.embed_scale = math.sqrt(d)
        self.embed_positions = SinusoidalPositionalEmbedding(d, PAD)
        self.encoder_layers = nn.ModuleList(TransformerEncoderLayer(args) for _ in range(args.encoder_layers))
        self.decoder_layers = nn.ModuleList(TransformerDecoderLayer(args) for _ in range(args.decoder_layers))
        self.encoder_norm = nn.LayerNorm(d) if args.encoder_normalize_before else None
        self.decoder_norm = nn.LayerNorm(d) if args.decoder_normalize_before else None

    def embed(self, tokens: Tensor) -> Tensor:
        x = self.embed_scale * self.embed_tokens(tokens) + self.embed_positions(tokens)
        return F.dropout(x, p=self.args.dropout, training=self.training).transpose(0, 1)

    def encoder(self, src_tokens: Tensor) -> tuple[Tensor, Tensor]:
        padding = src_tokens.eq(PAD)
        x = self.embed(src_tokens)
        for layer in self.encoder_layers:
            x = layer(x, padding)
        return (self.encoder_norm(x) if self.encoder_norm is not None else x), padding

    def decoder(self, prev_output_tokens: Tensor, encoder_out: Tensor, encoder_padding_mask: Tensor) -> Tensor:
        x = self.embed(prev_output_tokens)
        self_padding = prev_output_tokens.eq(PAD) if prev_output_tokens.eq(PAD).any() else None
        for layer in self.decoder_layers:
            x = layer(x, encoder_out, encoder_padding_mask, buffered_future_mask(x), self_padding)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return F.linear(x.transpose(0, 1), self.embed_tokens.weight)

    def forward(self, src_tokens: Tensor, prev_output_tokens: Tensor) -> Tensor:
        return self.decoder(prev_output_tokens, *self.encoder(src_tokens))


def label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index):
    target = target.unsqueeze(-1)
    nll_loss = -lprobs.gather(dim=-1, index=target)
    smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
    pad_mask = target.eq(ignore_index)
    nll_loss.masked_fill_(pad_mask, 0.0)
    smooth_loss.masked_fill_(pad_mask, 0.0)
    nll_loss, smooth_loss = nll_loss.sum(), smooth_loss.sum()
    eps_i = epsilon / (lprobs.size(-1) - 1)
    return (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss


def inverse_sqrt(num_updates: int, lr: float = 5e-4, warmup_updates: int = 4000, warmup_init_lr: float = 1e-7) -> float:
    if num_updates < warmup_updates:
        return warmup_init_lr + num_updates * (lr - warmup_init_lr) / warmup_updates
    return lr * warmup_updates ** 0.5 * num_updates ** -0.5


# -- the adapter ------------------------------------------------------------------------------

class TimeFirst(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Tensor, *rest: Tensor) -> Tensor:
        return self.fn(x.transpose(0, 1), *(r.transpose(0, 1) for r in rest)).transpose(0, 1)


class FairseqStyleAdapter(Adapter):
    def __init__(self, normalize_before: bool = False) -> None:
        self.normalize_before = normalize_before
        self.name = f"fairseq-style TransformerModel (hand-written, normalize_before={normalize_before})"

    def _args(self, d_model=512, heads=8, d_ff=2048, layers=6, dropout=0.0) -> Args:
        drop = dict(dropout=dropout, attention_dropout=dropout, activation_dropout=dropout)
        return Args(d_model, heads, d_ff, layers, normalize_before=self.normalize_before, **drop)

    def multi_head_attention(self, d_model, n_heads):
        attn = MultiheadAttention(d_model, n_heads).eval()
        return TimeFirst(lambda q, k, v: attn(q, k, v)[0])

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        layer = TransformerDecoderLayer(self._args(d_model, 1, d_ff)).eval()
        return FeedForwardParts(layer.ffn, layer.fc1.weight.T, layer.fc1.bias, layer.fc2.weight.T, layer.fc2.bias)

    def positional_encoding(self, length, d_model):
        return get_embedding(length + PAD + 1, d_model, PAD)[PAD + 1:]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(TransformerEncoderLayer(self._args(d_model, n_heads, d_ff)).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(TransformerDecoderLayer(self._args(d_model, n_heads, d_ff)).eval())

    def _parts(self, net: TransformerModel, vocab: int, d_model: int) -> ModelParts:
        encode = lambda src: net.encoder(src)[0].transpose(0, 1)

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        def first_input(run, layers):
            return first_layer_input(run, layers).transpose(0, 1)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=EOS, eos_id=EOS, module=net,
            embed_source=lambda t: net.embed_scale * net.embed_tokens(t),
            embed_target=lambda t: net.embed_scale * net.embed_tokens(t),
            source_embedding=net.embed_tokens.weight, target_embedding=net.embed_tokens.weight,
            output_projection=net.embed_tokens.weight,
            encoder_input=lambda src: first_input(lambda: net.encoder(src), net.encoder_layers),
            decoder_input=lambda tgt: first_input(decoder_run(tgt), net.decoder_layers),
            encode=encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder_layers],
        )

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        net = TransformerModel(self._args(d_model, n_heads, d_ff, n_layers), vocab_size).eval()
        return self._parts(net, vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = TransformerModel(self._args(d_model, n_heads, d_ff, n_layers, dropout), vocab_size).train()
        return self._parts(net, vocab_size, d_model)

    def loss(self, logits, target, pad_id, smoothing):
        return label_smoothed_nll_loss(F.log_softmax(logits.float(), dim=-1), target, smoothing, pad_id)

    def optimizer(self, params):
        return torch.optim.Adam(params, lr=5e-4, betas=(0.9, 0.98), eps=1e-8)

    def learning_rate(self, step, d_model, warmup_steps):
        # the trainer sets the rate for num_updates before each update: update k runs at k - 1
        return inverse_sqrt(step - 1, warmup_updates=warmup_steps)

    def hyperparameters(self):
        return {
            "label_smoothing": (0.1, "--label-smoothing 0.1"), "warmup_steps": (4000, "--warmup-updates 4000"),
            "tokens_per_batch": (3584 * 8, "--max-tokens 3584 on 8 GPUs"), "dropout_base": (0.1, "transformer_wmt_en_de: dropout 0.1"),
            "beam_size": (5, "fairseq-generate --beam 5"), "length_penalty": (1.0, "fairseq-generate --lenpen 1"),
        }


def _encoder_parts(layer: TransformerEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=TimeFirst(lambda x: layer(x, None)),
        self_attention=TimeFirst(lambda x: layer.self_attn(x, x, x)[0]),
        feed_forward=lambda x: layer.fc2(F.dropout(F.relu(layer.fc1(x)), p=layer.activation_dropout, training=layer.training)),
        norms=(layer.self_attn_layer_norm, layer.final_layer_norm),
    )


def _decoder_parts(layer: TransformerDecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=TimeFirst(lambda x, memory: layer(x, memory, None, buffered_future_mask(x))),
        self_attention=TimeFirst(lambda x: layer.self_attn(x, x, x, attn_mask=buffered_future_mask(x))[0]),
        cross_attention=TimeFirst(lambda x, memory: layer.encoder_attn(x, memory, memory)[0]),
        feed_forward=layer.ffn,
        norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm),
    )


def adapter() -> Adapter:
    return FairseqStyleAdapter()


def adapter_normalize_before() -> Adapter:
    return FairseqStyleAdapter(normalize_before=True)
