"""Hugging Face transformers' ``T5ForConditionalGeneration``, built from a config with random
weights (``repro audit repro.audit.zoo.t5:adapter``).

How it is configured: ``T5Config`` at the sizes each claim asks for (``d_kv`` = d_model / h, one
vocabulary, ``num_layers`` in each stack) and otherwise the library's defaults: ReLU
(``feed_forward_proj="relu"``, T5 v1.0), 32 relative-position buckets, tied embeddings and
output projection, pad 0 (also the decoder's start) and eos 1. Dropout 0 for the checks (the
default ``dropout_rate`` 0.1 is reported as a hyperparameter); ``training_model`` sets
``dropout_rate``, which T5 applies everywhere it has dropout. The attention function is the one
the model selects on the CPU, ``sdpa``, given T5's position bias as T5 gives it.

Where T5 departs from the paper (each one a claim that fails): pre-norm layers,
x + Sublayer(Norm(x)) (``sec3.sublayer.post-norm``), with RMS norms without bias and a final
norm on each stack (``sec3.stacks.composition``); no 1/sqrt(d_k) in the attention (Eq. 1: T5
folds it into the initialisation); no biases in the feed-forward layers (Eq. 2's b1 and b2 are
"absent"); unscaled embeddings, and the decoder's output scaled by d_model^-0.5 before the tied
projection instead; **no positional encoding at all**: position enters as a learned bias on the
self-attention scores that depends on j - i alone (so the sinusoid claims and
``sec3.pe.both-stacks`` read "absent"); dropout also inside the sub-layers (on the attention
weights and the feed-forward layer's hidden units); ``generate()`` decodes with dropout on when
the model is in train mode. What it shares with the paper: dropout on each sub-layer's output
before its residual sum, and on the embeddings at the bottom of each stack (Section 5.4, found
in T5's pre-norm layout), Eq. 2's ReLU, multi-head attention of h heads of d_model/h, one matrix
for both embeddings and the output projection.

What the adapter had to do to expose a part:

* ``attention``: the function ``T5Attention`` calls (``ALL_ATTENTION_FUNCTIONS["sdpa"]``) with
  T5's scaling 1.0 and a zero position bias (the bias is the model's:
  ``ModelParts.encoder_attention_bias`` / ``decoder_attention_bias``).
* ``multi_head_attention``: ``T5Attention`` without a relative bias, called as self-attention;
  keys and values given as one other tensor are attended over; no
  ``multi_head_cross_attention``.
* ``feed_forward``: ``T5DenseActDense``, ``wi`` and ``wo`` without biases (``b_1 = b_2 = None``).
* ``encoder_layer`` and ``decoder_layer``: a ``T5Block`` built as a stack's first block (the one
  that holds the relative bias); its sub-layers are the ``SelfAttention`` /
  ``EncDecAttention`` / ``DenseReluDense`` modules and its norms the blocks' ``layer_norm``s.
  In a model, every block of a stack gets the bias its first block computes, as
  ``T5Stack.forward`` passes it.
* ``model``: ``model(input_ids, attention_mask, decoder_input_ids).logits``; what each stack's
  first block receives is read with a hook on the library's own forward pass
  (:mod:`repro.audit.zoo.stack_input`).
* ``beam_search`` and ``incremental``: ``generate()`` and the model's cache
  (:mod:`repro.audit.zoo.hf_decoding`).
* ``optimizer``, ``learning_rate``, ``loss``: the Hugging Face Trainer's
  (:mod:`repro.audit.zoo.hf_trainer`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from transformers import T5Config, T5ForConditionalGeneration
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.t5.modeling_t5 import T5Attention, T5Block, T5DenseActDense

from repro.audit.adapter import Adapter, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts, absent
from repro.audit.zoo import hf_decoding, hf_trainer
from repro.audit.zoo.keys_values import OneMemoryAttention
from repro.audit.zoo.stack_input import first_layer_input

PAD_ID, EOS_ID = 0, 1
#: The attention function the model selects on the CPU (a bare config selects "eager").
ATTENTION = "sdpa"
NO_POSITIONS = ("T5 adds no positional encoding to its embeddings (no absolute positions); position enters as a "
                "learned relative bias on the self-attention scores")


def config(vocab_size: int = 37000, d_model: int = 512, n_heads: int = 8, d_ff: int = 2048, n_layers: int = 6,
           **overrides: Any) -> T5Config:
    """The adapter's ``T5Config`` (see the module docstring); ``overrides`` go to the config."""
    fields = dict(
        vocab_size=vocab_size, d_model=d_model, d_kv=d_model // n_heads, d_ff=d_ff, num_layers=n_layers,
        num_decoder_layers=n_layers, num_heads=n_heads, dropout_rate=0.0, pad_token_id=PAD_ID, eos_token_id=EOS_ID,
        decoder_start_token_id=PAD_ID,
    )
    cfg = T5Config(**{**fields, **overrides})
    cfg._attn_implementation = ATTENTION
    return cfg


def _decoder_config(cfg: T5Config) -> T5Config:
    """The decoder stack's config, as ``T5ForConditionalGeneration`` makes it."""
    cfg = copy.deepcopy(cfg)
    cfg.is_decoder, cfg.is_encoder_decoder = True, False
    return cfg


def causal(x: Tensor) -> Tensor:
    """The decoder's self-attention mask for ``x`` (batch, n, d): boolean, True = may attend."""
    return torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device).tril()[None, None]


def _bias(first: T5Block) -> Callable[[int], Tensor]:
    """The position bias (1, heads, n, n) a stack's first block computes and every block adds."""
    attn = first.layer[0].SelfAttention
    return lambda n: attn.compute_bias(n, n)


def encoder_layer_parts(block: T5Block, bias: Callable[[int], Tensor]) -> EncoderLayerParts:
    return EncoderLayerParts(
        layer=lambda x: block(x, position_bias=bias(x.size(1)))[0],
        self_attention=lambda x: block.layer[0].SelfAttention(x, position_bias=bias(x.size(1)))[0],
        feed_forward=block.layer[-1].DenseReluDense,
        norms=(block.layer[0].layer_norm, block.layer[-1].layer_norm),
    )


def decoder_layer_parts(block: T5Block, bias: Callable[[int], Tensor]) -> DecoderLayerParts:
    return DecoderLayerParts(
        layer=lambda x, memory: block(x, attention_mask=causal(x), position_bias=bias(x.size(1)),
                                      encoder_hidden_states=memory)[0],
        self_attention=lambda x: block.layer[0].SelfAttention(x, mask=causal(x), position_bias=bias(x.size(1)))[0],
        cross_attention=lambda x, memory: block.layer[1].EncDecAttention(x, key_value_states=memory)[0],
        feed_forward=block.layer[-1].DenseReluDense,
        norms=(block.layer[0].layer_norm, block.layer[1].layer_norm, block.layer[-1].layer_norm),
    )


def model_parts(net: T5ForConditionalGeneration) -> ModelParts:
    """Every part of a built T5 the claims look at, each the library's own code path."""
    encoder, decoder = net.get_encoder(), net.get_decoder()
    encoder_bias, decoder_bias = _bias(encoder.block[0]), _bias(decoder.block[0])

    def forward(src: Tensor, tgt_in: Tensor) -> Tensor:
        return net(input_ids=src, attention_mask=(src != PAD_ID).long(), decoder_input_ids=tgt_in).logits

    def encoder_input(src: Tensor) -> Tensor:
        return first_layer_input(lambda: encoder(input_ids=src, attention_mask=(src != PAD_ID).long()), encoder.block)

    def decoder_input(tgt: Tensor) -> Tensor:
        memory = torch.zeros(tgt.size(0), 1, net.config.d_model, device=tgt.device)
        return first_layer_input(lambda: decoder(input_ids=tgt, encoder_hidden_states=memory, use_cache=False),
                                 decoder.block)

    return ModelParts(
        forward=forward, vocab_size=net.config.vocab_size, d_model=net.config.d_model, pad_id=PAD_ID,
        bos_id=net.config.decoder_start_token_id, eos_id=net.config.eos_token_id,
        embed_source=encoder.embed_tokens, source_embedding=encoder.embed_tokens.weight,
        target_embedding=decoder.embed_tokens.weight, output_projection=net.lm_head.weight, module=net,
        embed_target=decoder.embed_tokens, encoder_input=encoder_input, decoder_input=decoder_input,
        encode=lambda src: encoder(input_ids=src, attention_mask=(src != PAD_ID).long()).last_hidden_state,
        encoder_layers=[encoder_layer_parts(block, encoder_bias) for block in encoder.block],
        decoder_layers=[decoder_layer_parts(block, decoder_bias) for block in decoder.block],
        incremental=lambda src, tgt_in, chunks: hf_decoding.incremental(net, src, tgt_in, chunks, PAD_ID),
        encoder_positions=absent(NO_POSITIONS), decoder_positions=absent(NO_POSITIONS),
        encoder_attention_bias=lambda n: encoder_bias(n)[0], decoder_attention_bias=lambda n: decoder_bias(n)[0],
    )


class T5Adapter(hf_trainer.TrainedByHFTrainer, Adapter):
    """``T5ForConditionalGeneration`` with random weights and the library's defaults."""

    name = "transformers T5ForConditionalGeneration"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        heads, d_k = query.shape[1], query.shape[-1]
        module = T5Attention(config(d_model=heads * d_k, n_heads=heads)).eval()
        no_bias = torch.zeros(1, heads, query.shape[-2], key.shape[-2], dtype=query.dtype, device=query.device)
        out, _ = ALL_ATTENTION_FUNCTIONS[ATTENTION](module, query, key, value, mask, dropout=0.0, scaling=module.scaling,
                                                    position_bias=no_bias)
        return out.transpose(1, 2)

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        return OneMemoryAttention(T5Attention(config(d_model=d_model, n_heads=n_heads)).eval())

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        ffn = T5DenseActDense(config(d_model=d_model, n_heads=1, d_ff=d_ff)).eval()
        return FeedForwardParts(ffn, ffn.wi.weight.T, None, ffn.wo.weight.T, None)

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        raise self.absent("positional_encoding", NO_POSITIONS + " (ModelParts.encoder_attention_bias)")

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        block = T5Block(config(d_model=d_model, n_heads=n_heads, d_ff=d_ff), has_relative_attention_bias=True).eval()
        return encoder_layer_parts(block, _bias(block))

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        cfg = _decoder_config(config(d_model=d_model, n_heads=n_heads, d_ff=d_ff))
        block = T5Block(cfg, has_relative_attention_bias=True, layer_idx=0).eval()
        return decoder_layer_parts(block, _bias(block))

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        return model_parts(T5ForConditionalGeneration(config(vocab_size, d_model, n_heads, d_ff, n_layers)).eval())

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        cfg = config(vocab_size, d_model, n_heads, d_ff, n_layers, dropout_rate=dropout)
        return model_parts(T5ForConditionalGeneration(cfg).train())

    def beam_search(self, parts: ModelParts, src: Tensor, *, beam_size: int, alpha: float,
                    max_len_offset: int) -> list[list[int]]:
        return hf_decoding.beam_search(parts.module, src, PAD_ID, beam_size=beam_size, alpha=alpha,
                                       max_len_offset=max_len_offset)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            **hf_trainer.hyperparameters(),
            **hf_decoding.generation_defaults(),
            "dropout_base": (T5Config().dropout_rate, "T5Config.dropout_rate default"),
        }


def adapter() -> Adapter:
    """T5 (v1.0 layout) with the library's defaults at the sizes each claim asks for."""
    return T5Adapter()
