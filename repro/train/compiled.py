"""The training objective under ``torch.compile``, compiled a stated number of times per run.

Section 5.1 batches sentence pairs "by approximate sequence length", so every pass has another
shape: its number of sentences, its source length and its target length all vary. The objective
is compiled with dynamic shapes, and dynamo would still compile it again whenever a pass breaks an
assumption the first graph was traced under. Two such assumptions cost whole recompilations of
the model's forward and backward pass (tens of seconds each on a GPU) on real data:

- **sizes 0 and 1 are specialised**: a pass of one sentence (the remainder at the end of an epoch's
  packing, or a long sentence alone) or a side of one token compiles a graph of its own. Here a
  pass of one sentence gets a filler row (one source token, no target token: it weighs nothing in
  the loss, its gradient is exactly zero) and a side of one position gets a PAD column, on the
  device, before the compiled call (:func:`at_least_two`);
- **duck shaping**: sizes that are equal in the first pass traced (source length = target length,
  or sentences = length) share one symbol, and a later pass where they differ compiles again.
  Here every size has its own symbol (``use_duck_shape`` off while the objective is traced).

So one run compiles the objective once (:data:`COMPILATIONS`), whatever its batches' shapes, far
inside dynamo's recompile limit (8 by default), past which it would silently run eager. The token
counts the loop reports come from the batches, not from these tensors: padding does not change them,
and PAD positions weigh nothing in the loss (Section 5.4's loss ignores PAD).
"""

from __future__ import annotations

import torch
import torch.fx.experimental._config as shape_config
from torch._dynamo.utils import counters, guard_failures
import torch.nn.functional as F
from torch import Tensor, nn

from repro.data.vocab import BOS, EOS, PAD

__all__ = ["COMPILATIONS", "COMPILE_MIN_UPDATES", "CompileWatch", "CompiledObjective", "at_least_two", "compiles"]

#: How many graphs one run compiles of the objective, whatever its batches (tested on real data).
COMPILATIONS = 1

#: ``compile = "auto"`` compiles on a GPU only for a run of at least this many updates. On an H200
#: (2026-11-27) compiling cost minutes on a fresh machine (the main job's first 100 updates took
#: 2 min 9 s, the other 900 took 30 s) and saved 0.034 s per base update (0.0787 s eager, 0.0446 s
#: compiled): it pays for itself after some thousands of updates, as every paper job has (100k,
#: 300k), and never in the 1000 of the local main job or a reduced job.
COMPILE_MIN_UPDATES = 5000


def compiles(setting: str, on_gpu: bool, updates: int) -> bool:
    """Whether a run compiles its objective: ``on``; or ``auto`` on a GPU for a run of at least
    :data:`COMPILE_MIN_UPDATES` updates; never with ``off``."""
    return setting == "on" or (setting == "auto" and on_gpu and updates >= COMPILE_MIN_UPDATES)


def at_least_two(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The pass with every dimension at least 2, adding only what the loss ignores: a PAD column to a
    side of length 1, a filler row (source ``EOS``, target input ``BOS``, no target token) to a pass
    of one sentence. Shape tests only: no host sync."""
    if src.size(1) < 2:
        src = F.pad(src, (0, 2 - src.size(1)), value=PAD)
    if tgt_in.size(1) < 2:
        tgt_in = F.pad(tgt_in, (0, 2 - tgt_in.size(1)), value=PAD)
        tgt_out = F.pad(tgt_out, (0, 2 - tgt_out.size(1)), value=PAD)
    if src.size(0) < 2:
        filler_src = torch.full((2 - src.size(0), src.size(1)), PAD, dtype=src.dtype, device=src.device)
        filler_src[:, 0] = EOS   # one real source token: a source of PAD only would attend to nothing
        filler_in = torch.full((2 - src.size(0), tgt_in.size(1)), PAD, dtype=tgt_in.dtype, device=tgt_in.device)
        filler_in[:, 0] = BOS
        src = torch.cat([src, filler_src])
        tgt_in = torch.cat([tgt_in, filler_in])
        tgt_out = torch.cat([tgt_out, torch.full_like(filler_in, PAD)])
    return src, tgt_in, tgt_out


class CompiledObjective(nn.Module):
    """``objective`` (a :class:`~repro.train.loss.TranslationLoss`) compiled with dynamic shapes, every
    pass brought to a shape its one graph covers; called as the objective is."""

    def __init__(self, objective: nn.Module, backend: str = "inductor") -> None:
        super().__init__()
        self.objective = objective
        # not registered as a submodule: its parameters are the objective's
        object.__setattr__(self, "_compiled", torch.compile(objective, dynamic=True, backend=backend))

    @property
    def impl(self) -> str:
        return self.objective.impl

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor,
                scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
        src, tgt_in, tgt_out = at_least_two(src, tgt_in, tgt_out)
        with shape_config.patch(use_duck_shape=False):
            return self._compiled(src, tgt_in, tgt_out, scale)


class CompileWatch:
    """What dynamo compiled from the moment this is made: the graphs (``graphs``) and, for each graph
    compiled again, the guard whose failure made it (``reasons``, dynamo's own words: the size, stride
    or value that differed). A run over its bound names these, not only a count."""

    def __init__(self) -> None:
        self._graphs = counters["stats"]["unique_graphs"]
        self._seen = {code: len(reasons) for code, reasons in guard_failures.items()}

    @property
    def graphs(self) -> int:
        return counters["stats"]["unique_graphs"] - self._graphs

    def reasons(self) -> list[str]:
        found = []
        for code, reasons in guard_failures.items():
            name = getattr(code, "co_name", str(code))
            found += [f"{name}: {reason}" for reason in reasons[self._seen.get(code, 0):]]
        return found
