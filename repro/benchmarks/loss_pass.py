"""The dense loss's passes over the logits: repro's backward against autograd's own formula.

Section 5.4's label-smoothed loss over the shared vocabulary touches every logit of the update
(25000 x 37000 at the paper's size) in its forward and backward passes: on a GPU its time is
memory traffic. :func:`repro.train.loss.dense_projection_loss` forms the logits' gradient as one
element-wise expression (:class:`repro.train.loss._SmoothedCrossEntropy`); written for autograd
instead (``gather`` and ``select`` of the logits, whose backward scatters into a zeroed fp32 buffer),
the same loss costs two more passes. This times both on ``--device``, forward and backward of
the loss on given logits (bf16 where the precision is mixed, as the product leaves them), eager
and under ``torch.compile``, in alternating rounds, and reports
for each the ops of the compiled backward graph that produce a (tokens x V) tensor and are not
element-wise (the passes inductor cannot fuse).

    repro bench loss_pass [--device cuda] [--tokens 25000] [--vocab 37000] [--rounds 5] [--precision bf16] [--no-compile]

Defaults on a CPU: 2048 tokens, the paper's 37000-word vocabulary.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from repro.argtypes import OneLineParser, positive_int
from repro.benchmarks.machine import environment, parse_benchmark_args, publish, ratio_spread, spread, synchronize
from repro.cli_flags import device_name
from repro.model.precision import PRECISIONS
from repro.runtime import Runtime
from repro.train.loss import smoothed_cross_entropy


def autograd_formula(logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int,
                     scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """The same loss as :func:`smoothed_cross_entropy`, its gradient left to autograd (the form
    repro ran before issue 42's change): the reference of this benchmark."""
    target = target.reshape(-1)
    vocab = logits.size(-1)
    z = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    lse = z.logsumexp(-1)
    nll = lse - z.gather(1, target[:, None]).squeeze(1)
    others = (vocab - 1) * lse - (z.sum(-1) - z[:, pad_id]) - nll
    loss = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
    pad = target == pad_id
    return loss.masked_fill(pad, 0.0).sum() * scale, nll.detach().masked_fill(pad, 0.0).sum(), (~pad).sum()


FORMS: dict[str, Callable[..., tuple[Tensor, Tensor, Tensor]]] = {
    "repro (one-pass backward)": smoothed_cross_entropy, "autograd's formula": autograd_formula}


def wide_backward_ops(form: Callable, logits: Tensor, target: Tensor) -> list[str]:
    """The ops of ``form``'s compiled backward graph that make a (tokens x V) tensor and are neither
    element-wise nor a matrix product or view: each one a pass inductor does not fuse."""
    graphs: dict[str, torch.fx.GraphModule] = {}

    def keep(gm, _inputs):
        graphs["backward"] = gm
        return make_boxed_func(gm.forward)

    def forward_only(gm, _inputs):
        return make_boxed_func(gm.forward)

    leaf = logits.detach().clone().requires_grad_()
    compiled = torch.compile(lambda z: form(z, target, epsilon=0.1, pad_id=0)[0],
                             backend=aot_autograd(fw_compiler=forward_only, bw_compiler=keep), fullgraph=True)
    compiled(leaf).backward()
    wide = logits.numel()
    aten = torch.ops.aten
    structural = {aten.mm.default, aten.t.default, aten.permute.default, aten.view.default, aten.expand.default,
                  aten._to_copy.default}   # a dtype cast: element-wise, fused
    return [str(node.target) for node in graphs["backward"].graph.nodes
            if node.op == "call_function" and isinstance(node.meta.get("val"), Tensor)
            and node.meta["val"].numel() == wide and node.target not in structural
            and torch.Tag.pointwise not in getattr(node.target, "tags", ())]


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=device_name, default="auto")
    parser.add_argument("--tokens", type=positive_int, default=None, help="rows of the logits (default: 25000 GPU, 2048 CPU)")
    parser.add_argument("--vocab", type=positive_int, default=37000)
    parser.add_argument("--rounds", type=positive_int, default=5)
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help="auto: bf16 on a GPU that computes it")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    args = parse_benchmark_args(parser, argv)
    runtime = Runtime.resolve(args.device, args.precision, dims=(512, 2048))
    device, gpu = runtime.device, runtime.on_gpu
    tokens = args.tokens or (25000 if gpu else 2048)
    gen = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if runtime.precision.mixed else torch.float32   # the product's dtype under autocast
    logits = (3 * torch.randn(tokens, args.vocab, generator=gen)).to(device=device, dtype=dtype).requires_grad_()
    target = torch.randint(1, args.vocab, (tokens,), generator=gen)
    target[-tokens // 20:] = 0   # 5 % padding
    target = target.to(device)

    def step(form: Callable) -> Callable[[], None]:
        def run() -> None:
            logits.grad = None
            form(logits, target, epsilon=0.1, pad_id=0)[0].backward()
        return run

    cases: dict[str, Callable[[], None]] = {}
    for name, form in FORMS.items():
        cases[f"{name}, eager"] = step(form)
        if args.compile:
            cases[f"{name}, compiled"] = step(torch.compile(form, dynamic=False))
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(1 + args.rounds):   # the first round compiles: not kept
        for name, fn in cases.items():
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            if i:
                seconds[name].append(time.perf_counter() - start)
    found = {}
    for name, form in FORMS.items():   # the two forms' values, eager, on the same logits
        logits.grad = None
        value = form(logits, target, epsilon=0.1, pad_id=0)[0]
        value.backward()
        found[name] = (float(value), logits.grad.float().clone())
    (mine, mine_grad), (ref, ref_grad) = found.values()
    out: dict[str, Any] = {
        "benchmark": "loss_pass", **environment(args.note), "device": str(device), "precision": runtime.precision.name,
        "logits": f"{tokens} x {args.vocab}, {dtype} (5 % PAD rows), forward and backward of the loss alone",
        "cases": {name: {"s": round(statistics.median(v), 5), "spread": spread(v, 5)} for name, v in seconds.items()},
        "agreement": {"loss_relative": abs(mine - ref) / abs(ref),
                      "gradient_max_abs_over_largest": float((mine_grad - ref_grad).abs().max() / ref_grad.abs().max())},
        "not_element_wise_backward_ops": {name: wide_backward_ops(form, logits, target)
                                          for name, form in FORMS.items()},
    }
    for mode in ("eager",) + (("compiled",) if args.compile else ()):
        out[f"speedup_{mode}"] = ratio_spread(seconds[f"autograd's formula, {mode}"],
                                              seconds[f"repro (one-pass backward), {mode}"])
    slug = re.sub(r"[^a-z0-9]+", "-", (torch.cuda.get_device_name(device) if gpu else "cpu").lower()).strip("-")
    return publish(out, args.out or Path("reports") / "benchmarks" / f"loss-pass-{slug}.json")


if __name__ == "__main__":
    main()
