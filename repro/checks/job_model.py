"""The model and the weights a job's training loop builds, observed: which normalisations and which
random drops its forward pass makes (Sections 3.1 and 5.4), and the dtypes it keeps in mixed
precision (master weights and Adam's state in fp32)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from repro.checks.jobs import SIZE, job_config, own, shrunk
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import max_abs_diff
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.model.precision import Precision
from repro.runtime import Runtime
from repro.train.loop import build

_NORMS = {F.layer_norm, torch.layer_norm, torch.native_layer_norm, F.rms_norm, F.group_norm, F.batch_norm,
          F.instance_norm}


class _CountNorms(TorchFunctionMode):
    """Counts the normalisations a forward pass applies (any norm, module or functional)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _NORMS:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _job_model(claim: Claim) -> tuple[torch.nn.Module, int]:
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende"), claim.params.get("job")))
    return build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"]).model, cfg.model_config().n_layers


def _tokens(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(4, SIZE["vocab_size"], (2, 7), generator=gen),
            torch.randint(4, SIZE["vocab_size"], (2, 6), generator=gen))


@checker("run.norms_per_layer")
def norms_per_layer(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 3.1: each sub-layer's output is LayerNorm(x + Sublayer(x)), and nothing else is
    normalised: the normalisations the job's model (the loop's, shrunk in size only) applies in
    one pass of its encoder and one of its decoder, divided by N. Measured: [encoder, decoder]
    per layer (the paper: 2 and 3; a norm at the top of a stack shows as 1/N more)."""
    own(ctx)
    model, layers = _job_model(claim)
    model.eval()
    src, tgt = _tokens(ctx.seed)
    with torch.no_grad():
        with _CountNorms() as enc:
            memory, src_mask = model.encode(src)
        with _CountNorms() as dec:
            model.decode(tgt, memory, src_mask)
    measured = [enc.count / layers, dec.count / layers]
    return Measurement([round(v, 4) for v in measured], detail=(
        f"{enc.count} normalisations in the encoder's pass, {dec.count} in the decoder's, N = {layers}"))


@checker("run.dropout_places")
def dropout_places(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.4 puts dropout on the output of each sub-layer and on the sums of the embeddings
    and positional encodings, nowhere else (no dropout inside the feed-forward network or on the
    attention weights). The job's model (the loop's, shrunk in size only) in train mode, with the
    dropouts at those places (each sub-layer connection's and the embeddings') set to rate 0:
    nothing random may be left. Measured: max |train-mode output - eval-mode output|."""
    own(ctx)
    model, _ = _job_model(claim)
    stated = [model.embed_dropout] + [sub.dropout for stack in (model.encoder_layers, model.decoder_layers)
                                      for layer in stack for sub in layer.sublayers]
    for module in stated:
        module.p = 0.0
    src, tgt = _tokens(ctx.seed)
    torch.manual_seed(ctx.seed)
    with torch.no_grad():
        model.eval()
        want = model(src, tgt)
        model.train()
        got = model(src, tgt)
        model.eval()
    err = max_abs_diff(got, want, "the train-mode logits")
    return Measurement(err, detail=f"{len(stated)} stated dropouts at rate 0: train-mode logits differ from eval-mode "
                                   f"by {err:.1e}")


@checker("run.master_weights")
def master_weights(claim: Claim, ctx: CheckContext) -> Measurement:
    """Mixed precision keeps fp32 master weights: the job's loop built with bf16 autocast (the
    precision ``auto`` picks on a GPU with bf16) makes one update (``Trainer.update``); the
    parameters, the gradients Adam is handed, Adam's moments and the checkpointed weights must
    all be fp32. Measured: the dtypes found that are not fp32 (none)."""
    own(ctx)
    cfg = shrunk(job_config(claim.params.get("experiment", "table2-base-ende"))).replace(precision="bf16")
    # bf16 as asked (no CPU probe of the machine's speed): the loop's model, objective and Adam in mixed precision
    runtime = Runtime(torch.device("cpu"), Precision("bf16", "asked for", "cpu"))
    trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"], runtime=runtime)
    seen: set[str] = set()

    def hook(optimizer, args, kwargs) -> None:
        seen.update(f"gradient {p.grad.dtype}" for g in optimizer.param_groups for p in g["params"] if p.grad is not None)

    handle = trainer.optimizer.register_step_pre_hook(hook)
    try:
        src, tgt = _tokens(ctx.seed)
        trainer.update([collate(list(zip(src.tolist(), tgt.tolist())))], 1)
    finally:
        handle.remove()
    found = seen | {f"parameter {p.dtype}" for p in trainer.model.parameters()}
    found |= {f"Adam's {k} {v.dtype}" for s in trainer.optimizer.state.values() for k, v in s.items()
              if isinstance(v, torch.Tensor) and k != "step"}
    found |= {f"state_dict {v.dtype}" for v in trainer.model.state_dict().values() if v.is_floating_point()}
    wrong = sorted(f for f in found if not f.endswith(str(torch.float32)))
    autocast = trainer.precision.mixed
    return Measurement(len(wrong), False if not autocast else None, (
        f"precision {trainer.precision.name}: " + (", ".join(sorted(found)) if not wrong else "not fp32: " + ", ".join(wrong))
        + ("" if autocast else "; the loop did not run under bf16 autocast")))
