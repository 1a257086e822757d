"""The adapter protocol's shapes, enforced: what each method of :class:`~repro.audit.adapter.Adapter`
must return, checked as it returns it.

A checker that receives a wrongly shaped tensor may fail with a broadcasting error deep in its
own arithmetic, or (worse) broadcast silently. Wrapping the adapter in :class:`CheckedAdapter`
turns such a return value into an :class:`AdapterContractError` raised *inside* the adapter
method's call, so the claim is reported as an error naming that method and what it returned.

Some contract failures are not about shapes but show in what a value computes. An attention
function given the protocol's boolean mask (True = may attend) that *adds* it to the scores
(Hugging Face's eager attention, reached from a bare ``BartConfig``, does: it expects a float
mask of 0 and -inf) or reads True as "masked" (``nn.MultiheadAttention``'s ``key_padding_mask``
convention) would fail Eq. 1 with a large error and no reason; :func:`_check_masking` recognises
both and says what to change.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from repro.audit.adapter import (RESERVED_IDS, Adapter, AdapterWrapper, DecoderLayerParts, EncoderLayerParts,
                                FeedForwardParts, ModelParts)
from repro.checks.attention import reference_attention


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


class _CheckedModule(torch.nn.Module):
    """A sub-layer-like module, its output checked like :func:`_same_shape`'s, that stays a module
    holding the original: a check may still reach its parameters (the post-norm check perturbs
    the norms' weights)."""

    def __init__(self, what: str, module: torch.nn.Module) -> None:
        super().__init__()
        self.what = what
        self.inner = module

    def forward(self, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return _shape(self.what, self.inner(x, *args, **kwargs), tuple(x.shape))


def _same_shape_keeping_module(what: str, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    return _CheckedModule(what, fn) if isinstance(fn, torch.nn.Module) else _same_shape(what, fn)


def _instance(what: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise AdapterContractError(f"{what} returned {type(value).__name__}, expected {kind.__name__}")
    return value


def _batch_first(what: str, call: Callable[..., Tensor], d_model: int, memory: bool = False) -> None:
    """Refuse a module that mixes the sentences of a batch, as a sequence-first module
    (``nn.MultiheadAttention(batch_first=False)``, fairseq's (time, batch, channel) layers) given
    the protocol's batch-first tensors does: it reads the batch as the sequence. Probed on a batch
    of two in which only sentence 1 changes; sentence 0's output must not move. A probe that
    raises, or a module that does not repeat itself, is left to the checks."""
    gen = torch.Generator().manual_seed(0)
    x, mem = torch.randn(2, 5, d_model, generator=gen), torch.randn(2, 5, d_model, generator=gen)
    x2, mem2 = x.clone(), mem.clone()
    x2[1], mem2[1] = torch.randn(5, d_model, generator=gen), torch.randn(5, d_model, generator=gen)
    run = (lambda q, m: call(q, m, m)) if memory else (lambda q, m: call(q))
    try:
        with torch.no_grad():
            a, again, b = run(x, mem), run(x, mem), run(x2, mem2)
    except Exception:  # noqa: BLE001 - the checks' own calls report what the module does with their inputs
        return
    if not all(isinstance(t, Tensor) and t.shape[:2] == x.shape[:2] for t in (a, again, b)):
        return
    a, again, b = (t.detach().float().cpu() for t in (a, again, b))
    scale = max(a[0].abs().max().item(), 1.0)
    if (a[0] - again[0]).abs().max().item() > 1e-6 * scale:
        return
    moved = (a[0] - b[0]).abs().max().item()
    if moved > 1e-5 * scale:
        raise AdapterContractError(
            f"{what}: its output for sentence 0 of a batch moved by {moved:.3g} when only sentence 1 changed, so it "
            "reads the first dimension as the sequence (a sequence-first module: nn.MultiheadAttention(batch_first="
            "False), torch.nn.Transformer's layers by default, fairseq's (time, batch, channel) layers); the protocol "
            "is batch first, (batch, n, d_model): transpose the inputs and the output in the adapter")


def _norms_batch_first(what: str, norms: tuple, d_model: int) -> None:
    """Refuse a norm that cannot take the checks' batch-first (batch, n, d_model) tensors, as a
    channels-first model's LayerNorm over (batch, d_model, n) cannot: the checks call each norm
    on the layer's rows (the post-norm composition, the LayerNorm fit)."""
    x = torch.randn(2, 5, d_model, generator=torch.Generator().manual_seed(0))
    for i, norm in enumerate(norms):
        try:
            with torch.no_grad():
                out = norm(x)
        except Exception as error:  # noqa: BLE001 - the norm's own message is kept in ours
            raise AdapterContractError(
                f"{what}.norms[{i}] raised {type(error).__name__} on a batch-first (batch, n, d_model) = "
                f"{tuple(x.shape)} tensor ({str(error).splitlines()[0][:160]}): the checks call each norm on the layer's rows, batch "
                "first; give a norm the layer applies in another layout (channels first, (batch, d_model, n)) as a "
                "module that transposes around it, its parameters the norm's own (docs/audit.md)") from error
        _shape(f"{what}.norms[{i}]", out, tuple(x.shape))


class CheckedAdapter(AdapterWrapper):
    """Delegates to an adapter and checks every return value against the protocol; methods whose
    return values are not checked here (later additions to the protocol) go straight to the adapter."""

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        return _checked_attention("attention", self._target.attention)(query, key, value, mask)

    def attention_paths(self) -> dict[str, Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]]:
        paths = _instance("attention_paths", self._target.attention_paths(), dict)
        return {name: _checked_attention(f"attention_paths()[{name!r}]", fn) for name, fn in paths.items()}

    def multi_head_cross_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        module = self._target.multi_head_cross_attention(d_model, n_heads)
        if not callable(module):
            raise AdapterContractError(
                f"multi_head_cross_attention returned {type(module).__name__}, expected a callable")
        _batch_first("the module from multi_head_cross_attention", module, d_model, memory=True)
        return _same_shape("the module from multi_head_cross_attention", module)

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        module = self._target.multi_head_attention(d_model, n_heads)
        if not callable(module):
            raise AdapterContractError(f"multi_head_attention returned {type(module).__name__}, expected a callable")
        _batch_first("the module from multi_head_attention", lambda x: module(x, x, x), d_model)
        return _same_shape("the module from multi_head_attention", module)

    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        parts = _instance("feed_forward", self._target.feed_forward(d_model, d_ff), FeedForwardParts)
        for field, shape in (("w_1", (d_model, d_ff)), ("b_1", (d_ff,)), ("w_2", (d_ff, d_model)), ("b_2", (d_model,))):
            if field.startswith("b_") and getattr(parts, field) is None:
                continue  # a bias the implementation does not have: absent, reported by Eq. 2's check
            _shape(f"feed_forward's FeedForwardParts.{field}", getattr(parts, field), shape)
        return dataclasses.replace(parts, module=_same_shape("FeedForwardParts.module", parts.module))

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return _shape("positional_encoding", self._target.positional_encoding(length, d_model), (length, d_model))

    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        parts = _instance("encoder_layer", self._target.encoder_layer(d_model, n_heads, d_ff), EncoderLayerParts)
        if len(parts.norms) not in (0, 2):
            raise AdapterContractError(f"encoder_layer returned {len(parts.norms)} norms, expected 2 (or none: a "
                                       "layer without normalisation)")
        _batch_first("EncoderLayerParts.layer", parts.layer, d_model)
        _norms_batch_first("EncoderLayerParts", parts.norms, d_model)
        return EncoderLayerParts(
            layer=_same_shape("EncoderLayerParts.layer", parts.layer),
            self_attention=_same_shape("EncoderLayerParts.self_attention", parts.self_attention),
            feed_forward=_same_shape("EncoderLayerParts.feed_forward", parts.feed_forward),
            norms=tuple(_same_shape_keeping_module(f"EncoderLayerParts.norms[{i}]", norm)
                        for i, norm in enumerate(parts.norms)),
        )

    def decoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> DecoderLayerParts:
        parts = _instance("decoder_layer", self._target.decoder_layer(d_model, n_heads, d_ff), DecoderLayerParts)
        if len(parts.norms) not in (0, 3):
            raise AdapterContractError(f"decoder_layer returned {len(parts.norms)} norms, expected 3 (or none: a "
                                       "layer without normalisation)")
        # the same probe as the encoder layer's: a sequence-first decoder layer given batch-first tensors
        # mixes the sentences of a batch (its causal mask then runs across the batch, not the positions)
        _batch_first("DecoderLayerParts.layer", lambda x, memory, _: parts.layer(x, memory), d_model, memory=True)
        _batch_first("DecoderLayerParts.self_attention", parts.self_attention, d_model)
        _batch_first("DecoderLayerParts.cross_attention", lambda x, memory, _: parts.cross_attention(x, memory),
                     d_model, memory=True)
        _norms_batch_first("DecoderLayerParts", parts.norms, d_model)
        return parts

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        return _checked_parts("model", self._target.model(vocab_size, d_model, n_heads, d_ff, n_layers),
                              vocab_size, d_model)

    def model_paths(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> dict[str, ModelParts]:
        paths = _instance("model_paths", self._target.model_paths(vocab_size, d_model, n_heads, d_ff, n_layers), dict)
        return {name: _checked_parts(f"model_paths()[{name!r}]", parts, vocab_size, d_model) for name, parts in paths.items()}

    def training_model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int,
                       dropout: float) -> ModelParts:
        return _checked_parts("training_model", self._target.training_model(vocab_size, d_model, n_heads, d_ff,
                                                                            n_layers, dropout), vocab_size, d_model)

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
        return _checked_loss("loss", self._target.loss)(logits, target, pad_id, smoothing)

    def loss_paths(self) -> dict[str, Callable[[Tensor, Tensor, int, float], Tensor]]:
        paths = _instance("loss_paths", self._target.loss_paths(), dict)
        return {name: _checked_loss(f"loss_paths()[{name!r}]", fn) for name, fn in paths.items()}

    def hyperparameters(self) -> dict[str, Any]:
        settings = _instance("hyperparameters", self._target.hyperparameters(), dict)
        for key, entry in settings.items():
            _check_setting(key, entry)
        return settings


def _checked_parts(what: str, parts: Any, vocab_size: int, d_model: int) -> ModelParts:
    """A :class:`ModelParts` whose padding id, matrices and outputs have the protocol's shapes."""
    parts = _instance(what, parts, ModelParts)
    if not 0 <= parts.pad_id < RESERVED_IDS:
        raise AdapterContractError(
            f"{what} returned ModelParts.pad_id={parts.pad_id}; the checks feed token ids from {RESERVED_IDS} up and "
            f"leave 0-{RESERVED_IDS - 1} to special tokens: put the padding id among them"
        )
    for field in ("source_embedding", "target_embedding", "output_projection"):
        if getattr(parts, field) is not None:
            _shape(f"{what}'s ModelParts.{field}", getattr(parts, field), (vocab_size, d_model))
    forward = parts.forward

    def checked_forward(src: Tensor, tgt_in: Tensor) -> Tensor:
        return _shape("ModelParts.forward", forward(src, tgt_in), (*tgt_in.shape, vocab_size))

    embed = parts.embed_source
    checked_embed = None
    if embed is not None:

        def checked_embed(tokens: Tensor) -> Tensor:
            return _shape("ModelParts.embed_source", embed(tokens), (*tokens.shape, d_model))

    positions = {}
    for field in ("encoder_positions", "decoder_positions"):
        table = getattr(parts, field)
        if table is not None:
            positions[field] = _checked_table(f"ModelParts.{field}", table, d_model)
    for field in ("encoder_attention_bias", "decoder_attention_bias"):
        bias = getattr(parts, field)
        if bias is not None:
            positions[field] = _checked_bias(f"ModelParts.{field}", bias)
    return dataclasses.replace(parts, forward=checked_forward, embed_source=checked_embed, **positions)


def _checked_table(what: str, table: Callable[[int], Tensor], d_model: int) -> Callable[[int], Tensor]:
    """A built model's own table: (length, d_model), or fewer rows where the model has fewer
    positions (a learned table of ``max_position_embeddings`` rows); the checks read the rows given."""
    def call(length: int) -> Tensor:
        value = table(length)
        if isinstance(value, Tensor) and value.dim() == 2 and 1 <= value.shape[0] < length:
            return _shape(what, value, (value.shape[0], d_model))
        return _shape(what, value, (length, d_model))

    return call


def _checked_bias(what: str, bias: Callable[[int], Tensor]) -> Callable[[int], Tensor]:
    def call(n: int) -> Tensor:
        value = bias(n)
        if not isinstance(value, Tensor) or value.dim() != 3 or tuple(value.shape[1:]) != (n, n):
            shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise AdapterContractError(f"{what}({n}) returned {shape}, expected a tensor (heads, {n}, {n})")
        return value

    return call


def _checked_attention(what: str, fn: Callable[..., Tensor]) -> Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]:
    """An attention function whose output has the protocol's shape and which honours its mask."""

    def call(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        out = _shape(what, fn(query, key, value, mask), (*query.shape[:-1], value.shape[-1]))
        _check_masking(what, out, query, key, value, mask)
        return out

    return call


def _close(a: Tensor, b: Tensor, rows: Tensor) -> bool:
    a, b = a.double()[rows], b.double()[rows]
    return bool(torch.isfinite(b).all()) and (a - b).abs().max().item() <= 1e-4 * max(b.abs().max().item(), 1.0)


def _check_masking(what: str, out: Tensor, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> None:
    """Refuse an attention output that follows another mask convention than the protocol's:
    the mask added to the scores as numbers (True 1, False 0) or True read as "masked". Tried
    with the scale of Eq. 1 and with none (T5 does not scale). A call on which the conventions
    give the same output (one key dominating every row) tells nothing and passes; an output
    that follows no convention, or ignores the mask, is left to the claims (it may be the
    implementation's own departure)."""
    if mask is None or mask.dtype != torch.bool or bool(mask.all()) or mask.dim() != out.dim():
        return
    full = mask.expand(*out.shape[:-1], key.shape[-2])
    rows = (~full).any(-1) & full.any(-1)  # rows with masked and unmasked keys: only there do conventions differ
    if not rows.any():
        return
    d_k = query.shape[-1]
    with torch.no_grad():
        for scale in (d_k ** -0.5, 1.0):
            q = query.double() * (scale * d_k ** 0.5)  # reference_attention divides by sqrt(d_k)
            masked = reference_attention(q, key, value, mask)
            if _close(out, masked, rows):
                return
            scores = q @ key.double().transpose(-2, -1) / d_k ** 0.5
            candidates = {
                "added": torch.softmax(scores + full.double(), -1) @ value.double(),
                "inverted": reference_attention(q, key, value, ~full),
                "ignored": torch.softmax(scores, -1) @ value.double(),
            }
            matches = [name for name, candidate in candidates.items() if _close(out, candidate, rows)]
            if len(matches) != 1:
                continue
            error = (out.double() - masked)[rows].abs().max().item()
            if matches == ["added"]:
                raise AdapterContractError(
                    f"{what}: the attention you gave adds the mask to the scores instead of masking: {error:.3g} max "
                    "error at the rows with masked keys. The protocol's mask is boolean, True = may attend; an "
                    "implementation that adds its mask (Hugging Face's eager attention, which a bare config selects) "
                    "needs it as floats: torch.zeros_like(mask, dtype=q.dtype).masked_fill(~mask, float('-inf')) "
                    "(or use the attention function the model itself runs, e.g. sdpa)"
                )
            if matches == ["inverted"]:
                raise AdapterContractError(
                    f"{what}: the attention you gave reads True in the mask as 'masked': {error:.3g} max error at the "
                    "rows with masked keys. The protocol's mask is True where attention is allowed (as "
                    "F.scaled_dot_product_attention's); pass ~mask to an implementation with the other convention "
                    "(nn.MultiheadAttention's key_padding_mask)"
                )
            return  # it ignores the mask: Eq. 1 fails on it, and it may be the implementation's own


def _checked_loss(what: str, fn: Callable[..., Any]) -> Callable[[Tensor, Tensor, int, float], Tensor]:
    """``fn`` (a loss of the protocol) with its answer checked: a scalar, attached to the logits,
    summed over the tokens."""

    def checked(logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        value = _instance(what, fn(logits, target, pad_id, smoothing), Tensor)
        if value.numel() != 1:
            raise AdapterContractError(f"{what} returned shape {tuple(value.shape)}, expected a scalar (the summed loss)")
        if logits.requires_grad and not value.requires_grad:
            raise AdapterContractError(f"{what} returned a tensor detached from the logits: the checks read its gradient")
        _check_summed(fn, value, logits, target, pad_id, smoothing, what)
        return value

    return checked


def _check_summed(loss: Callable[..., Any], value: Tensor, logits: Tensor, target: Tensor, pad_id: int,
                  smoothing: float, what: str = "loss") -> None:
    """The protocol's loss is *summed* over the tokens: the same batch twice must give twice the
    loss. A mean (over tokens, or over non-padding tokens) gives the same value, and every
    measurement read from its gradient would be off by the number of tokens."""
    with torch.no_grad():
        twice = loss(torch.cat([logits.detach()] * 2), torch.cat([target] * 2), pad_id, smoothing)
    once, doubled = float(value.detach()), float(torch.as_tensor(twice).detach().reshape(-1)[0])
    if math.isclose(doubled, 2 * once, rel_tol=1e-4, abs_tol=1e-6):
        return
    if math.isclose(doubled, once, rel_tol=1e-4, abs_tol=1e-6):
        raise AdapterContractError(
            f"{what} returned the mean over the tokens, not their sum: the batch given twice gave the same loss "
            f"({once:.6g}); the protocol's loss is summed (reduction='sum')"
        )
    raise AdapterContractError(
        f"{what} is not a sum over the tokens: the batch given twice gave {doubled:.6g}, not twice {once:.6g}"
    )


def _check_setting(key: Any, entry: Any) -> None:
    """A setting of ``hyperparameters()``: a number, a boolean or a word, bare or as
    ``(value, where)`` with ``where`` saying where it was read. ``None`` is no value (leave the
    key out when the implementation has no such setting); a number written as text is refused."""
    what = f"hyperparameters()[{key!r}]"
    if not isinstance(key, str):
        raise AdapterContractError(f"hyperparameters() has the key {key!r} ({type(key).__name__}); keys are claim keys (str)")
    value = entry
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise AdapterContractError(
                f"{what} is the {len(entry)}-tuple {entry!r}; give the bare value or (value, where) with where a str"
            )
        value = entry[0]
    if value is None:
        raise AdapterContractError(f"{what} is None; leave the key out when the implementation has no such setting")
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return
        raise AdapterContractError(f"{what} is the text {value!r}; give the number itself")
    if not isinstance(value, numbers.Real):
        raise AdapterContractError(f"{what} is {type(value).__name__} {value!r}; expected a number, a bool or a str")
