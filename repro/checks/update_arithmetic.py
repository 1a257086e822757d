"""Section 5.1 and 5.4's arithmetic as the training loop runs it, set against sums made here.

The loop's update (:meth:`repro.train.loop.Trainer.update`, the job's objective, Adam's step) is
watched at the optimizer's step: the gradient it is about to apply, the loss and token counts it
reports. The reference is computed in this module from the text and the model's logits alone:
the label-smoothed cross-entropy (``1 - eps`` on the reference token, nothing on PAD, ``eps / (V -
2)`` on each other token) summed over every target token of the update, EOS included, divided by
their number; the padding share (logged with each update) counted as the PAD positions of the
update's passes. Nothing of :mod:`repro.train.loss` or :mod:`repro.train.update_step` is reused.
"""

from __future__ import annotations

import numpy as np
import torch

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite, max_abs, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.data.vocab import EOS, PAD
from repro.train.loop import build
from repro.train.update_step import TrainingDiverged
from repro.train.compiled import CompiledObjective
from repro.train.loss import TranslationLoss

#: The loss scale handed to the objective (the loop's world size / target tokens): both forms must apply it.
SCALE = 0.25

#: Passes of unequal token counts: one update of nine pairs split as the loop might split it.
SPLIT = (1, 2, 6)


def random_pairs(gen: torch.Generator, count: int, vocab: int = SIZE["vocab_size"]) -> list[tuple[list[int], list[int]]]:
    """``count`` pairs of ordinary token ids (no PAD, BOS, EOS or UNK), of lengths 2 to 13."""
    return [(torch.randint(4, vocab, (int(n),), generator=gen).tolist(),
             torch.randint(4, vocab, (int(m),), generator=gen).tolist())
            for n, m in torch.randint(2, 14, (count, 2), generator=gen)]


def reference_losses(logits: torch.Tensor, targets: list[list[int]], epsilon: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(sum of H(q, p), sum of -log p(y), tokens) over the targets of a batch, each target followed
    by EOS, from ``logits`` (batch, length, V): q written out entry by entry (module docstring)."""
    vocab = logits.size(-1)
    logp = logits.double().log_softmax(-1)
    loss = logp.new_zeros(())
    nll = logp.new_zeros(())
    tokens = 0
    for row, target in enumerate(targets):
        for pos, y in enumerate([*target, EOS]):
            q = torch.full((vocab,), epsilon / (vocab - 2), dtype=torch.float64)
            q[PAD] = 0.0
            q[y] = 1.0 - epsilon
            loss = loss - (q * logp[row, pos]).sum()
            nll = nll - logp[row, pos, y]
            tokens += 1
    return loss, nll, tokens


def _captured_step(trainer) -> tuple[dict[str, torch.Tensor], list]:
    """The gradients the optimizer holds when it steps (filled by a step pre-hook)."""
    seen: dict[str, torch.Tensor] = {}
    names = {id(p): n for n, p in trainer.model.named_parameters()}

    def hook(optimizer, args, kwargs) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    seen[names.get(id(p), str(id(p)))] = p.grad.detach().double().clone()

    return seen, [trainer.optimizer.register_step_pre_hook(hook)]


@checker("run.update_arithmetic")
def update_arithmetic(claim: Claim, ctx: CheckContext) -> Measurement:
    """One update of the job's loop (``Trainer.update``: its objective, its accumulation, Adam's
    step) on nine pairs in passes of 1, 2 and 6 pairs, dropout off. Observed at the optimizer's
    step: the gradient it applies; reported by the update: its loss and NLL per token, its source
    and target tokens, the share of its passes' positions that is PAD. Against the module's
    reference: the gradient of the mean smoothed loss over the update's target tokens (EOS counted),
    the tokens counted from the pairs, the PAD positions counted in the passes. Measured: the largest
    gradient difference relative to the largest gradient; a reported loss, count or padding share
    that differs fails the claim."""
    own(ctx)
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende")))
    examples = random_pairs(torch.Generator().manual_seed(ctx.seed), sum(SPLIT))
    bounds = np.cumsum([0, *SPLIT]).tolist()
    micro = [collate(examples[a:b]) for a, b in zip(bounds, bounds[1:])]

    reference = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"]).model.eval()  # seeded: the loop's initial model
    loss = nll = torch.zeros((), dtype=torch.float64)
    tokens = 0
    for batch, (a, b) in zip(micro, zip(bounds, bounds[1:])):
        logits = reference(batch.src, batch.tgt_in)
        part = reference_losses(logits, [t for _, t in examples[a:b]], cfg.label_smoothing)
        loss, nll, tokens = loss + part[0], nll + part[1], tokens + part[2]
    (loss / tokens).backward()
    want = {n: p.grad.double() for n, p in reference.named_parameters() if p.grad is not None}
    scale = max_abs(torch.cat([g.flatten() for g in want.values()]), "the reference gradient")
    src_tokens = sum(len(s) for s, _ in examples)
    # the passes' PAD positions counted in their tensors, both sides (the share the update reports, logged)
    pads = sum(int((b.src == PAD).sum()) + int((b.tgt_out == PAD).sum()) for b in micro)
    want_padding = pads / sum(b.src.numel() + b.tgt_out.numel() for b in micro)

    trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"])
    trainer.model.eval()
    seen, handles = _captured_step(trainer)
    try:
        stats = trainer.update(micro, 1)
    except TrainingDiverged as err:
        return Measurement(None, False, f"the loop's update stopped on a finite loss: {err}")
    finally:
        for handle in handles:
            handle.remove()
    if not seen:
        return Measurement(None, False, "the optimizer stepped with no gradient")
    worst = max(max_abs_diff(seen.get(n, torch.zeros_like(g)), g, f"the gradient of {n}") for n, g in want.items())
    worst /= scale
    want_loss, want_nll = float(loss.detach()) / tokens, float(nll) / tokens
    finite([stats.loss_per_token, stats.nll_per_token], "the update's reported loss")
    problems = []
    if abs(stats.loss_per_token / want_loss - 1) > 1e-5:
        problems.append(f"reported loss per token {stats.loss_per_token:.6f}, the mean smoothed loss {want_loss:.6f}")
    if abs(stats.nll_per_token / want_nll - 1) > 1e-5:
        problems.append(f"reported NLL per token {stats.nll_per_token:.6f}, the mean NLL {want_nll:.6f}")
    if (stats.src_tokens, stats.tgt_tokens) != (src_tokens, tokens):
        problems.append(f"reported tokens {stats.src_tokens} + {stats.tgt_tokens}, counted from the pairs "
                        f"{src_tokens} + {tokens} (targets with EOS)")
    if not abs(finite(stats.padding, "the update's reported padding share") - want_padding) <= 1e-9:
        problems.append(f"reported padding share {stats.padding:.4f}, PAD positions counted in the passes "
                        f"{want_padding:.4f}")
    return Measurement(worst, False if problems else None, (
        f"passes of {' + '.join(map(str, SPLIT))} pairs, {tokens} target tokens with EOS: gradient at Adam's step "
        f"against the mean smoothed loss's, largest difference {worst:.1e} of the largest gradient; loss per token "
        f"{stats.loss_per_token:.5f} (reference {want_loss:.5f})" + ("; " + "; ".join(problems) if problems else "")))


@checker("run.smoothing_spread")
def smoothing_spread(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.4's smoothing in each form of the projection loss the loop can run (``chunked``:
    the fused kernel of the CPU; ``dense``: the GPU's, eager and as ``torch.compile`` traces it into
    the compiled objective, forward and backward, with its own backward formula), inside the job's
    objective (:class:`~repro.train.loss.TranslationLoss`): the target distribution q read off
    the gradient of the logits (softmax(z) - q) against q written out here (``1 - eps`` on the
    label, 0 on PAD, ``eps / (V - 2)`` on every other token), on a vocabulary of 12 where a
    share of 1/V shows; the loss value must be H(q, p) times the scale the loop hands the
    objective (and its gradient so scaled), its NLL -log p(y) unscaled. Measured: the largest
    |q - q_ref| over the three."""
    own(ctx)
    epsilon = job_config(claim.params.get("experiment", "table2-base-ende")).label_smoothing
    vocab, width = 12, 16   # width >= V: the gradient of the hidden states gives back that of the logits
    gen = torch.Generator().manual_seed(ctx.seed)
    weight = torch.randn(vocab, width, generator=gen, dtype=torch.float64)
    target = torch.randint(4, vocab, (2, 5), generator=gen)
    target[1, 3:] = PAD
    flat = target.reshape(-1)
    keep = flat != PAD
    q_ref = torch.full((int(keep.sum()), vocab), epsilon / (vocab - 2), dtype=torch.float64)
    q_ref[:, PAD] = 0.0
    q_ref.scatter_(1, flat[keep][:, None], 1.0 - epsilon)
    start = torch.randn(2, 5, width, generator=gen, dtype=torch.float64)
    worst, rows = 0.0, []
    for form in ("chunked", "dense", "dense, compiled"):
        impl = form.split(",")[0]
        hidden = start.clone().requires_grad_(True)
        objective = TranslationLoss(_ProjectionOnly(hidden, weight), epsilon, impl=impl)
        if form.endswith("compiled"):   # the graph a compiled job's objective traces, forward and backward
            objective = CompiledObjective(objective, backend="aot_eager")
        # the scale the loop hands it (world size / the update's target tokens), as a device tensor
        loss, nll, _ = objective(target, target, target, torch.tensor(SCALE))
        loss = loss / SCALE
        (grad_hidden,) = torch.autograd.grad(loss, [hidden])
        finite(grad_hidden, f"the {form} loss's gradient")
        # dL/dh = (softmax(z) - q) W, W of full row rank: dL/dz = dL/dh W^T (W W^T)^-1
        grad = (grad_hidden.reshape(-1, width) @ weight.t() @ torch.linalg.inv(weight @ weight.t()))
        logp = (start.reshape(-1, width) @ weight.t()).log_softmax(-1)
        q = logp[keep].exp() - grad[keep]
        pad_grad = float(grad[~keep].abs().max())
        diff = float((q - q_ref).abs().max())
        h_ref = float(-(q_ref * logp[keep]).sum())
        value_err = abs(float(loss.detach()) - h_ref) / abs(h_ref)
        nll_ref = float(-logp[keep].gather(1, flat[keep][:, None]).sum())
        nll_err = abs(float(nll) - nll_ref) / abs(nll_ref)
        worst = max(worst, diff, pad_grad, value_err, nll_err)
        rows.append(f"{form}: max |q - q_ref| {diff:.1e}, gradient at padding {pad_grad:.1e}, loss against "
                    f"H(q_ref, p) {value_err:.1e} relative, NLL {nll_err:.1e} relative")
    return Measurement(worst, detail=f"eps {epsilon}, V = {vocab}: " + "; ".join(rows))


class _ProjectionOnly(torch.nn.Module):
    """A model whose decoder gives fixed hidden states: in the objective only the projection
    (``weight``, bias-free as Section 3.4 ties it) and the loss run."""

    def __init__(self, hidden: torch.Tensor, weight: torch.Tensor) -> None:
        super().__init__()
        self.hidden = hidden
        self.output_projection = torch.nn.Linear(weight.size(1), weight.size(0), bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.output_projection.weight.copy_(weight)
        self.cfg = _PadOnly()

    def encode(self, src: torch.Tensor) -> tuple[None, None]:
        return None, None

    def decode(self, tgt_in: torch.Tensor, memory: None, src_mask: None) -> torch.Tensor:
        return self.hidden


class _PadOnly:
    pad_id = PAD
