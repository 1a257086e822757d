"""fairseq's ``TransformerModel`` as its decoding runs it: the ``incremental_state`` dictionary of
each attention, ``reorder_incremental_state`` and ``SequenceGenerator``'s beam search, written out
in torch (fairseq 0.12 does not import on Python 3.11), and an adapter written from docs/audit.md
(issue 43, seventh round). The round-four ``fairseq_style`` family covers the model's training
path; this one exposes the search, the cache and the ids fairseq decodes with.

fairseq's choices kept: the dictionary's ids bos 0, pad 1, eos 2, unk 3, and the decoder's input
starting with **eos** (``prev_output_tokens``: the target shifted right with eos first);
``MultiheadAttention`` with ``q_proj``/``k_proj``/``v_proj``/``out_proj``, q multiplied by
head_dim**-0.5 before q k^T, ``key_padding_mask`` True at padding, the future mask an additive
-inf ``buffered_future_mask`` applied only without ``incremental_state``; the cache a dict keyed
by each attention's ``_incremental_state_id`` holding ``prev_key``/``prev_value`` (the
encoder-decoder attention's computed once, ``static_kv``), one new target position per call (the
decoder slices ``prev_output_tokens[:, -1:]``); ``SinusoidalPositionalEmbedding`` (sines then
cosines, positions from padding_idx + 1, the padding row zero); ``embed_scale`` sqrt(d); post-norm
``transformer_wmt_en_de`` with ``--share-all-embeddings``; ``label_smoothed_nll_loss`` (summed);
Adam (0.9, 0.98), eps 1e-8; ``inverse_sqrt`` (lr 5e-4, 4000 warm-up updates from 1e-7, the rate
set after each update for the next). ``SequenceGenerator`` with fairseq-generate's defaults: beam
5, ``lenpen`` 1.0 dividing a finished hypothesis's score by its length (EOS included) to the power
lenpen, ``max_len_a`` 0 and ``max_len_b`` 200 (the adapter passes ``max_len_a=1``,
``max_len_b=offset`` for an output limit of input + offset), EOS forced at the limit, pad never
emitted, a sentence finished once beam finished hypotheses are collected.

Departures from the paper: sines then cosines (and fairseq's frequencies), beam 5, length penalty
len^1.0 instead of GNMT's ((5 + len) / 6)^0.6, Adam's epsilon, the learning rate schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.stack_input import first_layer_input

BOS, PAD, EOS = 0, 1, 2
IncrementalState = dict[str, dict[str, Tensor]]


def get_embedding(num_embeddings: int, embedding_dim: int, padding_idx: int) -> Tensor:
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    emb[padding_idx, :] = 0
    return emb


def make_positions(tokens: Tensor, padding_idx: int) -> Tensor:
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1) * mask).long() + padding_idx


class MultiheadAttention(nn.Module):
    _ids = 0

    def __init__(self, embed_dim: int, num_heads: int, dropout: float, encoder_decoder_attention: bool = False) -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.scaling = num_heads, embed_dim // num_heads, (embed_dim // num_heads) ** -0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.dropout_module, self.encoder_decoder_attention = nn.Dropout(dropout), encoder_decoder_attention
        MultiheadAttention._ids += 1
        self._incremental_state_id = f"attn{MultiheadAttention._ids}"

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                incremental_state: IncrementalState | None = None, attn_mask: Tensor | None = None) -> Tensor:
        bsz, tgt_len, embed_dim = query.shape
        heads = lambda x: x.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        q = heads(self.q_proj(query) * self.scaling)
        saved = None if incremental_state is None else incremental_state.get(self._incremental_state_id)
        if saved is not None and self.encoder_decoder_attention:
            k, v = saved["prev_key"], saved["prev_value"]          # static_kv: computed once
        else:
            k, v = heads(self.k_proj(key)), heads(self.v_proj(value))
            if saved is not None:
                k, v = torch.cat([saved["prev_key"], k], dim=2), torch.cat([saved["prev_value"], v], dim=2)
        if incremental_state is not None:
            incremental_state[self._incremental_state_id] = {"prev_key": k, "prev_value": v}
        attn_weights = q @ k.transpose(2, 3)
        if attn_mask is not None:
            attn_weights = attn_weights + attn_mask
        if key_padding_mask is not None:
            attn_weights = attn_weights.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        attn_probs = self.dropout_module(F.softmax(attn_weights, dim=-1))
        return self.out_proj((attn_probs @ v).transpose(1, 2).reshape(bsz, tgt_len, embed_dim))


class FeedForward(nn.Module):
    def __init__(self, d: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1, self.fc2, self.activation_dropout = nn.Linear(d, d_ff), nn.Linear(d_ff, d), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(F.relu(self.fc1(x))))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn, self.ffn = MultiheadAttention(d, heads, dropout), FeedForward(d, d_ff, dropout)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, x: Tensor, encoder_padding_mask: Tensor | None = None) -> Tensor:
        x = self.self_attn_layer_norm(x + self.dropout_module(self.self_attn(x, x, x, encoder_padding_mask)))
        return self.final_layer_norm(x + self.dropout_module(self.ffn(x)))


def buffered_future_mask(n: int, device: torch.device) -> Tensor:
    return torch.triu(torch.full((n, n), float("-inf"), device=device), 1)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d, heads, dropout)
        self.encoder_attn = MultiheadAttention(d, heads, dropout, encoder_decoder_attention=True)
        self.ffn = FeedForward(d, d_ff, dropout)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm, self.final_layer_norm = (nn.LayerNorm(d) for _ in range(3))
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, x: Tensor, encoder_out: Tensor, encoder_padding_mask: Tensor | None = None,
                incremental_state: IncrementalState | None = None, self_attn_mask: Tensor | None = None) -> Tensor:
        y = self.self_attn(x, x, x, incremental_state=incremental_state, attn_mask=self_attn_mask)
        x = self.self_attn_layer_norm(x + self.dropout_module(y))
        y = self.encoder_attn(x, encoder_out, encoder_out, encoder_padding_mask, incremental_state=incremental_state)
        x = self.encoder_attn_layer_norm(x + self.dropout_module(y))
        return self.final_layer_norm(x + self.dropout_module(self.ffn(x)))


class TransformerModel(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, d_ff: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d, padding_idx=PAD)
        nn.init.normal_(self.embed_tokens.weight, 0, d ** -0.5)
        nn.init.constant_(self.embed_tokens.weight[PAD], 0)
        self.embed_scale = math.sqrt(d)
        self.register_buffer("positions", get_embedding(1024 + PAD + 1, d, PAD), persistent=False)
        self.dropout_module = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(TransformerEncoderLayer(d, heads, d_ff, dropout) for _ in range(layers))
        self.decoder_layers = nn.ModuleList(TransformerDecoderLayer(d, heads, d_ff, dropout) for _ in range(layers))

    def embed(self, tokens: Tensor, positions_of: Tensor | None = None) -> Tensor:
        positions = self.positions[make_positions(tokens if positions_of is None else positions_of, PAD)]
        if positions_of is not None:
            positions = positions[:, -tokens.size(1):]
        return self.dropout_module(self.embed_scale * self.embed_tokens(tokens) + positions)

    def encoder(self, src_tokens: Tensor) -> tuple[Tensor, Tensor]:
        padding_mask, x = src_tokens.eq(PAD), self.embed(src_tokens)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask)
        return x, padding_mask

    def decoder(self, prev_output_tokens: Tensor, encoder_out: tuple[Tensor, Tensor],
                incremental_state: IncrementalState | None = None) -> Tensor:
        if incremental_state is not None:
            x, mask = self.embed(prev_output_tokens[:, -1:], positions_of=prev_output_tokens), None
        else:
            x, mask = self.embed(prev_output_tokens), buffered_future_mask(prev_output_tokens.size(1), prev_output_tokens.device)
        for layer in self.decoder_layers:
            x = layer(x, encoder_out[0], encoder_out[1], incremental_state, mask)
        return F.linear(x, self.embed_tokens.weight)

    def forward(self, src_tokens: Tensor, prev_output_tokens: Tensor) -> Tensor:
        return self.decoder(prev_output_tokens, self.encoder(src_tokens))

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> None:
        for layer in self.decoder_layers:
            for attn in (layer.self_attn, layer.encoder_attn):
                saved = incremental_state.get(attn._incremental_state_id)
                if saved is not None:
                    incremental_state[attn._incremental_state_id] = {k: v.index_select(0, new_order) for k, v in saved.items()}


# -- SequenceGenerator ------------------------------------------------------------------------

def generate(step: Callable[[Tensor], Tensor], reorder: Callable[[Tensor], None], src_len: int, *, beam_size: int,
             len_penalty: float, max_len_a: float, max_len_b: int) -> list[int]:
    """fairseq's beam search for one sentence: ``step(tokens)`` gives the next-token log-probs of
    each hypothesis (tokens start with eos), ``reorder(order)`` keeps the cache of the rows kept.
    Returns the best finished hypothesis without its eos."""
    max_len = int(max_len_a * src_len + max_len_b)
    tokens, scores = torch.full((beam_size, 1), EOS, dtype=torch.long), torch.zeros(beam_size)
    finalized: list[tuple[float, list[int]]] = []
    for t in range(max_len + 1):
        lprobs = step(tokens).float().clone()
        lprobs[:, PAD] = float("-inf")
        if t >= max_len:                                       # the limit: eos forced
            eos_lprobs = lprobs[:, EOS].clone()
            lprobs.fill_(float("-inf"))
            lprobs[:, EOS] = eos_lprobs
        cand = lprobs[:1] if t == 0 else lprobs + scores[:, None]
        vocab = cand.size(1)
        cand_scores, cand_indices = cand.reshape(-1).topk(min(2 * beam_size, cand.numel()))
        kept_beams, kept_words, kept_scores = [], [], []
        for rank, (score, index) in enumerate(zip(cand_scores.tolist(), cand_indices.tolist())):
            if score == float("-inf"):
                break
            beam, word = divmod(index, vocab)
            if word == EOS:
                if rank < beam_size and len(finalized) < beam_size:
                    finalized.append((score / (t + 1) ** len_penalty, tokens[beam, 1:].tolist()))
            elif len(kept_beams) < beam_size:
                kept_beams.append(beam), kept_words.append(word), kept_scores.append(score)
        if len(finalized) >= beam_size or not kept_beams:
            break
        order = torch.tensor(kept_beams)
        reorder(order)
        tokens = torch.cat([tokens[order], torch.tensor(kept_words)[:, None]], dim=1)
        scores = torch.tensor(kept_scores)
    return max(finalized, key=lambda f: f[0])[1] if finalized else []


# -- the adapter ------------------------------------------------------------------------------

def label_smoothed_nll_loss(lprobs: Tensor, target: Tensor, epsilon: float, ignore_index: int) -> Tensor:
    nll_loss = -lprobs.gather(dim=-1, index=target[:, None]).squeeze(-1)
    smooth_loss = -lprobs.sum(dim=-1)
    pad_mask = target.eq(ignore_index)
    nll_loss, smooth_loss = nll_loss.masked_fill(pad_mask, 0.0), smooth_loss.masked_fill(pad_mask, 0.0)
    eps_i = epsilon / (lprobs.size(-1) - 1)
    return ((1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss).sum()


def inverse_sqrt(num_updates: int, lr: float = 5e-4, warmup_updates: int = 4000, warmup_init_lr: float = 1e-7) -> float:
    if num_updates < warmup_updates:
        return warmup_init_lr + num_updates * (lr - warmup_init_lr) / warmup_updates
    return lr * warmup_updates ** 0.5 * num_updates ** -0.5


class FairseqGeneratorAdapter(Adapter):
    name = "fairseq TransformerModel with incremental_state and SequenceGenerator (hand-written)"

    def attention(self, query, key, value, mask):
        weights = (query * query.size(-1) ** -0.5) @ key.transpose(-2, -1)
        if mask is not None:
            weights = weights.masked_fill(~mask, float("-inf"))
        return F.softmax(weights, dim=-1) @ value

    def multi_head_attention(self, d_model, n_heads):
        return MultiheadAttention(d_model, n_heads, 0.0).eval()

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ffn = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ffn, ffn.fc1.weight.T, ffn.fc1.bias, ffn.fc2.weight.T, ffn.fc2.bias)

    def positional_encoding(self, length, d_model):
        return get_embedding(length + PAD + 1, d_model, PAD)[PAD + 1:]

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(TransformerEncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(TransformerDecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: TransformerModel, vocab: int, d_model: int) -> ModelParts:

        def incremental(src, tgt_in, chunks):
            state: IncrementalState = {}
            encoder_out, logits = net.encoder(src), []
            for end in range(1, tgt_in.size(1) + 1):            # fairseq feeds one position per call
                logits.append(net.decoder(tgt_in[:, :end], encoder_out, state))
            return torch.cat(logits, dim=1)

        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        scaled = lambda tokens: net.embed_scale * net.embed_tokens(tokens)
        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=EOS, eos_id=EOS, module=net,
            embed_source=scaled, embed_target=scaled, source_embedding=net.embed_tokens.weight,
            target_embedding=net.embed_tokens.weight, output_projection=net.embed_tokens.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encoder(src), net.encoder_layers),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder_layers),
            encode=lambda src: net.encoder(src)[0], incremental=incremental,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder_layers],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder_layers])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(TransformerModel(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        return self._parts(TransformerModel(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train(), vocab_size, d_model)

    # -- training (fairseq-train's transformer_wmt_en_de recipe) ------------------------------
    def optimizer(self, params):
        return torch.optim.Adam(params, lr=5e-4, betas=(0.9, 0.98), eps=1e-8)

    def learning_rate(self, step, d_model, warmup_steps):
        return inverse_sqrt(step - 1, warmup_updates=warmup_steps)   # set after update k - 1 for update k

    def loss(self, logits, target, pad_id, smoothing):
        return label_smoothed_nll_loss(F.log_softmax(logits.float(), dim=-1), target, smoothing, pad_id)

    def hyperparameters(self):
        return {"label_smoothing": (0.1, "--criterion label_smoothed_cross_entropy --label-smoothing 0.1"),
                "warmup_steps": (4000, "--warmup-updates 4000"), "dropout_base": (0.1, "transformer_wmt_en_de: dropout 0.1"),
                "beam_size": (5, "fairseq-generate --beam 5 (default)"), "length_penalty": (1.0, "--lenpen 1 (default)")}

    # -- decoding -----------------------------------------------------------------------------
    def search(self, next_log_probs, source_length, vocab_size, *, beam_size, alpha, max_len_offset):
        step = lambda tokens: torch.stack([next_log_probs(tuple(row[1:])) for row in tokens.tolist()])
        return generate(step, lambda order: None, source_length, beam_size=beam_size, len_penalty=alpha,
                        max_len_a=1, max_len_b=max_len_offset)

    def beam_search(self, parts, src, *, beam_size, alpha, max_len_offset, use_cache=True):
        net = parts.module.eval()                               # SequenceGenerator.__init__: model.eval()
        outputs = []
        with torch.no_grad():
            for row in src:
                encoder_out = net.encoder(row[None].expand(beam_size, -1))
                state: IncrementalState | None = {} if use_cache else None
                kept = {"encoder_out": encoder_out}

                def step(tokens, kept=kept, state=state):
                    return F.log_softmax(net.decoder(tokens, kept["encoder_out"], state)[:, -1], dim=-1)

                def reorder(order, kept=kept, state=state):
                    kept["encoder_out"] = tuple(t.index_select(0, order) for t in kept["encoder_out"])
                    if state is not None:
                        net.reorder_incremental_state(state, order)

                outputs.append(generate(step, reorder, int(row.ne(PAD).sum()), beam_size=beam_size, len_penalty=alpha,
                                        max_len_a=1, max_len_b=max_len_offset))
        return outputs


def _encoder_parts(layer: TransformerEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.self_attn(x, x, x), feed_forward=layer.ffn,
                             norms=(layer.self_attn_layer_norm, layer.final_layer_norm))


def _decoder_parts(layer: TransformerDecoderLayer) -> DecoderLayerParts:
    future = lambda x: buffered_future_mask(x.size(1), x.device)
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, memory, self_attn_mask=future(x)),
        self_attention=lambda x: layer.self_attn(x, x, x, attn_mask=future(x)),
        cross_attention=lambda x, memory: layer.encoder_attn(x, memory, memory),
        feed_forward=layer.ffn, norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm))


def adapter() -> Adapter:
    return FairseqGeneratorAdapter()
