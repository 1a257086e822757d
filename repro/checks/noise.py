"""The noise floor of a perturbation test, measured on the model under test.

A perturbation test changes one input and asks which outputs moved: the decoder's output at i
must not move when the target token at j > i changes (the causal mask), every encoder output must
move when any source token changes. An absolute threshold ("moved by more than 1e-6") answers
the wrong question twice: it passes a systematic leak smaller than itself (a random-init model
whose future leaks into the past by 4e-7 to 1.5e-6), and it is a guess at the arithmetic's noise,
which depends on the model and the device. So the threshold is measured: the same model is run
where no change of the test can reach the output (the same input again; another sentence of the
same batch changed), and the largest move seen there is the floor. A correct model on the CPU
repeats itself exactly and keeps its sentences apart, so its floor is 0.0 and any move counts;
where the arithmetic is noisier the floor says by how much, and a move counts when it is clearly
above it (:data:`MARGIN` times), or when it is above the floor at most of the places tested
(systematic, unlike noise). The largest move below the threshold is reported either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from repro.claims.compare import changed

#: A move counts when it exceeds the floor this many times (noise is not that far above its own maximum).
MARGIN = 10.0
#: Share of the places tested above the floor (but under the margin) that makes the moves systematic.
SYSTEMATIC = 0.5


@dataclass
class NoiseFloor:
    """The largest moves seen where nothing the test changes can reach (``probes``: what each was),
    and the largest move counted as none (``below``) once the test ran."""

    probes: dict[str, float]
    below: float = field(default=0.0)

    @property
    def floor(self) -> float:
        return max(self.probes.values(), default=0.0)

    @property
    def threshold(self) -> float:
        """A move above this is a move; 0.0 where the model repeats itself exactly."""
        return MARGIN * self.floor

    def moved(self, got: Tensor, base: Tensor, dims: tuple[int, ...] | int, what: str) -> Tensor:
        """Per position: did ``got`` move from ``base`` (max over ``dims``) above the threshold? The
        largest move that does not count is kept for the reason."""
        moves = (got.detach().double() - base.detach().double()).abs().amax(dim=dims)
        result = changed(got, base, self.threshold, dims, what)
        quiet = moves[~result]
        if quiet.numel():
            self.below = max(self.below, float(quiet.max()))
        return result

    def systematic(self, got: Tensor, base: Tensor, dims: tuple[int, ...] | int) -> Tensor:
        """Per position: moved above the floor itself (not the margin): counted only where most
        places do so (:data:`SYSTEMATIC`), which noise does not."""
        moves = (got.detach().double() - base.detach().double()).abs().amax(dim=dims)
        return moves > self.floor

    def text(self) -> str:
        probes = ", ".join(f"{k} {v:.1e}" for k, v in self.probes.items())
        return (f"noise floor {self.floor:.1e} ({probes}), a move counts above {self.threshold:.1e}; largest move "
                f"counted as none {self.below:.1e}")


def noise_text(floors: dict[str, NoiseFloor]) -> str:
    """The floors of several paths (models) of one test, in a line: once where all are exact."""
    if all(f.floor == 0 and f.below == 0 for f in floors.values()):
        probes = ", ".join(next(iter(floors.values())).probes) if floors else ""
        return f"noise floor 0 on {'every path' if len(floors) > 1 else 'the model'} ({probes}): any move counts"
    return "; ".join(f"{path}: {f.text()}" for path, f in floors.items())


def batch_mate_changed(tokens: Tensor, row: int, low: int, high: int, gen: torch.Generator) -> Tensor:
    """``tokens`` with every token of sentence ``row`` redrawn in [low, high): what the other
    sentences of the batch compute must not move."""
    other = tokens.clone()
    other[row] = torch.randint(low, high, other[row].shape, generator=gen)
    return other
