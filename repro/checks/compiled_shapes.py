"""The compiled objective adds nothing to the loss (Sections 5.1 and 5.4, on the path a compiled job runs).

A job that compiles its objective (:mod:`repro.train.compiled`) brings every pass to a shape its one
graph covers before the call: a PAD column to a side of one position, a filler row to a pass of one
sentence. What it adds must weigh nothing: the loss, the NLL and every weight's gradient of the
compiled objective equal those of the eager objective on the same pass, for passes of every shape the
batcher can make (one sentence, a one-token source, a target of EOS alone, and an ordinary pass as a
control). A filler row or a padding column that is trained, a filler whose source attends to nothing
(NaN), or a rescaled pass fails the claim.
"""

from __future__ import annotations

import torch

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.train.compiled import CompiledObjective
from repro.train.loop import build
from repro.train.loss import TranslationLoss, loss_impl_for

#: Passes of the shapes the compiled objective pads (source, target pairs; a target of EOS alone is []).
PASSES = {
    "one sentence, target of EOS alone": [([5, 6, 7], [])],
    "one sentence, one-token source": [([9], [6, 7, 8, 10])],
    "two sentences, target of EOS alone": [([5, 6], []), ([7, 8, 9], [])],
    "two sentences (no padding added)": [([5, 6, 7], [8, 9]), ([10, 11], [12, 13, 14])],
}


def _figures(objective: torch.nn.Module, model: torch.nn.Module, batch, scale: float) -> list[torch.Tensor]:
    """(loss, NLL, each weight's gradient) of one call, the gradients zeroed before it."""
    model.zero_grad(set_to_none=True)
    loss, nll, _ = objective(batch.src, batch.tgt_in, batch.tgt_out, torch.tensor(scale))
    loss.backward()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    return [loss.detach().double(), nll.detach().double(), *(g.detach().double() for g in grads)]


@checker("run.compiled_shapes")
def compiled_shapes(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's objective (its model as :func:`repro.train.loop.build` makes it, dropout off; its
    loss in the form a compiled job runs) eager and as
    :class:`~repro.train.compiled.CompiledObjective` (its forward: the shape padding a compiled job
    adds, then the objective) on :data:`PASSES`, at the
    scale the loop hands it. Measured: the largest difference of the loss or the NLL relative to
    itself, or of any gradient relative to the largest gradient."""
    own(ctx)
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende")))
    trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"])   # seeded: the loop's initial model
    model = trainer.model.eval()
    # the objective a compiled job builds: its loss in the form compiled jobs run (repro.train.loss)
    eager = TranslationLoss(model, cfg.label_smoothing, impl=loss_impl_for(torch.device("cpu"), compiled=True))
    compiled = CompiledObjective(eager)
    # torch.compile's graph computes what the module computes (dynamo's own tests; the compiled loss
    # form is traced by sec5.label-smoothing.spread); what is repro's here is the padding its forward
    # adds before that call, so the call runs the module itself: no tracing, a fraction of a second
    object.__setattr__(compiled, "_compiled", eager)
    worst, rows = 0.0, []
    for name, pairs in PASSES.items():
        batch = collate(pairs)
        scale = 1.0 / batch.tgt_tokens
        want = _figures(eager, model, batch, scale)
        got = _figures(compiled, model, batch, scale)
        labels = ["loss", "NLL", *(f"gradient of {n}" for n, _ in model.named_parameters())]
        for label, w, g in zip(labels, want, got):
            finite(g, f"the compiled objective's {label} ({name})")
            finite(w, f"the eager objective's {label} ({name})")
        # loss and NLL against themselves, the gradients against the largest gradient (a weight whose
        # gradient vanishes, as the key projection's bias does, has only rounding in it)
        largest = max(float(w.abs().max()) for w in want[2:])
        diffs = {"loss": float((got[0] - want[0]).abs()) / max(float(want[0].abs()), 1e-12),
                 "NLL": float((got[1] - want[1]).abs()) / max(float(want[1].abs()), 1e-12),
                 "gradients": max(float((g - w).abs().max()) for w, g in zip(want[2:], got[2:])) / max(largest, 1e-12)}
        label, diff = max(diffs.items(), key=lambda d: d[1])
        worst = max(worst, diff)
        rows.append(f"{name} ({tuple(batch.src.shape)} source, {tuple(batch.tgt_out.shape)} target): largest "
                    f"relative difference {diff:.1e} ({label})")
    return Measurement(worst, detail="compiled against eager objective: " + "; ".join(rows))
