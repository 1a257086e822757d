"""The adapter for repro's own implementation (``repro.audit.repro_adapter:adapter``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts
from repro.model import Transformer, TransformerConfig
from repro.model.attention import MultiHeadAttention, scaled_dot_product_attention
from repro.model.feedforward import PositionwiseFeedForward
from repro.model.layers import EncoderLayer
from repro.model.positional import sinusoidal_encoding
from repro.recipes import get_recipe
from repro.train.loss import label_smoothed_nll
from repro.train.optimizer import build_optimizer
from repro.train.schedule import learning_rate


class ReproAdapter(Adapter):
    """repro's Transformer; ``config_overrides`` builds a variant (e.g. ``norm_first=True``)."""

    has_repro_presets = True

    def __init__(self, **config_overrides: Any) -> None:
        self.overrides = config_overrides
        self.name = "repro" + (f" ({', '.join(f'{k}={v}' for k, v in config_overrides.items())})" if config_overrides else "")

    def _config(self, **fields: Any) -> TransformerConfig:
        return TransformerConfig(dropout=0.0, **{**fields, **self.overrides})

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return scaled_dot_product_attention(query, key, value, mask)[0]

    def multi_head_attention(self, d_model: int, n_heads: int):
        cfg = self._config(d_model=d_model, n_heads=n_heads)
        return MultiHeadAttention(d_model, n_heads, cfg.d_k, cfg.d_v, cfg.attention).eval()

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        ffn = PositionwiseFeedForward(d_model, d_ff).eval()
        return FeedForwardParts(ffn, ffn.w_1.weight.T, ffn.w_1.bias, ffn.w_2.weight.T, ffn.w_2.bias)

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return sinusoidal_encoding(length, d_model)

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        layer = EncoderLayer(self._config(d_model=d_model, n_heads=n_heads, d_ff=d_ff)).eval()
        return EncoderLayerParts(
            layer=lambda x: layer(x, None),
            self_attention=lambda x: layer.self_attn(x, x, x),
            feed_forward=layer.feed_forward,
            norms=(layer.sublayers[0].norm, layer.sublayers[1].norm),
        )

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        cfg = self._config(
            src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
            d_ff=d_ff, n_layers=n_layers,
        )
        model = Transformer(cfg).eval()
        return ModelParts(
            forward=model,
            vocab_size=vocab_size,
            d_model=d_model,
            pad_id=cfg.pad_id,
            embed_source=model.src_embed,
            source_embedding=model.src_embed.weight,
            target_embedding=model.tgt_embed.weight,
            output_projection=model.output_projection.weight,
            module=model,
        )

    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return build_optimizer(torch.nn.ParameterList(params))

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        return learning_rate(step, d_model=d_model, warmup_steps=warmup_steps)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        return label_smoothed_nll(logits, target, epsilon=smoothing, pad_id=pad_id)[0]

    def hyperparameters(self) -> dict[str, Any]:
        """The settings of the paper's recipes (:mod:`repro.recipes`), each with the recipe it is read from."""
        base, big, big_enfr, parser = (get_recipe(n) for n in ("base", "big", "big-enfr", "parser-wsj"))
        return {
            "label_smoothing": (base.train.label_smoothing, "recipe base"),
            "warmup_steps": (base.train.warmup_steps, "recipe base"),
            "tokens_per_batch": (base.train.tokens_per_batch, "recipe base"),
            "train_steps_base": (base.train.max_steps, "recipe base"),
            "train_steps_big": (big.train.max_steps, "recipe big"),
            "average_last_base": (base.train.average_last, "recipe base"),
            "average_last_big": (big.train.average_last, "recipe big"),
            "checkpoint_every_minutes": (base.train.checkpoint_every_minutes, "recipe base"),
            "dropout_base": (base.model.dropout, "recipe base"),
            "dropout_big_ende": (big.model.dropout, "recipe big"),
            "dropout_big_enfr": (big_enfr.model.dropout, "recipe big-enfr"),
            "beam_size": (base.decode.beam_size, "recipe base"),
            "length_penalty": (base.decode.alpha, "recipe base"),
            "max_len_offset": (base.decode.max_len_offset, "recipe base"),
            "parser_beam_size": (parser.decode.beam_size, "recipe parser-wsj"),
            "parser_length_penalty": (parser.decode.alpha, "recipe parser-wsj"),
            "parser_max_len_offset": (parser.decode.max_len_offset, "recipe parser-wsj"),
        }


def adapter() -> Adapter:
    """Factory for ``repro audit repro.audit.repro_adapter:adapter``."""
    return ReproAdapter()
