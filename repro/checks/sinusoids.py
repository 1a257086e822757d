"""Reading a positional table as a set of sinusoids, whatever the order of its dimensions.

Section 3.5 defines PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): sines on
the even dimensions, cosines on the odd ones. Many implementations (tensor2tensor, fairseq and
its Hugging Face port FSMT, Marian, x-transformers) put all sines first and all cosines after.
That is a fixed permutation of the dimensions: the *set* of sinusoids, their wavelengths and
the linearity of PE(pos + k) in PE(pos), are the same. So the checks of those properties first
find the (sine, cosine) pairs in the table, and the layout is reported as a fact of its own.

A pair is two columns a, b with a(p)^2 + b(p)^2 constant over the positions p (one circle); its
angular frequency is the angle it turns between neighbouring rows, read with atan2, which is
blind to the amplitude and to which position the first row holds. The sine of a pair is the
column that leads: atan2(sine, cosine) grows with p.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

#: A pair's a^2 + b^2 may vary by this much, relative to its mean, and still be one circle.
CIRCLE_TOLERANCE = 1e-3

PAPER_LAYOUT = "interleaved"


class NotSinusoidPairs(ValueError):
    """The table's columns cannot be grouped into (sine, cosine) pairs of one frequency each."""


@dataclass
class SinusoidPairs:
    """The pairs of a positional table, highest frequency first.

    ``sine[i]``, ``cosine[i]``: the columns of pair i; ``omega[i]``: its angular frequency
    (radians per position); ``amplitude[i]``: its radius; ``start``: the position the table's
    first row holds, read off the lowest-frequency pair (0 in the paper; fairseq starts at
    padding_idx + 1); ``worst_circle``: the largest relative spread of a^2 + b^2 of a pair."""

    sine: list[int]
    cosine: list[int]
    omega: Tensor
    amplitude: Tensor
    start: float
    worst_circle: float

    @property
    def wavelengths(self) -> Tensor:
        """Wavelength / 2pi of each pair, ascending."""
        return 1 / self.omega

    def layout(self) -> str:
        """``interleaved`` (the paper: sine at 2i, cosine at 2i+1), ``sines-then-cosines``
        (sine at i, cosine at i + d/2), their cosine-first mirrors, or ``other``."""
        half = len(self.sine)
        pairs = list(zip(self.sine, self.cosine))
        if pairs == [(2 * i, 2 * i + 1) for i in range(half)]:
            return PAPER_LAYOUT
        if pairs == [(2 * i + 1, 2 * i) for i in range(half)]:
            return "interleaved, cosine first"
        if pairs == [(i, i + half) for i in range(half)]:
            return "sines-then-cosines"
        if pairs == [(i + half, i) for i in range(half)]:
            return "cosines-then-sines"
        return "other"


def _wrapped(angle: Tensor) -> Tensor:
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def find_pairs(table: Tensor) -> SinusoidPairs:
    """Group the columns of ``table`` (positions x d_model) into sine/cosine pairs.

    Greedy matching on the relative spread of a^2 + b^2 over the positions, smallest first;
    raises :class:`NotSinusoidPairs` when a column has no partner within
    :data:`CIRCLE_TOLERANCE`. A table of few positions cannot tell the lowest frequencies
    apart; the claims ask for a few hundred."""
    x = table.detach().double()
    length, d_model = x.shape
    if d_model % 2 or length < 3:
        raise NotSinusoidPairs(f"a ({length}, {d_model}) table cannot be read as sine/cosine pairs")
    squares = x * x
    mean = torch.empty(d_model, d_model, dtype=torch.float64)
    spread = torch.empty(d_model, d_model, dtype=torch.float64)
    for lo in range(0, d_model, 64):  # a^2 + b^2 for 64 columns a at a time: (positions, 64, d)
        radius = squares[:, lo : lo + 64, None] + squares[:, None, :]
        mean[lo : lo + 64] = radius.mean(0)
        spread[lo : lo + 64] = (radius.amax(0) - radius.amin(0)) / mean[lo : lo + 64].clamp_min(1e-300)
    spread[mean <= 1e-12] = math.inf  # two all-zero columns are no circle
    spread = spread.masked_fill(torch.ones_like(spread, dtype=torch.bool).tril(), math.inf)  # each pair once
    order = torch.argsort(spread.flatten())
    taken: set[int] = set()
    found: list[tuple[int, int, float]] = []
    for flat in order.tolist():
        a, b = divmod(flat, d_model)
        if a in taken or b in taken:
            continue
        cost = spread[a, b].item()
        if cost > CIRCLE_TOLERANCE:
            break
        taken.update((a, b))
        found.append((a, b, cost))
        if len(found) == d_model // 2:
            break
    if len(found) < d_model // 2:
        lonely = sorted(set(range(d_model)) - taken)
        raise NotSinusoidPairs(
            f"{len(lonely)} of {d_model} dimensions have no partner on a circle "
            f"(first: {lonely[:6]}); the table is not a set of sin/cos pairs"
        )
    sine, cosine, omegas, amplitudes = [], [], [], []
    for a, b, _ in found:
        turn = _wrapped(torch.diff(torch.atan2(x[:, a], x[:, b])))
        if turn.mean() < 0:  # b leads: b is the sine
            a, b, turn = b, a, -turn
        sine.append(a)
        cosine.append(b)
        omegas.append(turn.mean().item())
        amplitudes.append(math.sqrt(mean[a, b].item()))
    by_frequency = sorted(range(len(sine)), key=lambda i: -omegas[i])
    omega = torch.tensor([omegas[i] for i in by_frequency], dtype=torch.float64)
    sine = [sine[i] for i in by_frequency]
    cosine = [cosine[i] for i in by_frequency]
    slowest = -1
    start = torch.atan2(x[0, sine[slowest]], x[0, cosine[slowest]]).item() / omega[slowest].item()
    return SinusoidPairs(
        sine, cosine, omega, torch.tensor([amplitudes[i] for i in by_frequency]), start,
        max(c for _, _, c in found),
    )
