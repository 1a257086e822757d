"""ATen's CUDA entry to ``scaled_dot_product_attention``, as far as it decides on shapes, in Python.

On CUDA a boolean mask becomes a fresh dense additive bias (``convert_boolean_attn_mask``), and a bias
whose strides, all but the last, are not multiples of 8 is padded before the memory-efficient kernel
(``preprocess_mask`` in aten/src/ATen/native/transformers/attention.cpp). Under ``torch.compile`` with
dynamic shapes that stride test is a guard on the number of keys, so a pass whose source length is a
multiple of 8 and one whose length is not compiled two graphs on the H200 (2026-11-27); so is the
kernels' test of the bias's contiguity (a second H200 run: a bias padded only where the length was
not a multiple of 8 was contiguous where it was). The CPU's own
entry asks no such question; the tests put this one in its place (dynamo traces it as it traces
ATen's composite), so that the CPU sees the guard the GPU saw.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ALIGNMENT = 8
_real = F.scaled_dot_product_attention


def cuda_like_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:   # a fresh dense tensor: its strides follow the number of keys
            attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=attn_mask.device).masked_fill(
                ~attn_mask, float("-inf"))
        if attn_mask.is_contiguous():   # the kernels' layout checks (the second guard the H200 met)
            attn_mask = attn_mask.view(attn_mask.shape)
        if any(stride % ALIGNMENT != 0 for stride in attn_mask.stride()[:-1]):   # the first
            keys = attn_mask.size(-1)
            attn_mask = F.pad(attn_mask, (0, ALIGNMENT - keys % ALIGNMENT))[..., :keys]
    return _real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                 **kwargs)
