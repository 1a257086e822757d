"""bf16 mixed precision in training: the fused loss under autocast, gradients close to fp32,
fp32 master weights, Adam state and checkpoints, exact resume, checkpoints that load in either."""


import pytest
import torch

from repro.model import Transformer, TransformerConfig
from repro.model.precision import Precision
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.loop import run
from repro.train.loss import TranslationLoss, label_smoothed_nll, projection_loss
from tests.train.test_loop import VOCAB, quiet, tiny_config, toy_examples

BF16, FP32 = Precision("bf16", "test"), Precision("fp32", "test")

# bf16 keeps 8 significant bits: a relative rounding error of 2^-9 ~ 0.2% per product operand.
# Through two layers of products, softmaxes and layer norms the errors compound to a few percent
# of a gradient's norm, while a wrong gradient (a sign, a missing term, a lost chunk) is off by
# order one. Hence: loss within 1%, each sizeable gradient within 10% relative L2 error and a
# cosine above 0.99, the whole gradient within 5%.
LOSS_RTOL, GRAD_RTOL, TOTAL_RTOL, MIN_COSINE = 1e-2, 0.10, 0.05, 0.99


def small_model(seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(src_vocab_size=300, tgt_vocab_size=300, n_layers=2, d_model=64, d_ff=128, n_heads=4,
                            dropout=0.0)
    return Transformer(cfg)


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 300, (4, 10), generator=g)
    tgt = torch.randint(4, 300, (4, 11), generator=g)
    src[0, 7:] = 0
    tgt[1, 8:] = 0
    return src, tgt[:, :-1], tgt[:, 1:]


def loss_and_grads(model, precision, chunk_rows=16):
    objective = TranslationLoss(model, 0.1, chunk_rows=chunk_rows)
    model.zero_grad()
    src, tgt_in, tgt_out = batch()
    with precision.autocast():
        loss, _, tokens = objective(src, tgt_in, tgt_out, 1.0 / 30)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_bf16_loss_and_gradients_are_close_to_fp32():
    model = small_model()
    l32, g32 = loss_and_grads(model, FP32)
    l16, g16 = loss_and_grads(model, BF16)
    assert l16 == pytest.approx(l32, rel=LOSS_RTOL)
    assert all(g.dtype == torch.float32 for g in g16.values())        # master gradients stay fp32
    biggest = max(g.norm() for g in g32.values())
    for name, g in g32.items():
        if g.norm() < 1e-3 * biggest:   # e.g. the key bias, whose exact gradient is 0 (softmax shift)
            continue
        err = (g16[name] - g).norm() / g.norm()
        cos = torch.nn.functional.cosine_similarity(g16[name].flatten(), g.flatten(), dim=0)
        assert err < GRAD_RTOL and cos > MIN_COSINE, (name, float(err), float(cos))
    flat32 = torch.cat([g.flatten() for g in g32.values()])
    flat16 = torch.cat([g16[n].flatten() for n in g32])
    assert (flat16 - flat32).norm() / flat32.norm() < TOTAL_RTOL


def test_bf16_actually_runs_in_bf16():
    """The closeness test has teeth only if bf16 changes something: the losses differ, a little."""
    model = small_model()
    l32, g32 = loss_and_grads(model, FP32)
    l16, g16 = loss_and_grads(model, BF16)
    assert l16 != l32
    assert not torch.equal(g16["src_embed.lut.weight"], g32["src_embed.lut.weight"])


@pytest.mark.parametrize("chunk_rows", [5, 1024])
def test_fused_loss_under_autocast_matches_the_fp32_reference(chunk_rows):
    torch.manual_seed(0)
    hidden = torch.randn(37, 48, requires_grad=True)
    weight = (torch.randn(200, 48) * 0.2).requires_grad_()
    target = torch.randint(0, 200, (37,))
    target[::6] = 0
    ref_loss, ref_nll = label_smoothed_nll(hidden @ weight.t(), target, 0.1, 0)
    ref_loss.backward()
    ref_h, ref_w = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = projection_loss(hidden, weight, target, epsilon=0.1, pad_id=0, chunk_rows=chunk_rows)
    out.loss.backward()
    assert out.loss.dtype == torch.float32 and hidden.grad.dtype == weight.grad.dtype == torch.float32
    assert out.loss.item() == pytest.approx(ref_loss.item(), rel=LOSS_RTOL)
    assert out.nll == pytest.approx(ref_nll.item(), rel=LOSS_RTOL)
    for got, want in ((hidden.grad, ref_h), (weight.grad, ref_w)):
        assert (got - want).norm() / want.norm() < GRAD_RTOL


def test_bf16_training_resumes_exactly_and_keeps_fp32_state(tmp_path):
    examples = toy_examples()
    full = run(tiny_config(tmp_path / "full", precision="bf16"), examples, VOCAB, log=quiet)
    assert full.extra["precision"] == "bf16" and full.extra["precision_reason"]

    class Killed(Exception):
        pass

    def kill_at_5(step):
        if step == 5:
            raise Killed

    cfg = tiny_config(tmp_path / "cut", precision="bf16")
    with pytest.raises(Killed):
        run(cfg, examples, VOCAB, on_step=kill_at_5, log=quiet)
    resumed = run(cfg, examples, VOCAB, log=quiet)
    assert resumed.resumed_from == 4 and resumed.steps == 6
    a = load_checkpoint(list_checkpoints(tmp_path / "full")[-1])
    b = load_checkpoint(list_checkpoints(tmp_path / "cut")[-1])
    for key in a["model"]:
        assert a["model"][key].dtype in (torch.float32, torch.int64, torch.bool), key
        assert torch.equal(a["model"][key], b["model"][key]), key
    for state in a["optimizer"]["state"].values():
        assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32
    # and the bf16 run really differs from an fp32 one on the same data
    fp32 = run(tiny_config(tmp_path / "fp32", precision="fp32"), examples, VOCAB, log=quiet)
    c = load_checkpoint(list_checkpoints(tmp_path / "fp32")[-1])
    assert fp32.extra["precision"] == "fp32"
    assert any(not torch.equal(a["model"][k], c["model"][k]) for k in a["model"])


def test_a_checkpoint_resumes_in_the_other_precision(tmp_path):
    """Checkpoints are fp32 whatever the run computed in: an fp32 run continues in bf16."""
    examples = toy_examples()
    run(tiny_config(tmp_path / "run", precision="fp32", max_steps=4), examples, VOCAB, log=quiet)
    resumed = run(tiny_config(tmp_path / "run", precision="bf16"), examples, VOCAB, log=quiet)
    assert resumed.resumed_from == 4 and resumed.steps == 6 and resumed.extra["precision"] == "bf16"
