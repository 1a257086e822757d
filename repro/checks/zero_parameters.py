"""Parameters that are exactly zero when a model is built: ReZero's and SkipInit's residual
gates, Fixup's last layer of each branch, adaLN-Zero's modulation. They close the paths they gate
until the first update, so a model measured as built reads as blind (the decoder ignores its past,
the memory, every other position; its layers are all the identity) or passes vacuously (padding
cannot move outputs that read nothing).

The claims that follow a model's dependencies are claims about the architecture, true or false
for generic values of its parameters. :func:`opened` runs such a check with every all-zero
parameter tensor of each module that runs given seeded random values (restored afterwards);
biases that happen to start at zero move too, which no such claim depends on.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch.nn.modules.module import register_module_forward_pre_hook

from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement

Check = Callable[[Claim, CheckContext], Measurement]


def opened(check: Check) -> Check:
    """``check`` run with the all-zero parameters of every module it runs set to random values
    (seeded by the claim's seed), each the first time its module runs; the reason says how many."""

    @functools.wraps(check)
    def run(claim: Claim, ctx: CheckContext) -> Measurement:
        gen = torch.Generator().manual_seed(ctx.seed)
        saved: dict[int, tuple[torch.nn.Parameter, torch.Tensor]] = {}

        def open_zeros(module: torch.nn.Module, args: tuple) -> None:
            for p in module.parameters(recurse=False):
                if id(p) in saved or not p.is_floating_point() or p.is_meta or not p.numel() or p.detach().any():
                    continue
                saved[id(p)] = (p, p.detach().clone())
                scale = p.shape[-1] ** -0.5 if p.dim() > 1 else 1.0
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=gen).mul_(scale).to(p.dtype))

        handle = register_module_forward_pre_hook(open_zeros)
        try:
            measurement = check(claim, ctx)
        finally:
            handle.remove()
            with torch.no_grad():
                for p, value in saved.values():
                    p.copy_(value)
        if not saved:
            return measurement
        return dataclasses.replace(measurement, detail=f"{measurement.detail}; measured with the model's {len(saved)} "
                                                       "all-zero parameter tensors (zero-initialised gates, biases) "
                                                       "given random values")

    return run
