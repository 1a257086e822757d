"""The matrix products of one forward pass, recorded with their shapes.

Whatever a model's classes and names, its linear maps run as ``mm``/``addmm`` (or as a
convolution over the positions, read by its channels: C_in -> C_out at each position), its
attention as ``bmm`` (or a fused scaled-dot-product kernel whose inputs are (batch, heads, n, d_k)). Recording
those calls below autograd (a ``TorchDispatchMode``) reads the architecture off what runs:
the widths of the feed-forward layers, how many run on the source and on the target tokens,
the number of heads and d_k, d_v of each attention (:mod:`repro.checks.census` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

LINEAR = {aten.mm, aten.addmm}
BATCHED = {aten.bmm, aten.baddbmm}
#: a softmax over the keys: ``_safe_softmax`` is the one SDPA's math path runs on a CUDA device (a masked
#: row gives zeros, not NaN), so that a verdict on a GPU is the CPU's
SOFTMAX = {aten._softmax, aten._safe_softmax}
FUSED_ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_fused_attention_overrideable,
}


@dataclass(frozen=True)
class Product:
    """One recorded call: ``kind`` is ``linear`` (rows, k) @ (k, out), ``batched`` (B, rows, k) @
    (B, k, out), or ``attention`` (a fused kernel: ``batch``, ``heads``, ``n_q``, ``n_k``, ``d_k``, ``d_v``).
    ``operand``: a checksum of the values of its first operand, where asked for (``None`` on the
    meta device, which has no values), to tell which products an input reaches."""

    kind: str
    shape: tuple[int, ...]
    operand: tuple[float, float] | None = None


class ProductRecorder(TorchDispatchMode):
    """Records :class:`Product` s of every matrix product and fused attention run inside it
    (``values``: with a checksum of each one's first operand)."""

    def __init__(self, values: bool = False) -> None:
        super().__init__()
        self.products: list[Product] = []
        self.values = values

    def _checksum(self, a: Any) -> tuple[float, float] | None:
        if not self.values or a.device.type == "meta":
            return None
        a = a.detach().double()
        return float(a.sum()), float((a * a).sum())

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet in LINEAR:
            a, b = (args[1], args[2]) if packet is aten.addmm else (args[0], args[1])
            self.products.append(Product("linear", (a.shape[0], a.shape[1], b.shape[1]), self._checksum(a)))
        elif packet in BATCHED:
            a, b = (args[1], args[2]) if packet is aten.baddbmm else (args[0], args[1])
            self.products.append(Product("batched", (a.shape[0], a.shape[1], a.shape[2], b.shape[2]), self._checksum(a)))
        elif packet in FUSED_ATTENTION:
            q, k, v = args[:3]
            self.products.append(Product("attention", (q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]),
                                         self._checksum(q)))
        elif packet is aten.convolution:
            # a convolution over positions reads C_in channels and gives C_out at each position: its
            # widths, as a product's (rows = batch x output positions); the kernel's width is not a width
            x, w = args[0], args[1]   # w: (C_out, C_in / groups, *kernel)
            rows = out.shape[0] * math.prod(out.shape[2:])
            self.products.append(Product("linear", (rows, w.shape[1], w.shape[0]), self._checksum(x)))
        elif packet is aten._native_multi_head_attention:
            q, k, _, embed_dim, heads = args[:5]
            head = embed_dim // heads
            self.products.append(Product("attention", (q.shape[0], heads, q.shape[1], k.shape[1], head, head),
                                         self._checksum(q)))
        return out


def contracts_positions(products: list[Product], length: int) -> bool:
    """Whether a batched product among ``products`` mixes ``length`` positions without an n x n score
    matrix: (B, d, n) @ (B, n, d'), summing over them (a kernelised attention's phi(K)^T V), or one
    product per position, B a multiple of ``length``, over that position's own window of keys (a
    sliding-window attention's q . K_window and weights . V_window); projections and the
    position-wise layers run neither."""
    return any(p.kind == "batched" and (p.shape[2] == length or p.shape[0] % length == 0) for p in products)


def record_products(run: Callable[[], Any], values: bool = False) -> list[Product]:
    """The products of ``run()``, in the order they ran (gradients off); ``values``: each with a
    checksum of its first operand (:class:`Product`)."""
    with ProductRecorder(values) as recorder, torch.no_grad():
        run()
    return recorder.products
