"""A linear Transformer (Katharopoulos et al., 2020, "Transformers are RNNs"), written out as the
``fast-transformers`` library writes it, and an adapter written from docs/audit.md (issue 43,
seventh round).

Its choices: ``LinearAttention`` replaces softmax(q k^T / sqrt(d_k)) v by the kernel form
phi(q) (phi(K)^T V) / (phi(q) . sum_j phi(k_j)) with the feature map phi(x) = elu(x) + 1 and
eps 1e-6: no softmax, no 1/sqrt(d_k), no n x n score matrix (the cost is linear in n); key
padding enters as a ``LengthMask`` that zeroes phi(k) at the padded keys; the decoder's
self-attention is ``CausalLinearAttention`` (prefix sums of phi(k_j) v_j^T over j <= i), the
cross-attention the same non-causal kernel. Everything else is the paper's base model: post-norm
layers, ReLU FFN, interleaved sinusoids added to embeddings scaled by sqrt(d_model), one
embedding shared by both stacks and the output, no final norms, the paper's training recipe.

Departures from the paper: the attention is not Eq. 1 (Section 3.2.1), and its cost in n is not
Table 1's.
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
EPS = 1e-6


def elu_feature_map(x: Tensor) -> Tensor:
    return F.elu(x) + 1


def linear_attention(q: Tensor, k: Tensor, v: Tensor, key_keep: Tensor | None = None) -> Tensor:
    """(batch, heads, n, d) each; ``key_keep`` (batch, n_k) True at real keys."""
    q, k = elu_feature_map(q), elu_feature_map(k)
    if key_keep is not None:
        k = k * key_keep[:, None, :, None].to(k.dtype)
    kv = torch.einsum("bhnd,bhnm->bhdm", k, v)
    z = 1 / (torch.einsum("bhnd,bhd->bhn", q, k.sum(dim=2)) + EPS)
    return torch.einsum("bhnd,bhdm,bhn->bhnm", q, kv, z)


def causal_linear_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    q, k = elu_feature_map(q), elu_feature_map(k)
    kv = torch.einsum("bhnd,bhnm->bhndm", k, v).cumsum(dim=2)
    z = 1 / (torch.einsum("bhnd,bhnd->bhn", q, k.cumsum(dim=2)) + EPS)
    return torch.einsum("bhnd,bhndm,bhn->bhnm", q, kv, z)


class AttentionLayer(nn.Module):
    """fast-transformers' ``AttentionLayer``: projections around an inner attention."""

    def __init__(self, d_model: int, n_heads: int, causal: bool = False) -> None:
        super().__init__()
        self.query_projection, self.key_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.value_projection, self.out_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.n_heads, self.causal = n_heads, causal

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor, key_keep: Tensor | None = None) -> Tensor:
        b, n, d = queries.shape
        split = lambda x: x.view(b, -1, self.n_heads, d // self.n_heads).transpose(1, 2)
        q, k, v = split(self.query_projection(queries)), split(self.key_projection(keys)), split(self.value_projection(values))
        out = causal_linear_attention(q, k, v) if self.causal else linear_attention(q, k, v, key_keep)
        return self.out_projection(out.transpose(1, 2).reshape(b, n, d))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.linear1, self.linear2, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.attention, self.ff = AttentionLayer(d_model, n_heads), FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, key_keep: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, x, x, key_keep)))
        return self.norm2(x + self.dropout(self.ff(x)))


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = AttentionLayer(d_model, n_heads, causal=True)
        self.cross_attention, self.ff = AttentionLayer(d_model, n_heads), FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, memory_keep: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attention(x, x, x)))
        x = self.norm2(x + self.dropout(self.cross_attention(x, memory, memory, memory_keep)))
        return self.norm3(x + self.dropout(self.ff(x)))


def sinusoids(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


class LinearTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embedding.weight, 0, d_model ** -0.5)
        self.register_buffer("pe", sinusoids(1024, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(TransformerEncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(TransformerDecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def embed(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)

    def encode(self, src: Tensor) -> Tensor:
        keep, x = src != PAD, self.dropout(self.embed(src) + self.pe[: src.size(1)])
        for layer in self.encoder:
            x = layer(x, keep)
        return x

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, x = self.encode(src), self.dropout(self.embed(tgt) + self.pe[: tgt.size(1)])
        for layer in self.decoder:
            x = layer(x, memory, src != PAD)
        return x @ self.embedding.weight.T


# -- the adapter ------------------------------------------------------------------------------

class LinearAttentionAdapter(PaperRecipe, Adapter):
    name = "linear attention, elu(x) + 1 feature map (fast-transformers style, hand-written)"

    def attention(self, query, key, value, mask):
        # fast-transformers takes a LengthMask (key padding) or a causal ("triangular") mask, nothing else
        if mask is None:
            return linear_attention(query, key, value)
        n_q, n_k = query.size(-2), key.size(-2)
        if mask.size(-2) == n_q == n_k > 1 and torch.equal(mask.expand(-1, -1, n_q, n_k)[0, 0],
                                                           torch.ones(n_q, n_k, dtype=torch.bool).tril()):
            return causal_linear_attention(query, key, value)
        if mask.size(-2) != 1 or mask.size(1) != 1:
            raise ValueError("linear attention takes a key mask (batch, 1, 1, n_k) or the causal mask only")
        return linear_attention(query, key, value, mask[:, 0, 0, :].expand(query.size(0), -1))

    def multi_head_attention(self, d_model, n_heads):
        return AttentionLayer(d_model, n_heads).eval()

    multi_head_cross_attention = multi_head_attention

    def feed_forward(self, d_model, d_ff):
        ff = FeedForward(d_model, d_ff, 0.0).eval()
        return FeedForwardParts(ff, ff.linear1.weight.T, ff.linear1.bias, ff.linear2.weight.T, ff.linear2.bias)

    def positional_encoding(self, length, d_model):
        return sinusoids(length, d_model)

    def encoder_layer(self, d_model, n_heads, d_ff):
        return _encoder_parts(TransformerEncoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def decoder_layer(self, d_model, n_heads, d_ff):
        return _decoder_parts(TransformerDecoderLayer(d_model, n_heads, d_ff, 0.0).eval())

    def _parts(self, net: LinearTransformer, vocab: int, d_model: int) -> ModelParts:
        def decoder_run(tgt):
            src = torch.full((tgt.size(0), 3), 5, dtype=torch.long, device=tgt.device)
            return lambda: net(src, tgt)

        return ModelParts(
            forward=net, vocab_size=vocab, d_model=d_model, pad_id=PAD, bos_id=BOS, eos_id=EOS, module=net,
            embed_source=net.embed, embed_target=net.embed, source_embedding=net.embedding.weight,
            target_embedding=net.embedding.weight, output_projection=net.embedding.weight,
            encoder_input=lambda src: first_layer_input(lambda: net.encode(src), net.encoder),
            decoder_input=lambda tgt: first_layer_input(decoder_run(tgt), net.decoder),
            encode=net.encode,
            encoder_layers=[_encoder_parts(layer) for layer in net.encoder],
            decoder_layers=[_decoder_parts(layer) for layer in net.decoder])

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        return self._parts(LinearTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval(), vocab_size, d_model)

    def training_model(self, vocab_size, d_model, n_heads, d_ff, n_layers, dropout):
        net = LinearTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, dropout).train()
        return self._parts(net, vocab_size, d_model)


def _encoder_parts(layer: TransformerEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(layer=layer, self_attention=lambda x: layer.attention(x, x, x), feed_forward=layer.ff,
                             norms=(layer.norm1, layer.norm2))


def _decoder_parts(layer: TransformerDecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(layer=lambda x, memory: layer(x, memory),
                             self_attention=lambda x: layer.self_attention(x, x, x),
                             cross_attention=lambda x, memory: layer.cross_attention(x, memory, memory),
                             feed_forward=layer.ff, norms=(layer.norm1, layer.norm2, layer.norm3))


def adapter() -> Adapter:
    return LinearAttentionAdapter()
