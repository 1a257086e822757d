"""Attention modules that take one tensor for keys and values, called as the protocol calls them.

The protocol calls ``multi_head_attention``'s module as ``module(query, key, value)``; the checks
call it as self-attention, ``module(x, x, x)``. Hugging Face's attention modules (Marian, FSMT,
BART, T5) and x-transformers' ``Attention`` take the queries and *one* memory tensor that both
keys and values are projected from. A wrapper must not drop the keys and values it is given (a
check calling it otherwise would then measure self-attention and pass on nothing): it honours
them where the library can (keys and values the same tensor: attention over that memory) and
refuses keys that differ from the values.
"""

from __future__ import annotations

from torch import Tensor, nn


def _same(a: Tensor, b: Tensor) -> bool:
    return a is b or (a.shape == b.shape and bool((a == b).all()))


def memory_of(query: Tensor, key: Tensor | None, value: Tensor | None, module: str) -> Tensor | None:
    """The memory to attend over: ``None`` for self-attention (keys and values absent or the
    query itself), the keys when keys and values are one tensor; a ``ValueError`` naming
    ``module`` when they differ (it cannot take them apart)."""
    key = query if key is None else key
    value = key if value is None else value
    if not _same(key, value):
        raise ValueError(f"{module} projects keys and values from one tensor: it cannot be called with keys "
                         "different from the values (the adapter offers no multi_head_cross_attention)")
    return None if _same(key, query) else key


class OneMemoryAttention(nn.Module):
    """A Hugging Face attention module (``MarianAttention``, ``BartAttention``, ``T5Attention``)
    called as the protocol calls it, (x, x, x); keys and values given as one other tensor are
    attended over (``key_value_states``), keys apart from values refused."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None) -> Tensor:
        memory = memory_of(query, key, value, type(self.attn).__name__)
        return self.attn(query)[0] if memory is None else self.attn(query, key_value_states=memory)[0]
