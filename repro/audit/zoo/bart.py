"""Hugging Face transformers' ``BartForConditionalGeneration``, built from a config with random
weights (``repro audit repro.audit.zoo.bart:adapter``).

How it is configured: ``BartConfig`` at the sizes each claim asks for (the base model's where a
claim names no size), one vocabulary, and otherwise the library's defaults, as a user who picks
BART gets them: GELU, no sqrt(d_model) embedding scale, tied embeddings and output projection,
learned positions, bos 0 / pad 1 / eos 2 (decoder start 2). Dropout 0 for the checks (the
default 0.1 is reported as a hyperparameter); ``training_model`` sets ``dropout`` (residual and
embedding dropout; attention and activation dropout stay at their default 0). The attention
function is the one the model selects on the CPU, ``sdpa``: a bare ``BartConfig`` used outside a
model selects the eager function, which adds its mask to the scores and expects it as 0/-inf
floats (the contract would refuse the protocol's boolean mask passed to it as is, naming that).

Where BART departs from the paper (each one a claim that fails): GELU in the feed-forward layers
(Eq. 2); unscaled embeddings (Section 3.4); learned positional tables, one per stack, instead of
the sinusoids (Section 3.5: the sinusoid claims read "absent"); a LayerNorm on the sum of the
embeddings and the positions (``layernorm_embedding``), so that what each stack receives is not
that sum (``sec3.pe.both-stacks``); and ``generate()`` decodes with dropout on when the model is
in train mode (``sec6.decoding.dropout-off``, whose outputs on a random model end at once: that
claim is inconclusive, see docs/audit.md). What it shares with the paper: post-norm layers,
Eq. 1 with 1/sqrt(d_k), residual dropout before each residual sum, dropout at the bottom of each
stack, one matrix for both embeddings and the output projection.

What the adapter had to do to expose a part:

* ``attention``: the function ``BartAttention`` calls (``ALL_ATTENTION_FUNCTIONS["sdpa"]``) on a
  ``BartAttention`` module with its scaling d_k^-0.5, transposed back from (batch, n, heads, d).
* ``multi_head_attention``: ``BartAttention`` called as self-attention; keys and values given as
  one other tensor are attended over (``key_value_states``); no ``multi_head_cross_attention``
  (one tensor for keys and values).
* ``feed_forward``, ``encoder_layer``, ``decoder_layer``: ``BartEncoderLayer`` /
  ``BartDecoderLayer``; BART has no FFN module, so ``fc2(act(fc1(x)))`` is composed from the
  layer's own parts; the decoder's self-attention gets a boolean causal mask.
* ``model``: ``model(input_ids, attention_mask, decoder_input_ids).logits``; what each stack's
  first layer receives is read with a hook on the library's own forward pass
  (:mod:`repro.audit.zoo.stack_input`); each stack's positional table is the model's own
  (``embed_positions`` from row 2, BART's offset), in ``ModelParts.encoder_positions`` /
  ``decoder_positions``.
* ``beam_search`` and ``incremental``: ``generate()`` and the model's cache
  (:mod:`repro.audit.zoo.hf_decoding`).
* ``optimizer``, ``learning_rate``, ``loss``: the Hugging Face Trainer's
  (:mod:`repro.audit.zoo.hf_trainer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from transformers import BartConfig, BartForConditionalGeneration
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bart.modeling_bart import BartAttention, BartDecoderLayer, BartEncoderLayer

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.audit.zoo import hf_decoding, hf_trainer
from repro.audit.zoo.keys_values import OneMemoryAttention
from repro.audit.zoo.stack_input import first_layer_input

PAD_ID = BartConfig().pad_token_id  # 1
#: The attention function the model selects on the CPU (a bare config selects "eager").
ATTENTION = "sdpa"
#: ``BartLearnedPositionalEmbedding`` reads row position + 2.
POSITION_OFFSET = 2


def config(vocab_size: int = 37000, d_model: int = 512, n_heads: int = 8, d_ff: int = 2048, n_layers: int = 6,
           **overrides: Any) -> BartConfig:
    """The adapter's ``BartConfig`` (see the module docstring); ``overrides`` go to the config."""
    fields = dict(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=n_layers, decoder_layers=n_layers,
        encoder_attention_heads=n_heads, decoder_attention_heads=n_heads, encoder_ffn_dim=d_ff, decoder_ffn_dim=d_ff,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    )
    cfg = BartConfig(**{**fields, **overrides})
    cfg._attn_implementation = ATTENTION
    return cfg


def causal(x: Tensor) -> Tensor:
    """The decoder's self-attention mask for ``x`` (batch, n, d): boolean, True = may attend."""
    return torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()[None, None]


def _inline_ffn(layer: torch.nn.Module) -> Callable[[Tensor], Tensor]:
    """fc2(activation(fc1(x))), as the layer's forward applies them between residual and norm."""
    return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))


def encoder_layer_parts(layer: BartEncoderLayer) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=lambda x: layer(x, attention_mask=None),
        self_attention=OneMemoryAttention(layer.self_attn),
        feed_forward=_inline_ffn(layer),
        norms=(layer.self_attn_layer_norm, layer.final_layer_norm),
    )


def decoder_layer_parts(layer: BartDecoderLayer) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: layer(x, attention_mask=causal(x), encoder_hidden_states=memory, use_cache=False),
        self_attention=lambda x: layer.self_attn(x, attention_mask=causal(x))[0],
        cross_attention=lambda x, memory: layer.encoder_attn(x, key_value_states=memory)[0],
        feed_forward=_inline_ffn(layer),
        norms=(layer.self_attn_layer_norm, layer.encoder_attn_layer_norm, layer.final_layer_norm),
    )


def model_parts(net: BartForConditionalGeneration) -> ModelParts:
    """Every part of a built BART the claims look at, each the library's own code path."""
    encoder, decoder = net.model.encoder, net.model.decoder

    def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
        return net(input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt_in).logits

    def encoder_input(src: Tensor) -> Tensor:
        return first_layer_input(lambda: encoder(input_ids=src, attention_mask=(src != PAD_ID).long()), encoder.layers)

    def decoder_input(tgt: Tensor) -> Tensor:
        memory = torch.zeros(tgt.size(0), 1, net.config.d_model, device=tgt.device)
        return first_layer_input(lambda: decoder(input_ids=tgt, encoder_hidden_states=memory, use_cache=False),
                                 decoder.layers)

    def positions(stack: torch.nn.Module) -> Callable[[int], Tensor]:
        return lambda length: stack.embed_positions.weight[POSITION_OFFSET:POSITION_OFFSET + length]

    return ModelParts(
        forward=forward, vocab_size=net.config.vocab_size, d_model=net.config.d_model, pad_id=PAD_ID,
        bos_id=net.config.decoder_start_token_id, eos_id=net.config.eos_token_id,
        embed_source=encoder.embed_tokens, source_embedding=encoder.embed_tokens.weight,
        target_embedding=decoder.embed_tokens.weight, output_projection=net.lm_head.weight, module=net,
        embed_target=decoder.embed_tokens, encoder_input=encoder_input, decoder_input=decoder_input,
        encode=lambda src: encoder(input_ids=src, attention_mask=(src != PAD_ID).long()).last_hidden_state,
        encoder_layers=[encoder_layer_parts(layer) for layer in encoder.layers],
        decoder_layers=[decoder_layer_parts(layer) for layer in decoder.layers],
        incremental=lambda src, tgt_in, chunks: hf_decoding.incremental(net, src, tgt_in, chunks, PAD_ID),
        encoder_positions=positions(encoder), decoder_positions=positions(decoder),
    )


class BartAdapter(hf_trainer.TrainedByHFTrainer, Adapter):
    """``BartForConditionalGeneration`` with random weights and the library's defaults."""

    name = "transformers BartForConditionalGeneration"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        heads, d_k = query.shape[1], query.shape[-1]
        module = BartAttention(heads * d_k, heads, config=config(d_model=heads * d_k, n_heads=heads)).eval()
        out, _ = ALL_ATTENTION_FUNCTIONS[ATTENTION](module, query, key, value, mask, dropout=0.0, scaling=module.scaling)
        return out.transpose(1, 2)

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        attn = BartAttention(d_model, n_heads, config=config(d_model=d_model, n_heads=n_heads)).eval()
        return OneMemoryAttention(attn)

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        layer = BartEncoderLayer(config(d_model=d_model, n_heads=1, d_ff=d_ff)).eval()
        return FeedForwardParts(_inline_ffn(layer), layer.fc1.weight.T, layer.fc1.bias, layer.fc2.weight.T, layer.fc2.bias)

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        raise self.absent("positional_encoding", "BART learns its positions, one table per stack "
                          "(BartLearnedPositionalEmbedding, ModelParts.encoder_positions/decoder_positions): no sinusoids")

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        return encoder_layer_parts(BartEncoderLayer(config(d_model=d_model, n_heads=n_heads, d_ff=d_ff), layer_idx=0).eval())

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        return decoder_layer_parts(BartDecoderLayer(config(d_model=d_model, n_heads=n_heads, d_ff=d_ff), layer_idx=0).eval())

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        return model_parts(BartForConditionalGeneration(config(vocab_size, d_model, n_heads, d_ff, n_layers)).eval())

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        cfg = config(vocab_size, d_model, n_heads, d_ff, n_layers, dropout=dropout)
        return model_parts(BartForConditionalGeneration(cfg).train())

    def beam_search(self, parts: ModelParts, src: Tensor, *, beam_size: int, alpha: float,
                    max_len_offset: int) -> list[list[int]]:
        return hf_decoding.beam_search(parts.module, src, PAD_ID, beam_size=beam_size, alpha=alpha,
                                       max_len_offset=max_len_offset)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            **hf_trainer.hyperparameters(),
            **hf_decoding.generation_defaults(),
            "dropout_base": (BartConfig().dropout, "BartConfig.dropout default"),
        }


def adapter() -> Adapter:
    """BART with the library's defaults at the sizes each claim asks for."""
    return BartAdapter()
