"""An implementation computing on an accelerator while the checks feed it host tensors
(``repro check --device``, ``repro audit --device``).

The checks build their inputs on the CPU from seeded CPU generators, so a claim measures the same
inputs wherever the model runs. :class:`OnDevice` stands between them and an adapter:

* what the adapter *builds* (a layer, a model, an attention module) is built under torch's
  default-device context (``with torch.device(...)``), so every parameter and buffer is born on the
  device, and the weight tensors a part exposes (``ModelParts.source_embedding``,
  ``FeedForwardParts.w_1``) are the model's own, on the device: a check reads them with ``.cpu()``
  and writes into them with ``copy_``;
* every callable of what it returns (``forward``, a layer, a norm, an attention function, the loss)
  takes host tensors, computes on the device and answers on the host, gradients included. A torch
  module stays a module (:class:`DeviceModule`): its parameters are the device's, and forward hooks
  a check registers see host tensors;
* the implementation's own code runs as it would on the accelerator: a tensor it makes on the CPU
  beside a model on the device fails the claim with an error naming the adapter method.

Not moved: ``search`` (a search over a scripted distribution, no model), ``optimizer`` (the
parameters are the check's own), the settings, and the claims that watch repro's own jobs rather
than call the adapter (:mod:`repro.checks.jobs`): those run the jobs on the CPU.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_map

from repro.audit.adapter import (
    AbsentPart, Adapter, AdapterWrapper, DecoderLayerParts, EncoderLayerParts, FeedForwardParts, ModelParts,
)
from repro.audit.repro_adapter import ReproAdapter
from repro.runtime import Runtime


def _moved(tree: Any, device: torch.device) -> Any:
    return tree_map(lambda t: t.to(device) if isinstance(t, Tensor) else t, tree)


def _on_host(tree: Any) -> Any:
    return tree_map(lambda t: t.cpu() if isinstance(t, Tensor) else t, tree)


def _call_on(device: torch.device, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    return _on_host(fn(*_moved(args, device), **_moved(kwargs, device)))


class DeviceModule(nn.Module):
    """A module on the device, called with host tensors and answering on the host. Its parameters
    are the inner module's; a forward (pre-)hook registered on it is registered on the inner module
    and sees host tensors, so a check that observes a norm's input observes it when the layer runs."""

    def __init__(self, inner: nn.Module, device: torch.device) -> None:
        super().__init__()
        self.inner = inner
        self.device = device

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return _call_on(self.device, self.inner, args, kwargs)

    def register_forward_pre_hook(self, hook, **kwargs: Any):  # type: ignore[override]
        def on_host(module: nn.Module, args: tuple) -> Any:
            changed = hook(self, _on_host(args))
            return None if changed is None else _moved(changed, self.device)

        return self.inner.register_forward_pre_hook(on_host, **kwargs)

    def register_forward_hook(self, hook, **kwargs: Any):  # type: ignore[override]
        def on_host(module: nn.Module, args: tuple, output: Any) -> Any:
            changed = hook(self, _on_host(args), _on_host(output))
            return None if changed is None else _moved(changed, self.device)

        return self.inner.register_forward_hook(on_host, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["inner"], name)


def bridged(fn: Any, device: torch.device) -> Any:
    """``fn`` (a callable of the implementation's, or None) called with host tensors, run on ``device``."""
    if fn is None or isinstance(fn, AbsentPart):
        return fn
    if isinstance(fn, nn.Module):
        return DeviceModule(fn, device)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return _call_on(device, fn, args, kwargs)

    return call


class OnDevice(AdapterWrapper):
    """Delegates to ``target``, building its parts on ``runtime.device`` and bridging their calls
    (see the module docstring); the rest (settings, schedules, the optimizer, the scripted search)
    as the adapter gives it. On the CPU, use the adapter itself."""

    def __init__(self, target: Adapter, runtime: Runtime) -> None:
        super().__init__(target)
        self.device = runtime.device
        self._built: weakref.WeakKeyDictionary[nn.Module, ModelParts] = weakref.WeakKeyDictionary()

    @property
    def name(self) -> str:
        return f"{self._target.name} on {self.device}"

    def _build(self, method: str, *args: Any) -> Any:
        if torch.get_default_device().type == "meta":  # a check that only counts parameters builds on meta
            return getattr(self._target, method)(*args)
        with torch.device(self.device):
            return getattr(self._target, method)(*args)

    def _fn(self, fn: Any) -> Any:
        return bridged(fn, self.device)

    # -- functions ------------------------------------------------------------------------------
    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return _call_on(self.device, self._target.attention, (query, key, value, mask), {})

    def attention_paths(self) -> dict[str, Callable[..., Tensor]]:
        return {name: self._fn(fn) for name, fn in self._target.attention_paths().items()}

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        return _call_on(self.device, self._target.loss, (logits, target, pad_id, smoothing), {})

    def loss_paths(self) -> dict[str, Callable[..., Tensor]]:
        return {name: self._fn(fn) for name, fn in self._target.loss_paths().items()}

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return _on_host(self._build("positional_encoding", length, d_model))

    def average_last(self, states: Any, k: int) -> dict[str, Tensor]:
        return _call_on(self.device, self._target.average_last, (states, k), {})

    # -- what the implementation builds ------------------------------------------------------------
    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[..., Tensor]:
        return self._fn(self._build("multi_head_attention", d_model, n_heads))

    def multi_head_cross_attention(self, d_model: int, n_heads: int) -> Callable[..., Tensor]:
        return self._fn(self._build("multi_head_cross_attention", d_model, n_heads))

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        parts = self._build("feed_forward", d_model, d_ff)
        if not isinstance(parts, FeedForwardParts):
            return parts  # the contract names what was returned instead
        return dataclasses.replace(parts, module=self._fn(parts.module))

    def _layer(self, parts: Any) -> Any:
        if not isinstance(parts, (EncoderLayerParts, DecoderLayerParts)):
            return parts
        fields = {f.name: getattr(parts, f.name) for f in dataclasses.fields(parts)}
        return dataclasses.replace(parts, **{name: self._fn(value) for name, value in fields.items() if name != "norms"},
                                   norms=tuple(self._fn(norm) for norm in parts.norms))

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        return self._layer(self._build("encoder_layer", d_model, n_heads, d_ff))

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        return self._layer(self._build("decoder_layer", d_model, n_heads, d_ff))

    def _parts(self, parts: Any) -> Any:
        if not isinstance(parts, ModelParts):
            return parts
        callables = ("forward", "embed_source", "embed_target", "encoder_input", "decoder_input", "encode",
                     "incremental", "encoder_positions", "decoder_positions", "encoder_attention_bias",
                     "decoder_attention_bias", "module")
        on_device = dataclasses.replace(
            parts, **{name: self._fn(getattr(parts, name)) for name in callables},
            encoder_layers=None if parts.encoder_layers is None else [self._layer(p) for p in parts.encoder_layers],
            decoder_layers=None if parts.decoder_layers is None else [self._layer(p) for p in parts.decoder_layers],
        )
        if parts.module is not None:
            self._built[parts.module] = parts
        return on_device

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        return self._parts(self._build("model", vocab_size, d_model, n_heads, d_ff, n_layers))

    def model_paths(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> dict[str, ModelParts]:
        paths = self._build("model_paths", vocab_size, d_model, n_heads, d_ff, n_layers)
        return {name: self._parts(parts) for name, parts in paths.items()} if isinstance(paths, dict) else paths

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        return self._parts(self._build("training_model", vocab_size, d_model, n_heads, d_ff, n_layers, dropout))

    def beam_search(self, parts: ModelParts, src: Tensor, **kwargs: Any) -> list[list[int]]:
        """The implementation's search over the model as it built it (on the device), from a host ``src``."""
        module = parts.module.inner if isinstance(parts.module, DeviceModule) else parts.module
        own = self._built.get(module, parts) if module is not None else parts
        return _call_on(self.device, self._target.beam_search, (own, src), kwargs)


def on_device(adapter: Any, runtime: Runtime) -> Any:
    """``adapter`` computing on ``runtime``'s device: itself on the CPU, else :class:`OnDevice`."""
    return adapter if runtime.device.type == "cpu" else OnDevice(adapter, runtime)


def repro_on(runtime: Runtime) -> Any:
    """repro's own adapter on ``runtime``'s device (``repro check``'s target; picklable as
    ``functools.partial(repro_on, runtime)`` for the checks' worker processes)."""
    return on_device(ReproAdapter(), runtime)
