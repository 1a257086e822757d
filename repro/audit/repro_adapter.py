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
        from repro.train.optimizer import build_optimizer

        return build_optimizer(torch.nn.ParameterList(params))

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        from repro.train.schedule import learning_rate

        return learning_rate(step, d_model=d_model, warmup_steps=warmup_steps)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        from repro.train.loss import label_smoothed_nll

        return label_smoothed_nll(logits, target, epsilon=smoothing, pad_id=pad_id)[0]

    def hyperparameters(self) -> dict[str, Any]:
        """The settings the code actually runs with, each with where it is read from."""
        import inspect

        from repro.decode.beam import beam_search
        from repro.model import get_preset
        from repro.parsing.experiments import DecodeSettings
        from repro.train.config import TrainConfig, get_profile

        base, big = TrainConfig(), get_profile("paper-big")
        beam = {k: v.default for k, v in inspect.signature(beam_search).parameters.items()}
        parser = DecodeSettings()
        return {
            "label_smoothing": (base.label_smoothing, "TrainConfig.label_smoothing"),
            "warmup_steps": (base.warmup_steps, "TrainConfig.warmup_steps"),
            "tokens_per_batch": (base.tokens_per_batch, "TrainConfig.tokens_per_batch"),
            "train_steps_base": (base.max_steps, "TrainConfig.max_steps"),
            "train_steps_big": (big.max_steps, "profile paper-big"),
            "average_last_base": (base.average_last, "TrainConfig.average_last"),
            "average_last_big": (big.average_last, "profile paper-big"),
            "checkpoint_every_minutes": (base.checkpoint_every_minutes, "TrainConfig.checkpoint_every_minutes"),
            "dropout_base": (get_preset("base").model.dropout, "preset base"),
            "dropout_big_ende": (get_preset("big").model.dropout, "preset big"),
            "dropout_big_enfr": (get_preset("big-enfr").model.dropout, "preset big-enfr"),
            "beam_size": (beam["beam_size"], "repro.decode.beam.beam_search"),
            "length_penalty": (beam["alpha"], "repro.decode.beam.beam_search"),
            "max_len_offset": (beam["max_len_offset"], "repro.decode.beam.beam_search"),
            "parser_beam_size": (parser.beam_size, "repro.parsing.experiments.DecodeSettings"),
            "parser_length_penalty": (parser.alpha, "repro.parsing.experiments.DecodeSettings"),
            "parser_max_len_offset": (parser.max_len_offset, "repro.parsing.experiments.DecodeSettings"),
        }


def adapter() -> Adapter:
    """Factory for ``repro audit repro.audit.repro_adapter:adapter``."""
    return ReproAdapter()
