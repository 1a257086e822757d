"""The adapter protocol: what an implementation exposes so the paper's claims can be checked.

Subclass :class:`Adapter` and override the methods for the parts your implementation has.
Every method is optional: one left as is raises :class:`~repro.checks.registry.NotApplicable`,
and each claim needing it is reported "not applicable", never passed.

Conventions: tensors are float32 on the CPU; batch first; attention masks are boolean with
``True`` where attention is allowed; modules are returned in ``eval()`` mode with dropout off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from repro.claims.outcome import NotApplicable


@dataclass
class FeedForwardParts:
    """A position-wise FFN (Eq. 2) and its weights in the paper's orientation:
    ``w_1`` is d_model x d_ff (so the hidden layer is x @ w_1 + b_1), ``w_2`` is d_ff x d_model."""

    module: Callable[[Tensor], Tensor]
    w_1: Tensor
    b_1: Tensor
    w_2: Tensor
    b_2: Tensor


@dataclass
class EncoderLayerParts:
    """One encoder layer and its pieces: the whole layer, its two sub-layer functions (without
    residual or norm), and its two layer normalisations, in the order they are applied."""

    layer: Callable[[Tensor], Tensor]
    self_attention: Callable[[Tensor], Tensor]
    feed_forward: Callable[[Tensor], Tensor]
    norms: tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]


@dataclass
class ModelParts:
    """A whole encoder-decoder built at a given size.

    ``forward(src, tgt_in)`` maps token ids (batch, n) and (batch, m) to logits (batch, m, vocab).
    ``embed_source(tokens)`` returns what the encoder stack receives before positional encoding
    is added (the scaled embedding); the weight tensors are the raw parameter matrices, each
    vocab x d_model (the output projection too), or ``None`` where the implementation has none.
    """

    forward: Callable[[Tensor, Tensor], Tensor]
    vocab_size: int
    d_model: int
    pad_id: int = 0
    embed_source: Callable[[Tensor], Tensor] | None = None
    source_embedding: Tensor | None = None
    target_embedding: Tensor | None = None
    output_projection: Tensor | None = None
    module: torch.nn.Module | None = None


class Adapter:
    """Base class: override what your implementation provides."""

    name = "unnamed implementation"
    #: True only for repro's own model, whose presets (Table 3's rows) some claims count on.
    has_repro_presets = False

    def _missing(self, part: str) -> NotApplicable:
        return NotApplicable(f"{self.name} does not expose {part} (adapter method '{part}')")

    # -- Section 3.2 ------------------------------------------------------------------------
    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        """Scaled dot-product attention on (batch, heads, n, d_k) inputs; returns (batch, heads, n, d_v)."""
        raise self._missing("attention")

    def multi_head_attention(self, d_model: int, n_heads: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
        """A multi-head attention module with h heads of d_model/h, called as (query, key, value)."""
        raise self._missing("multi_head_attention")

    # -- Section 3.3 / 3.5 ------------------------------------------------------------------
    def feed_forward(self, d_model: int, d_ff: int) -> FeedForwardParts:
        raise self._missing("feed_forward")

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        """The (length, d_model) table added to the embeddings."""
        raise self._missing("positional_encoding")

    # -- Section 3.1 ------------------------------------------------------------------------
    def encoder_layer(self, d_model: int, n_heads: int, d_ff: int) -> EncoderLayerParts:
        raise self._missing("encoder_layer")

    def model(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> ModelParts:
        raise self._missing("model")

    # -- Section 5 --------------------------------------------------------------------------
    def optimizer(self, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        raise self._missing("optimizer")

    def learning_rate(self, step: int, d_model: int, warmup_steps: int) -> float:
        raise self._missing("learning_rate")

    def loss(self, logits: Tensor, target: Tensor, pad_id: int, smoothing: float) -> Tensor:
        """Summed label-smoothed cross-entropy of logits (tokens, vocab) against target (tokens,)."""
        raise self._missing("loss")

    def hyperparameters(self) -> dict[str, Any]:
        """The recipe's settings: keys as in claims' ``params.key`` (e.g. ``dropout``, ``beam_size``)."""
        raise self._missing("hyperparameters")
