"""A metric over several training seeds: the mean and a 95% interval that counts both kinds of noise.

The paper reports one run per figure. With N seeds, the interval around the seeds' mean is

    half = sqrt((t_{0.975, N-1} · s / sqrt(N))² + (mean bootstrap half width / sqrt(N))²)

where ``s`` is the seeds' sample standard deviation (training noise; Student's t for small N)
and each seed's bootstrap half width measures the test set's sampling noise of that seed's score
(:mod:`repro.eval.bootstrap`); averaging N scores divides that by sqrt(N) as well. With one seed
the interval is that seed's bootstrap interval.
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
    sampling = statistics.fmean(bootstrap_half_widths) / math.sqrt(n) if bootstrap_half_widths else 0.0
    return SeedSummary(dict(values), mean, stdev, math.hypot(training, sampling))
