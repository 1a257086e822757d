"""Deliberately wrong implementations, as adapters: the claims must catch each of them.

Each is repro's own model with one plausible mistake, so that an audit shows which claims
bite (``repro audit repro.audit.variants:pre_norm``):

* :func:`scale_after_softmax`: softmax(QK^T) V / sqrt(d_k) instead of Eq. 1.
* :func:`leaky_mask`: a decoder whose causal mask lets position i also see i+1.
* :func:`sin_cos_swapped`: cos on the even dimensions, sin on the odd ones (Section 3.5).
  A fixed order of the dimensions: the set of sinusoids is the paper's (wavelengths and the
  relative-position claim hold), the equations and the layout (``sec3.pe.layout``) fail.
* :func:`pre_norm`: x + Sublayer(LayerNorm(x)) instead of LayerNorm(x + Sublayer(x)).

And two broken adapters, to show that the audit reports them as errors and carries on:

* :func:`raising`: its ``attention`` raises.
* :func:`wrong_shape`: its ``attention`` returns the heads concatenated (batch, n, h * d_v)
  and its ``positional_encoding`` the table transposed (d_model, length).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import torch
from torch import Tensor

import repro.model.transformer as transformer_module
from repro.audit.adapter import Adapter
from repro.audit.repro_adapter import ReproAdapter
from repro.model import Transformer
from repro.model.positional import sinusoidal_encoding


class _Variant(ReproAdapter):
    """repro's model with the one mistake ``mistake`` names."""

    mistake = ""

    def __init__(self) -> None:
        super().__init__()
        self.name = f"repro variant ({self.mistake})"


class ScaleAfterSoftmaxAdapter(_Variant):
    """Eq. 1 with the 1/sqrt(d_k) applied to the softmax's output instead of its input."""

    mistake = "scaled after the softmax"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        scores = query @ key.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1) / math.sqrt(query.size(-1)) @ value


def _leaky_causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """Position i may attend to positions <= i + 1: one future position leaks."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril(1)[None, None]


@contextmanager
def leaking_causal_mask() -> Iterator[None]:
    """Within the block, repro's decoder builds its causal mask with :func:`_leaky_causal_mask`."""
    with mock.patch.object(transformer_module, "causal_mask", _leaky_causal_mask):
        yield


class LeakyTransformer(Transformer):
    """repro's Transformer whose decoder (without a cache) sees one position ahead."""

    def decode(self, *args, **kwargs) -> Tensor:  # type: ignore[no-untyped-def]
        with leaking_causal_mask():
            return super().decode(*args, **kwargs)


class LeakyMaskAdapter(_Variant):
    mistake = "causal mask leaking one future position"
    transformer_class = LeakyTransformer


class SinCosSwappedAdapter(_Variant):
    mistake = "sin and cos swapped in the positional encoding"

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        table = sinusoidal_encoding(length, d_model)
        swapped = table.clone()
        swapped[:, 0::2], swapped[:, 1::2] = table[:, 1::2], table[:, 0::2]
        return swapped


class RaisingAdapter(_Variant):
    mistake = "attention raises"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        raise RuntimeError("this attention is deliberately broken")


class WrongShapeAdapter(_Variant):
    mistake = "wrongly shaped attention and positional encoding"

    def attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        out = super().attention(query, key, value, mask)
        batch, heads, n, d_v = out.shape
        return out.transpose(1, 2).reshape(batch, n, heads * d_v)

    def positional_encoding(self, length: int, d_model: int) -> Tensor:
        return sinusoidal_encoding(length, d_model).T


def scale_after_softmax() -> Adapter:
    return ScaleAfterSoftmaxAdapter()


def leaky_mask() -> Adapter:
    return LeakyMaskAdapter()


def sin_cos_swapped() -> Adapter:
    return SinCosSwappedAdapter()


def pre_norm() -> Adapter:
    """repro's own pre-norm option (``norm_first=True``)."""
    return ReproAdapter(norm_first=True)


def raising() -> Adapter:
    return RaisingAdapter()


def wrong_shape() -> Adapter:
    return WrongShapeAdapter()
