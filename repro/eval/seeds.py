"""A metric over several training seeds: the mean and a 95% interval that counts both kinds of noise.

The paper reports one run per figure. With N seeds, the interval around the seeds' mean is

    half = sqrt((t_{0.975, N-1} · s / sqrt(N))² + (mean bootstrap half width / sqrt(N))²)

where ``s`` is the seeds' sample standard deviation (training noise; Student's t for small N)
and each seed's bootstrap half width measures the test set's sampling noise of that seed's score
(:mod:`repro.eval.bootstrap`); averaging N scores divides that by sqrt(N) as well. With one seed
the interval is that seed's bootstrap interval.

A difference of such means (a row of Table 3 against the base, :func:`combination`: any
``sum c_i · mean_i``) takes the same two parts: Welch's t over the seeds of every mean it involves
(Satterthwaite's degrees of freedom, rounded down), and each mean's bootstrap part, the means taken
as independent. For one mean with ``c = 1`` it is :func:`over_seeds`'s interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Student's t, two-sided 95% (0.975 quantile), for 1..30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (1.96 beyond 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be positive (got {df})")
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True)
class SeedSummary:
    """The mean of one metric over seeds and its interval."""

    values: dict[int, float]
    mean: float
    stdev: float
    half_width: float
    #: The mean of the seeds' bootstrap half widths (0 without them): the test set's sampling noise of one seed.
    bootstrap_half_width: float = 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.mean - self.half_width, self.mean + self.half_width)

    def to_dict(self, digits: int = 3) -> dict:
        return {"seeds": {str(k): v for k, v in self.values.items()}, "mean": round(self.mean, digits),
                "stdev": round(self.stdev, digits), "ci95": [round(x, digits) for x in self.ci95]}


def over_seeds(values: dict[int, float], bootstrap_half_widths: Sequence[float] = ()) -> SeedSummary:
    """Mean over seeds with the combined interval above (``bootstrap_half_widths``: one per seed, or none)."""
    if not values:
        raise ValueError("no seed to summarise")
    scores = list(values.values())
    n = len(scores)
    mean = statistics.fmean(scores)
    stdev = statistics.stdev(scores) if n > 1 else 0.0
    training = t975(n - 1) * stdev / math.sqrt(n) if n > 1 else 0.0
    bootstrap = statistics.fmean(bootstrap_half_widths) if bootstrap_half_widths else 0.0
    return SeedSummary(dict(values), mean, stdev, math.hypot(training, bootstrap / math.sqrt(n)), bootstrap)


@dataclass(frozen=True)
class Combination:
    """``sum c_i · mean_i`` over several seeds' means, with its 95% half width."""

    estimate: float
    half_width: float
    degrees_of_freedom: float | None    # Satterthwaite's, None when no mean has two seeds

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.estimate - self.half_width, self.estimate + self.half_width)


def combination(terms: Sequence[tuple[float, SeedSummary]]) -> Combination:
    """``sum c · mean`` of ``terms`` (coefficient, summary) and its interval: Welch's t for the seeds'
    part, ``t_{0.975, df} · sqrt(sum c² s² / n)``, and the bootstraps' part, ``sqrt(sum (c · b / sqrt(n))²)``,
    combined as in :func:`over_seeds` (a mean of one seed adds no seeds' part)."""
    if not terms:
        raise ValueError("no mean to combine")
    estimate = math.fsum(c * s.mean for c, s in terms)
    variances = [(c * c * s.stdev**2 / len(s.values), len(s.values)) for c, s in terms if len(s.values) > 1]
    total = math.fsum(v for v, _ in variances)
    df = None
    training = 0.0
    if variances and total > 0:
        df = total**2 / math.fsum(v * v / (n - 1) for v, n in variances)
        training = t975(max(1, math.floor(df + 1e-9))) * math.sqrt(total)
    elif variances:
        df = float(sum(n - 1 for _, n in variances))
    sampling = math.sqrt(math.fsum((c * s.bootstrap_half_width) ** 2 / len(s.values) for c, s in terms))
    return Combination(estimate, math.hypot(training, sampling), df)
