"""The spread of a run's step time, from its metrics log (Section 5.2 reports one figure per model).

Per-step wall time is taken between consecutive logged rows of ``metrics.csv``
(``Δelapsed_s / Δstep``). The figure a report quotes is the median; its spread is the
quartiles, the range, and the 2.5-97.5 percentile interval, stored as the result's ``ci95``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from repro.train.metrics_log import read_numbers


@dataclass(frozen=True)
class StepTimeSpread:
    """Seconds per step over the logged intervals of one run."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    p2_5: float
    p97_5: float
    intervals: int

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.p2_5, self.p97_5)

    def to_dict(self, digits: int = 4) -> dict:
        return {"median_s": round(self.median, digits), "q1_s": round(self.q1, digits), "q3_s": round(self.q3, digits),
                "min_s": round(self.low, digits), "max_s": round(self.high, digits),
                "ci95_s": [round(self.p2_5, digits), round(self.p97_5, digits)], "intervals": self.intervals}


def per_step_seconds(metrics: pd.DataFrame | None) -> np.ndarray:
    """Wall seconds per step between logged rows (rows with no elapsed time or no new step are skipped)."""
    if metrics is None or "elapsed_s" not in metrics.columns or "step" not in metrics.columns or len(metrics) < 2:
        return np.empty(0)
    df = metrics.dropna(subset=["elapsed_s"])
    d_step, d_time = df["step"].diff(), df["elapsed_s"].diff()
    per = (d_time / d_step)[(d_step > 0) & (d_time > 0)]
    return per.to_numpy(dtype=float)


def spread(metrics: pd.DataFrame | None) -> StepTimeSpread | None:
    """Median, quartiles, range and 95% percentile interval of seconds per step; None without two rows."""
    per = per_step_seconds(metrics)
    if per.size == 0:
        return None
    q = np.percentile(per, [2.5, 25, 50, 75, 97.5])
    return StepTimeSpread(median=float(q[2]), q1=float(q[1]), q3=float(q[3]), low=float(per.min()),
                          high=float(per.max()), p2_5=float(q[0]), p97_5=float(q[4]), intervals=int(per.size))


def spread_of_log(path: Path) -> StepTimeSpread | None:
    """:func:`spread` of a ``metrics.csv``; None when the file is absent or holds fewer than two rows."""
    if not path.is_file():
        return None
    metrics = read_numbers(path)
    return spread(metrics.dropna(subset=[c for c in ("step",) if c in metrics.columns]))
