"""Section 3.2: scaled dot-product attention (Eq. 1) and multi-head attention."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Eq. 1: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

    ``mask`` is boolean, broadcastable to (..., n_queries, n_keys), ``True`` where attention
    is allowed; masked scores are set to -inf *before* the softmax so they get weight 0.
    Returns the output (..., n_queries, d_v) and the attention weights.
    """
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights


#: The fused kernels' alignment of an attention bias: ATen's memory-efficient kernel pads a bias whose
#: strides (all but the last) are not multiples of it (``preprocess_mask`` in attention.cpp).
BIAS_ALIGNMENT = 8


def aligned_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean ``mask`` (``True``: may attend) as the additive bias the fused kernels take (0 where
    allowed, -inf where not: what ATen's conversion of a boolean mask gives), in the query's ``dtype``,
    held in a buffer whose last dimension is padded past the next multiple of :data:`BIAS_ALIGNMENT`, so
    that every stride but the last is a multiple of it and the bias is never contiguous, whatever the
    number of keys.

    Why: on CUDA, ATen converts a boolean mask to a fresh bias whose strides follow the number of keys
    and asks whether they are aligned; under ``torch.compile`` with dynamic shapes that question is a
    guard, so a pass whose source length falls on the other side of a multiple of 8 compiled the
    objective again (the H200, 2026-11-27; and once a length that is a multiple of 8 gave an unpadded,
    contiguous bias, whether it was contiguous became the guard). With this layout every answer is the
    same for every length and one graph serves every pass (:mod:`repro.train.compiled`). In ``dtype`` already, autocast
    leaves it as it is (a cast would copy it densely, dropping the padding)."""
    keys = mask.size(-1)
    # at least one column of padding, also where ``keys`` is a multiple: then the bias is never the whole
    # buffer, and a test of its contiguity (which the fused kernels' entry makes) is not a guard either
    padded = F.pad(mask, (0, BIAS_ALIGNMENT - keys % BIAS_ALIGNMENT), value=False)
    bias = torch.zeros(padded.shape, dtype=dtype, device=mask.device).masked_fill_(~padded, float("-inf"))
    return bias[..., :keys]


def train_with_shape_free_kernels() -> None:
    """Leave cuDNN's fused attention out of this (training) process on CUDA: it builds an execution plan
    for every new shape, and every pass of Section 5.1's batches has a new shape. On an H200
    (2026-11-27, torch 2.11) the job's updates took 0.31 s against 0.044 s for a fixed shape, with the
    same 40 ms of device time: the host's time went to the plans. The flash and memory-efficient
    kernels (the same Eq. 1) have none; a check's own arithmetic pin restores what it found."""
    if torch.version.cuda is not None and torch.cuda.is_available():   # a real CUDA build (not the tests' fake)
        torch.backends.cuda.enable_cudnn_sdp(False)


#: the device types on which, under ``torch.compile``, :func:`fused_attention` hands inductor Eq. 1's
#: math form rather than PyTorch's fused kernel (a test adds ``cpu`` to follow the GPU's graph)
INDUCTOR_FORM_DEVICES = frozenset({"cuda"})


def fused_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                    causal: bool = False, graph_form: bool | None = None) -> Tensor:
    """Eq. 1 through a fused kernel: PyTorch's (memory-efficient / flash / cuDNN where available) when
    run eagerly; inside a compiled graph on a GPU, inductor's own.

    A boolean ``mask`` (key padding) goes to the kernel as an aligned additive bias
    (:func:`aligned_bias`), which keeps the memory-efficient and cuDNN kernels eligible. ``causal``
    (query i sees keys up to i, aligned at the last query as in the reference) joins that bias as a
    triangle, not as the kernel's flag: with a flag, PyTorch picks flash's kernel, whose 128-position
    tiles are three-quarters empty at the paper's ~32-token sentences. At the base update's shapes
    on an H200 (780 x 32 tokens, 8 heads; ``repro bench attention``, 2026-11-27) one causal call,
    forward and backward, took 748 us through flash and 319 us through the memory-efficient kernel
    with the triangle as a bias.

    Under ``torch.compile`` on a GPU the call is Eq. 1's math form (:func:`scaled_dot_product_attention`
    itself, with autocast's fp32 softmax): inductor fuses the scale, the mask
    and the softmax into one kernel between two batched products, forward and backward. At the same
    shapes it took 239 us (encoder), 229 us (causal) and 241 us (cross) per call against 319 us for the
    memory-efficient kernel (``repro bench attention``, "math, compiled"): at ~32 keys a sentence the
    fused kernels' tiles are mostly empty, and the scores are small. It also asks no stride question of
    the mask, so it adds no guard to the one graph of the job (:mod:`repro.train.compiled`).
    ``graph_form`` forces that choice (``None``: as above)."""
    if causal:
        n, m = query.size(-2), key.size(-2)
        triangle = torch.ones(n, m, dtype=torch.bool, device=query.device).tril(m - n)
        mask = triangle if mask is None else mask & triangle
    if graph_form is None:
        graph_form = torch.compiler.is_compiling() and query.device.type in INDUCTOR_FORM_DEVICES
    if graph_form:
        return scaled_dot_product_attention(query, key, value, mask)[0]
    bias = aligned_bias(mask, query.dtype) if mask is not None else None
    return F.scaled_dot_product_attention(query, key, value, attn_mask=bias)


@dataclass
class KeyValueCache:
    """Projected keys and values kept between incremental decoding steps, (batch, h, length, d).

    With a ``capacity`` the keys and values live in buffers of that many positions, allocated at the
    first step; each step writes its positions at the current length (no copy of the earlier ones,
    as concatenation would make at every step) and attention reads the filled part."""

    key: Tensor | None = None
    value: Tensor | None = None
    capacity: int = 0
    length: int = 0

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        n = key.size(2)
        if self.capacity and self.length + n <= self.capacity:
            if self.key is None:
                rows, heads, _, _ = key.shape
                self.key = key.new_empty(rows, heads, self.capacity, key.size(3))
                self.value = value.new_empty(rows, heads, self.capacity, value.size(3))
            self.key[:, :, self.length:self.length + n] = key
            self.value[:, :, self.length:self.length + n] = value
            self.length += n
            return self.key[:, :, :self.length], self.value[:, :, :self.length]
        if self.capacity:   # past the capacity: keep going by concatenation
            self.key, self.value, self.capacity = self.keys(), self.values(), 0
        self.key = key if self.key is None else torch.cat([self.key, key], dim=2)
        self.value = value if self.value is None else torch.cat([self.value, value], dim=2)
        self.length = self.key.size(2)
        return self.key, self.value

    def keys(self) -> Tensor | None:
        """The keys of the positions filled so far."""
        return None if self.key is None else self.key[:, :, :self.length]

    def values(self) -> Tensor | None:
        return None if self.value is None else self.value[:, :, :self.length]

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search keeps the surviving hypotheses), filled positions only."""
        if self.key is None:
            return
        if self.capacity and index.numel() == self.key.size(0):
            self.key[:, :, :self.length] = self.keys().index_select(0, index)
            self.value[:, :, :self.length] = self.values().index_select(0, index)
        else:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Section 3.2.2: MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h projections of each kind are held as one matrix of d_model x (h * d_k) (resp. d_v),
    which is the same map as h separate matrices, laid side by side.
    """

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, impl: str = "reference") -> None:
        super().__init__()
        self.n_heads, self.d_k, self.d_v, self.impl = n_heads, d_k, d_v, impl
        self.w_q = nn.Linear(d_model, n_heads * d_k)
        self.w_k = nn.Linear(d_model, n_heads * d_k)
        self.w_v = nn.Linear(d_model, n_heads * d_v)
        self.w_o = nn.Linear(n_heads * d_v, d_model)
        self.last_weights: Tensor | None = None  # kept when record_weights is set (attention maps)
        self.record_weights = False

    def _split(self, x: Tensor, d: int) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, d).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        cache: KeyValueCache | None = None,
        static_kv: bool = False,
        causal: bool = False,
    ) -> Tensor:
        """Attend from ``query`` (batch, n, d_model) to ``key``/``value`` (batch, m, d_model).

        With a ``cache``: for self-attention the new keys/values are appended to it; with
        ``static_kv`` (encoder-decoder attention) they are computed once and reused. ``causal``:
        query i sees keys up to i only (Section 3.1), on top of ``mask``.
        """
        q = self._split(self.w_q(query), self.d_k)
        if cache is not None and static_kv and cache.key is not None:
            k, v = cache.keys(), cache.values()
        else:
            k = self._split(self.w_k(key), self.d_k)
            v = self._split(self.w_v(value), self.d_v)
            if cache is not None:
                k, v = cache.append(k, v)
        if self.impl == "fused" and not self.record_weights:
            out = fused_attention(q, k, v, mask, causal)
        else:
            if causal:
                n, m = q.size(-2), k.size(-2)
                tril = torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n)
                mask = tril if mask is None else mask & tril
            out, weights = scaled_dot_product_attention(q, k, v, mask)
            if self.record_weights:
                self.last_weights = weights.detach()
        batch, _, length, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(batch, length, self.n_heads * self.d_v))
