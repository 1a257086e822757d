"""Eq. 1 and multi-head attention, as hypothesis properties over random shapes, masks and seeds."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.model.attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention

shapes = st.tuples(
    st.integers(1, 3), st.integers(1, 4), st.integers(1, 9), st.integers(1, 9), st.integers(1, 24), st.integers(1, 24)
)


def _case(shape, seed):
    batch, heads, n_q, n_k, d_k, d_v = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, n_q, d_k, generator=gen) * 2
    k = torch.randn(batch, heads, n_k, d_k, generator=gen) * 2
    v = torch.randn(batch, heads, n_k, d_v, generator=gen)
    mask = torch.rand(batch, 1, n_q, n_k, generator=gen) > 0.4
    mask[..., 0] = True
    return q, k, v, mask


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 2**31 - 1))
def test_eq1_matches_the_formula_written_out(shape, seed):
    q, k, v, mask = _case(shape, seed)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    d_k = q.shape[-1]
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(d_k)
    scores[~mask.expand_as(scores)] = -math.inf
    want = torch.softmax(scores, -1) @ v.double()
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    # Masked keys get exactly zero weight; each row's weights sum to one.
    assert (weights[~mask.expand_as(weights)] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(0, 2**31 - 1))
def test_fused_path_agrees_with_reference(shape, seed):
    q, k, v, mask = _case(shape, seed)
    torch.testing.assert_close(fused_attention(q, k, v, mask), scaled_dot_product_attention(q, k, v, mask)[0],
                               atol=1e-5, rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(shapes, st.integers(0, 2**31 - 1))
def test_values_at_masked_keys_do_not_reach_the_output(shape, seed):
    q, k, v, mask = _case(shape, seed)
    key_mask = mask[:, :, :1, :]  # one mask shared by every query
    out = scaled_dot_product_attention(q, k, v, key_mask)[0]
    poisoned = v.masked_fill(~key_mask.transpose(-1, -2), 1e6)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, poisoned, key_mask)[0], out)


def test_multi_head_attention_uses_separate_d_k_and_d_v():
    mha = MultiHeadAttention(d_model=32, n_heads=4, d_k=5, d_v=3)
    assert mha.w_q.weight.shape == (20, 32) and mha.w_v.weight.shape == (12, 32) and mha.w_o.weight.shape == (32, 12)
    x = torch.randn(2, 7, 32)
    assert mha(x, x, x).shape == (2, 7, 32)


def test_multi_head_attention_is_concat_of_heads_times_w_o():
    """Section 3.2.2 written out head by head, against the batched implementation."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4, d_k=4, d_v=4).eval()
    x, mem = torch.randn(1, 5, 16), torch.randn(1, 6, 16)
    heads = []
    for i in range(4):
        sl = slice(4 * i, 4 * i + 4)
        q = x @ mha.w_q.weight[sl].T + mha.w_q.bias[sl]
        k = mem @ mha.w_k.weight[sl].T + mha.w_k.bias[sl]
        v = mem @ mha.w_v.weight[sl].T + mha.w_v.bias[sl]
        heads.append(torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1) @ v)
    want = torch.cat(heads, -1) @ mha.w_o.weight.T + mha.w_o.bias
    torch.testing.assert_close(mha(x, mem, mem), want, atol=1e-5, rtol=1e-5)
