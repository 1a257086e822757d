"""lucidrains' x-transformers ``XTransformer`` (encoder-decoder), built with random weights
(``repro audit repro.audit.zoo.xtransformers:adapter``).

How it is configured: ``XTransformer(dim=d_model, enc_depth=dec_depth=N, heads=h,
attn_dim_head=d_model/h, ff_mult=d_ff/d_model)`` and, to come as close to the paper as its
options allow, ``pre_norm=False`` (post-norm), ``ff_custom_activation=nn.ReLU()``,
``scaled_sinu_pos_emb=True`` (sinusoids instead of learned positions) and ``tie_token_emb=True``
(one embedding matrix for encoder and decoder). Padding id 0 (its ``pad_value``), masks passed
as ``mask=src != 0``.

Where the library's defaults differ from the paper: pre-norm, GELU, learned absolute
positions, untied embeddings, no dropout anywhere (``attn_dropout``, ``ff_dropout`` 0), a
LayerNorm without bias; its training wrapper (``AutoregressiveWrapper``) has a plain
cross-entropy, no label smoothing, and no optimizer or schedule. What no option changes: the
decoder's output projection (``to_logits``) is its own matrix (``XTransformer`` passes no
``tie_embedding`` to its decoder), the token embeddings are not multiplied by sqrt(d_model)
(the sinusoids are scaled by a learned factor initialised to d_model^-0.5 instead, the same
ratio of embedding to position at initialisation), and the sinusoidal table puts all sines
before all cosines.

What the adapter had to do to expose a part:

* ``attention``: x-transformers' ``Attend`` module (the einsum path, ``flash=False``, its
  default) on the protocol's (batch, heads, n, d) tensors; its boolean mask has the protocol's
  convention.
* ``multi_head_attention``: ``Attention(dim, heads, dim_head=dim/heads)`` called on x alone
  (self-attention); it takes one tensor for keys and values (``context``), so keys apart from
  values are refused and ``multi_head_cross_attention`` is left out.
* ``feed_forward``: ``FeedForward`` with the ReLU; its two ``nn.Linear`` are the weights.
* ``encoder_layer``: an ``Encoder`` of depth 1 (one attention and one feed-forward block), its
  blocks and the two post-branch norms (``post_main_norm``) of its layers.
* ``positional_encoding``: ``ScaledSinusoidalEmbedding`` evaluated at positions 0 .. length-1,
  its learned scale included (amplitude d_model^-0.5, not 1).
* ``model``: the encoder's embeddings (``return_embeddings=True``), then the decoder's network
  (``XTransformer.decoder.net``) for logits: ``XTransformer.forward`` returns the loss only.
* ``loss``: ``torch_einops_utils.cross_entropy``, the function ``AutoregressiveWrapper`` uses,
  with ``reduction="sum"``; it takes no smoothing.
* ``optimizer``, ``learning_rate``: none in the library (not applicable).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch_einops_utils import cross_entropy
from x_transformers import XTransformer
from x_transformers.attend import Attend
from x_transformers.x_transformers import Attention, Encoder, FeedForward, ScaledSinusoidalEmbedding

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo.keys_values import memory_of

PAD_ID = 0


def _paper_options(d_model: int, n_heads: int, d_ff: int) -> dict[str, Any]:
    """Options of one stack (``AttentionLayers``) set as close to the paper as they go."""
    return dict(heads=n_heads, attn_dim_head=d_model // n_heads, ff_mult=d_ff / d_model, pre_norm=False,
                ff_custom_activation=nn.ReLU())


def build(vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> XTransformer:
    stack = _paper_options(d_model, n_heads, d_ff)
    return XTransformer(
        dim=d_model, tie_token_emb=True, pad_value=PAD_ID,
        enc_num_tokens=vocab_size, enc_depth=n_layers, enc_max_seq_len=1024, enc_scaled_sinu_pos_emb=True,
        dec_num_tokens=vocab_size, dec_depth=n_layers, dec_max_seq_len=1024, dec_scaled_sinu_pos_emb=True,
        **{f"enc_{k}": v for k, v in stack.items()}, **{f"dec_{k}": v for k, v in stack.items()},
    )


class XTransformerAdapter(Adapter):
    """x-transformers' ``XTransformer`` with random weights (see the module docstring)."""

    name = "x-transformers XTransformer"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return Attend()(query, key, value, mask=mask)[0]

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        return _SelfAttention(Attention(d_model, heads=n_heads, dim_head=d_model // n_heads).eval())

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        ff = FeedForward(d_model, mult=d_ff / d_model, custom_activation=nn.ReLU()).eval()
        w_in, w_out = (m for m in ff.modules() if isinstance(m, nn.Linear))
        return FeedForwardParts(ff, w_in.weight.T, w_in.bias, w_out.weight.T, w_out.bias)

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        encoder = Encoder(dim=d_model, depth=1, **_paper_options(d_model, n_heads, d_ff)).eval()
        (attn_norms, attn, _), (ff_norms, ff, _) = encoder.layers
        return EncoderLayerParts(layer=encoder, self_attention=_SelfAttention(attn), feed_forward=ff,
                                 norms=(attn_norms[2], ff_norms[2]))

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        with torch.no_grad():
            return ScaledSinusoidalEmbedding(d_model)(torch.zeros(1, length))

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        net = build(vocab_size, d_model, n_heads, d_ff, n_layers).eval()
        decoder = net.decoder.net

        def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
            mask = src != PAD_ID
            memory = net.encoder(src, mask=mask, return_embeddings=True)
            return decoder(tgt_in, context=memory, context_mask=mask)

        return ModelParts(
            forward=forward, vocab_size=vocab_size, d_model=d_model, pad_id=PAD_ID,
            embed_source=net.encoder.token_emb, source_embedding=net.encoder.token_emb.emb.weight,
            target_embedding=decoder.token_emb.emb.weight, output_projection=decoder.to_logits.weight, module=net,
        )

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        return cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")

    def hyperparameters(self) -> dict[str, Any]:
        attn = inspect.signature(Attention.__init__).parameters["dropout"].default
        ff = inspect.signature(FeedForward.__init__).parameters["dropout"].default
        return {"dropout_base": (max(attn, ff), "x-transformers: Attention and FeedForward dropout defaults")}


class _SelfAttention(nn.Module):
    """x-transformers' ``Attention`` called as the protocol calls it, (x, x, x); keys and values
    given as one other tensor are attended over (``context``), keys apart from values refused
    (:mod:`repro.audit.zoo.keys_values`)."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None) -> Tensor:
        memory = memory_of(query, key, value, "x-transformers' Attention")
        return self.attn(query) if memory is None else self.attn(query, context=memory)


def adapter() -> Adapter:
    return XTransformerAdapter()
