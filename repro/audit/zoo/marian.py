"""Hugging Face transformers' ``MarianMTModel`` (the Marian/OPUS-MT port), built from a config
with random weights (``repro audit --zoo``, or ``repro audit repro.audit.zoo.marian:adapter``).

How it is configured: ``MarianConfig`` at the sizes each claim asks for (the base model's
where a claim names no size: d_model 512, 6 + 6 layers, 8 heads, d_ff 2048), one vocabulary
shared by source and target (``share_encoder_decoder_embeddings`` and ``tie_word_embeddings``,
both defaults), ``activation_function="relu"`` and ``scale_embedding=True`` as in the paper,
dropout 0 for the checks (the default 0.1 is reported as a hyperparameter), pad id 0 (the
protocol reserves 0-3 for special tokens; Marian's own checkpoints pad with vocab_size - 1),
eos 2, decoder start 0. ``attn_implementation="sdpa"``, transformers' default on the CPU.

Where the library's defaults differ from the paper: ``MarianConfig()`` is a big-sized model
(d_model 1024, 12 + 12 layers, 16 heads, d_ff 4096) with **GELU** in the feed-forward layers and
**no** sqrt(d_model) embedding scale (``scale_embedding=False``); the Trainer's defaults
(:mod:`repro.audit.zoo.hf_trainer`) use AdamW (0.9, 0.999, 1e-8), no warm-up and no label
smoothing. The positional table puts all sines before all cosines (``sec3.pe.layout``).

What the adapter had to do to expose a part:

* ``attention``: the function ``MarianAttention`` calls (``ALL_ATTENTION_FUNCTIONS["sdpa"]``)
  on a ``MarianAttention`` module, with its scaling d_k^-0.5; it returns (batch, n, heads, d_v),
  transposed back. The boolean mask is passed as is (sdpa's convention is the protocol's).
* ``multi_head_attention``: ``MarianAttention`` called as self-attention, ``attn(x)[0]``; it takes
  one tensor for keys and values (``key_value_states``), so keys apart from values are refused
  and ``multi_head_cross_attention`` is left out (the weighted-sum claim uses ``attention``).
* ``feed_forward``: Marian has no FFN module; its encoder layer applies ``fc2(act(fc1(x)))``
  inline between residual and norm, so the adapter composes the layer's own ``fc1``,
  ``activation_fn`` and ``fc2`` in that order.
* ``encoder_layer``: ``MarianEncoderLayer`` (no mask), its ``self_attn`` and the inline FFN,
  norms ``self_attn_layer_norm`` and ``final_layer_norm``.
* ``positional_encoding``: ``MarianSinusoidalPositionalEmbedding.create_weight()``, the table
  the model adds at positions 0 .. length-1.
* ``model``: ``model(input_ids, attention_mask, decoder_input_ids).logits``; the embedding the
  encoder receives is ``embed_tokens(x) * embed_scale``, as ``MarianEncoder.forward`` computes it.
* ``optimizer``, ``learning_rate``, ``loss``: the Hugging Face Trainer's
  (:mod:`repro.audit.zoo.hf_trainer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from transformers import MarianConfig, MarianMTModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianEncoderLayer,
    MarianSinusoidalPositionalEmbedding,
)

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo import hf_trainer
from repro.audit.zoo.keys_values import OneMemoryAttention

PAD_ID, EOS_ID = 0, 2


def config(vocab_size: int = 37000, d_model: int = 512, n_heads: int = 8, d_ff: int = 2048, n_layers: int = 6,
           **overrides: Any) -> MarianConfig:
    """The adapter's ``MarianConfig`` (see the module docstring); ``overrides`` go to the config."""
    fields = dict(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=n_layers, decoder_layers=n_layers,
        encoder_attention_heads=n_heads, decoder_attention_heads=n_heads, encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff, activation_function="relu", scale_embedding=True, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, pad_token_id=PAD_ID, eos_token_id=EOS_ID,
        forced_eos_token_id=EOS_ID, decoder_start_token_id=PAD_ID, max_position_embeddings=1024,
    )
    cfg = MarianConfig(**{**fields, **overrides})
    cfg._attn_implementation = "sdpa"
    return cfg


class MarianAdapter(hf_trainer.TrainedByHFTrainer, Adapter):
    """``MarianMTModel`` with random weights; ``overrides`` change the config (e.g. the library's
    own ``activation_function="gelu", scale_embedding=False``)."""

    def __init__(self, name: str = "transformers MarianMTModel", **overrides: Any) -> None:
        self.name = name
        self.overrides = overrides

    def _config(self, **sizes: Any) -> MarianConfig:
        return config(**sizes, **self.overrides)

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        module = MarianAttention(query.shape[-1] * query.shape[1], query.shape[1], config=self._config()).eval()
        module.head_dim, module.scaling = query.shape[-1], query.shape[-1] ** -0.5
        out, _ = sdpa_attention_forward(module, query, key, value, mask, dropout=0.0, scaling=module.scaling)
        return out.transpose(1, 2)

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        attn = MarianAttention(d_model, n_heads, config=self._config(d_model=d_model, n_heads=n_heads)).eval()
        return OneMemoryAttention(attn)

    def _layer(self, d_model: int, n_heads: int, d_ff: int) -> MarianEncoderLayer:
        return MarianEncoderLayer(self._config(d_model=d_model, n_heads=n_heads, d_ff=d_ff)).eval()

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        layer = self._layer(d_model, 1, d_ff)
        return FeedForwardParts(_inline_ffn(layer), layer.fc1.weight.T, layer.fc1.bias, layer.fc2.weight.T, layer.fc2.bias)

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        layer = self._layer(d_model, n_heads, d_ff)
        return EncoderLayerParts(
            layer=lambda x: layer(x, attention_mask=None),
            self_attention=OneMemoryAttention(layer.self_attn),
            feed_forward=_inline_ffn(layer),
            norms=(layer.self_attn_layer_norm, layer.final_layer_norm),
        )

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return MarianSinusoidalPositionalEmbedding(length, d_model).create_weight()

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        net = MarianMTModel(self._config(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                                         n_layers=n_layers)).eval()
        encoder = net.model.encoder

        def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
            return net(input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt_in).logits

        return ModelParts(
            forward=forward, vocab_size=vocab_size, d_model=d_model, pad_id=PAD_ID,
            bos_id=net.config.decoder_start_token_id, eos_id=net.config.eos_token_id,
            embed_source=lambda tokens: encoder.embed_tokens(tokens) * encoder.embed_scale,
            source_embedding=encoder.embed_tokens.weight, target_embedding=net.model.decoder.embed_tokens.weight,
            output_projection=net.lm_head.weight, module=net,
        )

    def hyperparameters(self) -> dict[str, Any]:
        return {
            **hf_trainer.hyperparameters(),
            "dropout_base": (MarianConfig().dropout, "MarianConfig.dropout default"),
        }


def _inline_ffn(layer: torch.nn.Module) -> Callable[[Tensor], Tensor]:
    """fc2(activation(fc1(x))), as the layer's forward applies them between residual and norm."""
    return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))


def adapter() -> Adapter:
    """Marian set up like the paper's base model where its config allows (ReLU, scaled embeddings)."""
    return MarianAdapter()


def adapter_defaults() -> Adapter:
    """Marian with the library's own choices: GELU and unscaled embeddings (``MarianConfig()``)."""
    return MarianAdapter("transformers MarianMTModel (library defaults)", activation_function="gelu", scale_embedding=False)
