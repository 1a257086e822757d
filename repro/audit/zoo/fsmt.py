"""Hugging Face transformers' ``FSMTForConditionalGeneration``, the port of fairseq's WMT19
Transformer, built from a config with random weights (``repro audit repro.audit.zoo.fsmt:adapter``).

How it is configured: ``FSMTConfig`` at the sizes each claim asks for (the base model's where a
claim names no size), one vocabulary of the same size for source and target, the embeddings
and the output projection tied (``tie_word_embeddings=True``; FSMT's default is untied, as in
the WMT19 checkpoints), dropout 0 for the checks, and otherwise FSMT's defaults: ReLU, scaled
embeddings, fairseq's special ids (bos 0, pad 1, eos 2, decoder start 2) and ``use_cache=True``.

Where the library's defaults differ from the paper: ``FSMTConfig()`` is a big-sized model
(d_model 1024, 12 + 12 layers, 16 heads, d_ff 4096) with untied embeddings and beam 5, length
penalty 1.0; the positional table is fairseq's (and tensor2tensor's): all sines before all
cosines, frequencies 10000^(-i/(d/2-1)) so that the wavelengths run from 2pi to exactly
10000 * 2pi (the paper's formula stops at 10000^((d-2)/d) * 2pi), and positions counted from
padding_idx + 1 = 2. And a bug, not a choice: **called as ``model(input_ids,
decoder_input_ids=...)`` with its default config, FSMT builds no causal mask** (the mask is
only made when ``use_cache`` is False, and it defaults to True; passing ``labels`` or
``use_cache=False`` makes it), so every decoder position sees the future. A training loop
with its own loss (label smoothing, as fairseq users write) calls it exactly so; the adapter
does too, and ``sec3.decoder.causal-mask`` reports the leak. ``adapter_no_cache`` passes
``use_cache=False`` and shows the mask is then right.

What the adapter had to do to expose a part:

* ``attention``: not exposed. FSMT's ``Attention`` computes Eq. 1 inside the module, between
  its projections, with one head size for queries, keys and values; Eq. 1 alone cannot be
  called (the claim is not applicable).
* ``multi_head_attention``: ``Attention(d_model, h)`` called as self-attention on time-first
  (n, batch, d_model) inputs, transposed from and back to the protocol's batch first. It takes
  one tensor for keys and values, so keys apart from values are refused and
  ``multi_head_cross_attention`` is left out.
* ``feed_forward`` and ``encoder_layer``: ``EncoderLayer`` (no padding mask), time-first as
  above; FSMT has no FFN module, so ``fc2(act(fc1(x)))`` is composed from the layer's own
  parts; norms ``self_attn_layer_norm`` and ``final_layer_norm``.
* ``positional_encoding``: ``SinusoidalPositionalEmbedding.get_embedding``, rows
  padding_idx + 1 .. padding_idx + length: what the model adds at positions 0 .. length-1.
* ``model``: ``model(input_ids, attention_mask, decoder_input_ids).logits``; the encoder's
  embedding is ``embed_tokens(x) * embed_scale`` as ``FSMTEncoder.forward`` computes it.
* ``optimizer``, ``learning_rate``, ``loss``: the Hugging Face Trainer's
  (:mod:`repro.audit.zoo.hf_trainer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from transformers import FSMTConfig, FSMTForConditionalGeneration
from transformers.models.fsmt.modeling_fsmt import Attention, EncoderLayer, SinusoidalPositionalEmbedding

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo import hf_trainer
from repro.audit.zoo.keys_values import memory_of

PAD_ID = FSMTConfig().pad_token_id  # fairseq's 1


def config(vocab_size: int = 37000, d_model: int = 512, n_heads: int = 8, d_ff: int = 2048, n_layers: int = 6,
           **overrides: Any) -> FSMTConfig:
    """The adapter's ``FSMTConfig`` (see the module docstring); ``overrides`` go to the config."""
    fields = dict(
        langs=["en", "de"], src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=d_model,
        encoder_layers=n_layers, decoder_layers=n_layers, encoder_attention_heads=n_heads,
        decoder_attention_heads=n_heads, encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, tie_word_embeddings=True,
    )
    return FSMTConfig(**{**fields, **overrides})


class _TimeFirst(torch.nn.Module):
    """A batch-first callable over FSMT's time-first (n, batch, d) modules of one input."""

    def __init__(self, fn: Callable[[Tensor], Tensor], module: torch.nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.inner = module

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x.transpose(0, 1)).transpose(0, 1)


class _Attention(torch.nn.Module):
    """FSMT's ``Attention`` called as the protocol calls it, (x, x, x), batch first; keys and
    values given as one other tensor are attended over, keys apart from values refused
    (:mod:`repro.audit.zoo.keys_values`)."""

    def __init__(self, attn: Attention) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None) -> Tensor:
        memory = memory_of(query, key, value, "FSMT's Attention")
        q = query.transpose(0, 1)
        kv = q if memory is None else memory.transpose(0, 1)
        return self.attn(query=q, key=kv)[0].transpose(0, 1)


class FSMTAdapter(hf_trainer.TrainedByHFTrainer, Adapter):
    """``FSMTForConditionalGeneration`` with random weights, called as a training loop with its
    own loss calls it; ``call_kwargs`` are passed to every forward call."""

    def __init__(self, name: str = "transformers FSMT (fairseq WMT19)", **call_kwargs: Any) -> None:
        self.name = name
        self.call_kwargs = call_kwargs

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        return _Attention(Attention(d_model, n_heads).eval())

    def _layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayer:
        return EncoderLayer(config(d_model=d_model, n_heads=n_heads, d_ff=d_ff)).eval()

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        layer = self._layer(d_model, 1, d_ff)
        return FeedForwardParts(_inline_ffn(layer), layer.fc1.weight.T, layer.fc1.bias, layer.fc2.weight.T, layer.fc2.bias)

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        layer = self._layer(d_model, n_heads, d_ff)
        return EncoderLayerParts(
            layer=_TimeFirst(lambda x: layer(x, None)[0], layer),
            self_attention=_TimeFirst(lambda x: layer.self_attn(query=x, key=x)[0], layer.self_attn),
            feed_forward=_inline_ffn(layer),
            norms=(layer.self_attn_layer_norm, layer.final_layer_norm),
        )

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        table = SinusoidalPositionalEmbedding.get_embedding(length + PAD_ID + 1, d_model, PAD_ID)
        return table[PAD_ID + 1 :]

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        net = FSMTForConditionalGeneration(config(vocab_size, d_model, n_heads, d_ff, n_layers)).eval()
        encoder, decoder = net.model.encoder, net.model.decoder

        def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
            return net(input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt_in,
                       **self.call_kwargs).logits

        return ModelParts(
            forward=forward, vocab_size=vocab_size, d_model=d_model, pad_id=PAD_ID,
            bos_id=net.config.decoder_start_token_id, eos_id=net.config.eos_token_id,
            embed_source=lambda tokens: encoder.embed_tokens(tokens) * encoder.embed_scale,
            source_embedding=encoder.embed_tokens.weight, target_embedding=decoder.embed_tokens.weight,
            output_projection=decoder.output_projection.weight, module=net,
        )

    def hyperparameters(self) -> dict[str, Any]:
        defaults = FSMTConfig()
        return {
            **hf_trainer.hyperparameters(),
            "dropout_base": (defaults.dropout, "FSMTConfig.dropout default"),
            "beam_size": (defaults.num_beams, "FSMTConfig.num_beams default"),
            "length_penalty": (defaults.length_penalty, "FSMTConfig.length_penalty default"),
        }


def _inline_ffn(layer: torch.nn.Module) -> Callable[[Tensor], Tensor]:
    """fc2(activation(fc1(x))), as the layer's forward applies them between residual and norm."""
    return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))


def adapter() -> Adapter:
    """FSMT called as ``model(input_ids, attention_mask, decoder_input_ids)``, its default ``use_cache``."""
    return FSMTAdapter()


def adapter_no_cache() -> Adapter:
    """FSMT called with ``use_cache=False``, the call that builds its causal mask."""
    return FSMTAdapter("transformers FSMT (use_cache=False)", use_cache=False)
