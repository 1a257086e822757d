"""The adapter protocol's shapes, enforced: what each method of :class:`~repro.audit.adapter.Adapter`
must return, checked as it returns it.

A checker that receives a wrongly shaped tensor may fail with a broadcasting error deep in its
own arithmetic, or (worse) broadcast silently. Wrapping the adapter in :class:`CheckedAdapter`
turns such a return value into an :class:`AdapterContractError` raised *inside* the adapter
method's call, so the claim is reported as an error naming that method and what it returned.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from repro.audit.adapter import Adapter, EncoderLayerParts, FeedForwardParts, ModelParts


class AdapterContractError(Exception):
    """An adapter method returned something the protocol does not allow."""


def _shape(what: str, value: Any, expected: tuple[int, ...]) -> Any:
    if not isinstance(value, Tensor):
        raise AdapterContractError(f"{what} returned {type(value).__name__}, expected a tensor of shape {expected}")
    if tuple(value.shape) != tuple(expected):
        raise AdapterContractError(f"{what} returned shape {tuple(value.shape)}, expected {tuple(expected)}")
    return value


def _same_shape(what: str, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Wrap a sub-layer-like callable: its output must have its first input's shape."""

    def call(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return _shape(what, fn(x, *args, **kwargs), tuple(x.shape))

    return call


def _instance(what: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise AdapterContractError(f"{what} returned {type(value).__name__}, expected {kind.__name__}")
    return value


class CheckedAdapter:
    """Delegates to an adapter and checks every return value against the protocol."""

    def __init__(self, target: Adapter) -> None:
        self._target = target

    @property
    def name(self) -> str:
        return self._target.name

    @property
    def has_repro_presets(self) -> bool:
        return bool(getattr(self._target, "has_repro_presets", False))

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        out = self._target.attention(query, key, value, mask)
        return _shape("attention", out, (*query.shape[:-1], value.shape[-1]))

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        module = self._target.multi_head_attention(d_model, n_heads)
        if not callable(module):
            raise AdapterContractError(f"multi_head_attention returned {type(module).__name__}, expected a callable")
        return _same_shape("the module from multi_head_attention", module)

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        parts = _instance("feed_forward", self._target.feed_forward(d_model, d_ff), FeedForwardParts)
        for field, shape in (("w_1", (d_model, d_ff)), ("b_1", (d_ff,)), ("w_2", (d_ff, d_model)), ("b_2", (d_model,))):
            _shape(f"feed_forward's FeedForwardParts.{field}", getattr(parts, field), shape)
        return dataclasses.replace(parts, module=_same_shape("FeedForwardParts.module", parts.module))

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return _shape("positional_encoding", self._target.positional_encoding(length, d_model), (length, d_model))

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        parts = _instance("encoder_layer", self._target.encoder_layer(d_model, n_heads, d_ff), EncoderLayerParts)
        if len(parts.norms) != 2:
            raise AdapterContractError(f"encoder_layer returned {len(parts.norms)} norms, expected 2")
        return EncoderLayerParts(
            layer=_same_shape("EncoderLayerParts.layer", parts.layer),
            self_attention=_same_shape("EncoderLayerParts.self_attention", parts.self_attention),
            feed_forward=_same_shape("EncoderLayerParts.feed_forward", parts.feed_forward),
            norms=(
                _same_shape("EncoderLayerParts.norms[0]", parts.norms[0]),
                _same_shape("EncoderLayerParts.norms[1]", parts.norms[1]),
            ),
        )

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        parts = _instance("model", self._target.model(vocab_size, d_model, n_heads, d_ff, n_layers), ModelParts)
        for field in ("source_embedding", "target_embedding", "output_projection"):
            if getattr(parts, field) is not None:
                _shape(f"model's ModelParts.{field}", getattr(parts, field), (vocab_size, d_model))
        forward = parts.forward

        def checked_forward(src: Tensor, tgt_in: Tensor) -> Tensor:
            return _shape("ModelParts.forward", forward(src, tgt_in), (*tgt_in.shape, vocab_size))

        embed = parts.embed_source
        checked_embed = None
        if embed is not None:

            def checked_embed(tokens: Tensor) -> Tensor:
                return _shape("ModelParts.embed_source", embed(tokens), (*tokens.shape, d_model))

        return dataclasses.replace(parts, forward=checked_forward, embed_source=checked_embed)

    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return _instance("optimizer", self._target.optimizer(params), torch.optim.Optimizer)

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        rate = self._target.learning_rate(step, d_model, warmup_steps)
        if isinstance(rate, Tensor) and rate.numel() == 1:
            rate = rate.item()
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
            raise AdapterContractError(f"learning_rate returned {type(rate).__name__}, expected a number")
        return float(rate)

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        value = _instance("loss", self._target.loss(logits, target, pad_id, smoothing), Tensor)
        if value.numel() != 1:
            raise AdapterContractError(f"loss returned shape {tuple(value.shape)}, expected a scalar (the summed loss)")
        return value

    def hyperparameters(self) -> dict[str, Any]:
        return _instance("hyperparameters", self._target.hyperparameters(), dict)

    def __getattr__(self, name: str) -> Any:
        """Methods whose return values are not checked here (later additions to the protocol) go
        straight to the adapter."""
        return getattr(self._target, name)
