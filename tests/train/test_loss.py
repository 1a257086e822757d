"""Section 5.4: label-smoothed cross-entropy against its closed form and a dense reference."""

import math

import pytest
import torch
import torch.nn.functional as F

from repro.train.loss import label_smoothed_nll, projection_loss, smoothed_target

PAD = 0


def closed_form(a: float, b: float, vocab: int, eps: float) -> float:
    """Logits: a on the target, b on PAD, 0 elsewhere. H(q,p) = L - (1-eps)*a with L = log(e^a + e^b + V-2);
    PAD gets no smoothing mass, so b enters only through L."""
    big_l = math.log(math.exp(a) + math.exp(b) + vocab - 2)
    return big_l - (1 - eps) * a


def _wrong_spread_over_all(logits, target, eps):  # fairseq-style: eps over all V tokens incl. PAD
    logp = logits.log_softmax(-1)
    return (-(1 - eps) * logp.gather(1, target[:, None]).squeeze(1) - eps / logits.size(1) * logp.sum(-1)).sum()


@pytest.mark.parametrize("a, b", [(2.0, 3.0), (-1.0, 5.0), (4.0, -2.0)])
def test_matches_closed_form(a, b):
    vocab, eps, y = 11, 0.1, 5
    logits = torch.zeros(1, vocab, dtype=torch.float64)
    logits[0, y], logits[0, PAD] = a, b
    loss, nll = label_smoothed_nll(logits, torch.tensor([y]), eps, PAD)
    assert loss.item() == pytest.approx(closed_form(a, b, vocab, eps), rel=1e-10)
    assert nll.item() == pytest.approx(math.log(math.exp(a) + math.exp(b) + vocab - 2) - a, rel=1e-10)
    # fused path (float32)
    hidden = torch.ones(1, 1)  # d = 1: z_k = W[k, 0]
    weight = logits.float().t().contiguous()
    out = projection_loss(hidden, weight, torch.tensor([y]), epsilon=eps, pad_id=PAD)
    assert out.loss.item() == pytest.approx(closed_form(a, b, vocab, eps), rel=1e-5)
    # a plausible wrong convention does not pass this check
    wrong = _wrong_spread_over_all(logits, torch.tensor([y]), eps).item()
    assert abs(wrong - closed_form(a, b, vocab, eps)) > 1e-3


def test_dense_reference_and_uniform_logits():
    vocab, eps = 9, 0.2
    target = torch.tensor([3, 4, 8])
    q = smoothed_target(target, vocab, eps, PAD, torch.float64)
    assert torch.allclose(q.sum(1), torch.ones(3, dtype=torch.float64)) and (q[:, PAD] == 0).all()
    logits = torch.randn(3, vocab, dtype=torch.float64)
    dense = -(q.double() * logits.log_softmax(-1)).sum()
    assert label_smoothed_nll(logits, target, eps, PAD)[0].item() == pytest.approx(dense.item(), rel=1e-10)
    uniform = label_smoothed_nll(torch.zeros(3, vocab), target, eps, PAD)[0].item()
    assert uniform == pytest.approx(3 * math.log(vocab), rel=1e-6)  # H(q, uniform) = log V whatever q


def test_no_smoothing_is_cross_entropy_and_padding_is_ignored():
    torch.manual_seed(0)
    logits = torch.randn(12, 20)
    target = torch.randint(1, 20, (12,))
    target[[2, 7]] = PAD
    loss, nll = label_smoothed_nll(logits, target, 0.0, PAD)
    ref = F.cross_entropy(logits, target, ignore_index=PAD, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5) and nll.item() == pytest.approx(ref.item(), rel=1e-5)


@pytest.mark.parametrize("chunk", [1, 5, 1024])
def test_fused_loss_and_gradients_match_the_reference(chunk):
    torch.manual_seed(1)
    n, d, vocab, eps, scale = 23, 6, 31, 0.1, 0.37
    hidden = torch.randn(2, n, d, requires_grad=True)
    weight = torch.randn(vocab, d, requires_grad=True)
    target = torch.randint(1, vocab, (2, n))
    target[0, -4:] = PAD
    out = projection_loss(hidden, weight, target, epsilon=eps, pad_id=PAD, scale=scale, chunk_rows=chunk)
    out.loss.backward()
    g_h, g_w = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    ref, ref_nll = label_smoothed_nll(hidden @ weight.t(), target, eps, PAD)
    (ref * scale).backward()
    assert out.tokens == 2 * n - 4
    assert out.loss.item() == pytest.approx(ref.item() * scale, rel=1e-5)
    assert out.nll == pytest.approx(ref_nll.item(), rel=1e-5)
    assert torch.allclose(g_h, hidden.grad, atol=1e-5) and torch.allclose(g_w, weight.grad, atol=1e-5)
    assert (g_h[0, -4:] == 0).all()  # padding positions get no gradient


def test_fused_loss_without_grad():
    weight = torch.randn(10, 4)
    with torch.no_grad():
        out = projection_loss(torch.randn(5, 4), weight, torch.tensor([1, 2, 3, 0, 4]), epsilon=0.1, pad_id=PAD)
    assert out.tokens == 4 and math.isfinite(out.loss.item())


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_dense_loss_equals_the_chunked_one_with_gradients(eps):
    """The GPU / compiled path (every row projected, PAD rows weighing 0, no host sync) gives the
    chunked path's loss, NLL, token count and gradients, in the paper's convention."""
    from repro.train.loss import dense_projection_loss

    torch.manual_seed(0)
    hidden = torch.randn(3, 7, 16, dtype=torch.float64)
    weight = torch.randn(23, 16, dtype=torch.float64)
    target = torch.randint(1, 23, (3, 7))
    target[0, 5:] = PAD
    target[2, 2:] = PAD
    grads = []
    for which in ("chunked", "dense"):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        if which == "chunked":
            out = projection_loss(h, w, target, epsilon=eps, pad_id=PAD, scale=0.5, chunk_rows=4)
            loss, nll, tokens = out.loss, out.nll_sum, out.tokens
        else:
            loss, nll, tokens = dense_projection_loss(h, w, target, epsilon=eps, pad_id=PAD, scale=torch.tensor(0.5))
        loss.backward()
        grads.append((loss.item(), float(nll), int(tokens), h.grad, w.grad))
    (l1, n1, t1, gh1, gw1), (l2, n2, t2, gh2, gw2) = grads
    ref_loss, ref_nll = label_smoothed_nll(hidden.reshape(-1, 16) @ weight.t(), target.reshape(-1), eps, PAD)
    assert t1 == t2 == int((target != PAD).sum())
    assert l2 == pytest.approx(0.5 * ref_loss.item(), rel=1e-9) and l1 == pytest.approx(l2, rel=1e-6)
    assert n2 == pytest.approx(ref_nll.item(), rel=1e-9) and n1 == pytest.approx(n2, rel=1e-6)
    assert torch.allclose(gh1, gh2, atol=1e-6) and torch.allclose(gw1, gw2, atol=1e-6)
    assert gh2[0, 5:].abs().max() == 0   # PAD rows get no gradient


def test_dense_loss_ignores_a_non_finite_pad_row():
    from repro.train.loss import dense_projection_loss

    hidden = torch.ones(2, 4)
    hidden[1] = float("nan")   # a PAD position whose hidden state went bad must not poison the loss
    loss, nll, tokens = dense_projection_loss(hidden, torch.randn(9, 4), torch.tensor([3, PAD]), epsilon=0.1,
                                              pad_id=PAD)
    assert math.isfinite(loss.item()) and math.isfinite(nll.item()) and tokens.item() == 1


def _backward_graph(fn, *args):
    """The backward graph that ``torch.compile`` hands its compiler for ``fn(*args).backward()``."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs = {}

    def keep(name):
        def compiler(gm, _inputs):
            graphs[name] = gm
            return make_boxed_func(gm.forward)
        return compiler

    compiled = torch.compile(fn, backend=aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward")),
                             dynamic=False, fullgraph=True)
    compiled(*args).backward()
    return graphs["backward"]


def test_the_dense_loss_gradient_is_one_element_wise_pass():
    """Issue 42: the logits' gradient over 25000 x 37000 values, compiled, is formed by element-wise
    ops only, which inductor fuses into one kernel reading the logits once and writing their
    gradient once; no (n, V) op of the backward graph is a scatter, a gather's or a select's backward,
    or a fill of zeros (autograd's own formula for the forward scatters into a zeroed fp32 buffer)."""
    from repro.train.loss import dense_projection_loss

    n, vocab, width = 6, 40, 8
    hidden = torch.randn(n, width, requires_grad=True)
    weight = torch.randn(vocab, width, requires_grad=True)
    target = torch.tensor([5, 7, PAD, 9, 11, 13])
    graph = _backward_graph(lambda h, w: dense_projection_loss(h, w, target, epsilon=0.1, pad_id=PAD)[0],
                            hidden, weight)
    wide = []
    for node in graph.graph.nodes:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and val.numel() == n * vocab:
            wide.append(node.target)
    assert wide, "no (n, V) op found in the backward graph"
    allowed = {torch.ops.aten.mm.default, torch.ops.aten.t.default, torch.ops.aten.permute.default,
               torch.ops.aten.view.default, torch.ops.aten.expand.default}
    not_element_wise = [str(op) for op in wide
                        if op not in allowed and torch.Tag.pointwise not in getattr(op, "tags", ())]
    assert not not_element_wise, f"the logits' gradient is not element-wise: {not_element_wise}"


def test_the_dense_loss_under_bf16_autocast_stays_within_its_stated_tolerance():
    """The dense loss as a GPU job runs it (bf16 products under autocast, fp32 softmax): loss within
    1e-2 relative and gradients within 2e-2 of the largest gradient, against the fp64 reference."""
    from repro.train.loss import dense_projection_loss

    torch.manual_seed(1)
    hidden = torch.randn(32, 64, dtype=torch.float64)
    weight = torch.randn(300, 64, dtype=torch.float64) / 8
    target = torch.randint(1, 300, (32,))
    target[-5:] = PAD
    results = []
    for mixed in (False, True):
        h = (hidden if not mixed else hidden.float()).clone().requires_grad_()
        w = (weight if not mixed else weight.float()).clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            loss, nll, _ = dense_projection_loss(h, w, target, epsilon=0.1, pad_id=PAD)
        loss.backward()
        results.append((float(loss), float(nll), h.grad.double(), w.grad.double()))
    (ref_loss, ref_nll, ref_gh, ref_gw), (loss, nll, gh, gw) = results
    assert loss == pytest.approx(ref_loss, rel=1e-2) and nll == pytest.approx(ref_nll, rel=1e-2)
    for got, want in ((gh, ref_gh), (gw, ref_gw)):
        assert torch.isfinite(got).all() and (got - want).abs().max() <= 2e-2 * want.abs().max()
    assert gh[-5:].abs().max() == 0


def test_a_non_finite_pad_row_gives_no_non_finite_gradient():
    """A PAD position whose hidden state went bad gets a zero gradient, not 0 x NaN."""
    from repro.train.loss import dense_projection_loss

    hidden = torch.ones(2, 4)
    hidden[1] = float("nan")
    hidden.requires_grad_()
    loss, _, _ = dense_projection_loss(hidden, torch.randn(9, 4), torch.tensor([3, PAD]), epsilon=0.1, pad_id=PAD)
    loss.backward()
    assert torch.isfinite(hidden.grad).all() and hidden.grad[1].abs().max() == 0
