"""Eq. 1 as the compiled graph on a GPU runs it: the math form handed to inductor (repro.model.attention).

A CPU follows the GPU's graph by adding ``cpu`` to ``INDUCTOR_FORM_DEVICES``. Dynamo's graph is read with
a backend that records it (the traced ops are what inductor would fuse), then run as traced.
"""

from __future__ import annotations

import pytest
import torch

import repro.model.attention as attention
from repro.model.attention import fused_attention, scaled_dot_product_attention


class Recorder:
    """A torch.compile backend that keeps each graph dynamo hands it and runs it as traced."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self) -> list[str]:
        return [str(getattr(node.target, "__name__", node.target)) for gm in self.graphs for node in gm.graph.nodes
                if node.op in ("call_function", "call_method")]


@pytest.fixture
def gpu_form(monkeypatch):
    monkeypatch.setattr(attention, "INDUCTOR_FORM_DEVICES", frozenset({"cpu", "cuda"}))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _qkv(batch=3, heads=2, n=7, m=9, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, d, generator=g, requires_grad=True) for length in (n, m, m))
    mask = (torch.arange(m)[None, :] < torch.tensor([m, m - 3, 2])[:batch, None])[:, None, None, :]
    return q, k, v, mask


@pytest.mark.parametrize("causal", [False, True])
def test_the_compiled_form_is_eq1_forward_and_backward(gpu_form, causal: bool) -> None:
    q, k, v, mask = _qkv(n=9)
    recorder = Recorder()
    compiled = torch.compile(lambda q, k, v: fused_attention(q, k, v, mask, causal), backend=recorder, dynamic=True)
    out = compiled(q, k, v)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    whole = mask & torch.ones(9, 9, dtype=torch.bool).tril() if causal else mask
    want = scaled_dot_product_attention(q, k, v, whole)[0]
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    for got, expected in zip(grads, want_grads):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    targets = recorder.targets()
    assert not any("scaled_dot_product" in t for t in targets), targets   # the math form, not PyTorch's kernel
    assert any("softmax" in t for t in targets), targets


def test_eager_and_the_cpu_keep_pytorch_s_kernel() -> None:
    """Outside a compiled graph (decoding, the claims) and on a CPU the call is PyTorch's fused kernel."""
    torch._dynamo.reset()
    q, k, v, mask = _qkv()
    recorder = Recorder()
    torch.compile(lambda q, k, v: fused_attention(q, k, v, mask), backend=recorder)(q, k, v)
    assert any("scaled_dot_product" in t for t in recorder.targets()), recorder.targets()
    torch._dynamo.reset()


def test_under_mixed_precision_the_graph_form_is_eq1_in_bf16(gpu_form) -> None:
    """Autocast's rules inside the graph: bf16 products, a bf16 output within bf16's error of Eq. 1."""
    q, k, v, mask = _qkv()
    recorder = Recorder()

    def call(q, k, v):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            q, k, v = (x @ torch.eye(x.size(-1)) for x in (q, k, v))   # bf16 under autocast, as the projections
            return fused_attention(q, k, v, mask)

    out = torch.compile(call, backend=recorder)(q, k, v)
    assert out.dtype == torch.bfloat16
    assert not any("scaled_dot_product" in t for t in recorder.targets()), recorder.targets()
    want = scaled_dot_product_attention(q.double(), k.double(), v.double(), mask)[0]
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)


def test_a_fully_allowed_row_and_nan_inputs_behave_as_eq1(gpu_form) -> None:
    """No mask at all is Eq. 1 unmasked; a NaN in a query reaches its output row (nothing hides it)."""
    q, k, v, _ = _qkv()
    compiled = torch.compile(lambda q, k, v: fused_attention(q, k, v), backend=Recorder())
    torch.testing.assert_close(compiled(q, k, v), scaled_dot_product_attention(q, k, v)[0], atol=1e-5, rtol=1e-5)
    poisoned = q.detach().clone()
    poisoned[0, 0, 0, 0] = float("nan")
    out = compiled(poisoned, k, v)
    assert out[0, 0, 0].isnan().all() and out[1:].isfinite().all()


def test_inductor_keeps_the_math_form_it_is_handed(gpu_form) -> None:
    """Inductor's pattern matcher turns some written-out attentions back into PyTorch's fused kernel
    (``fuse_attention``); with a boolean mask that would bring back the fused entry's stride guard on
    the number of keys (a second compilation on the H200). The model's calls, compiled by inductor
    forward and backward with dynamic shapes, hold two batched products and no fused kernel."""
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(16, 2, 8, 8, impl="fused")
    x, memory = torch.randn(4, 9, 16), torch.randn(4, 11, 16)
    mask = (torch.arange(11)[None, :] < torch.tensor([11, 7, 5, 2])[:, None])[:, None, None, :]
    compiled = torch.compile(lambda x, memory: (mha(x, memory, memory, mask).square().sum()
                                                + mha(x, x, x, None, causal=True).square().sum()), dynamic=True)

    def step():
        loss = compiled(x, memory)
        loss.backward()
        return loss

    loss, code = run_and_get_code(step)
    assert torch.isfinite(loss)
    assert not any("scaled_dot_product" in text for text in code)
    assert sum(text.count("extern_kernels.bmm(") for text in code) >= 4   # Q K^T and (weights) V, each call
