"""One measurement over several seeds of a run: their mean and its interval (:mod:`repro.eval.seeds`)."""

from __future__ import annotations

import dataclasses

from repro.eval.seeds import over_seeds
from repro.measures.measure_registry import Measured


def combine_seeds(by_seed: dict[int, Measured]) -> Measured:
    """The first seed's measurement with the mean over ``by_seed`` as its value and, for several seeds,
    the interval t·s/√N combined with the seeds' own intervals (their half widths, where each has one);
    the seeds' values go to ``extra["over_seeds"]``. One seed: its measurement unchanged."""
    first = next(iter(by_seed.values()))
    if len(by_seed) == 1:
        return first
    widths = [(m.ci95[1] - m.ci95[0]) / 2 for m in by_seed.values() if m.ci95 is not None]
    summary = over_seeds({seed: m.value for seed, m in by_seed.items()},
                         widths if len(widths) == len(by_seed) else ())
    seeds = ", ".join(f"{seed}: {m.value:.{first.digits}f}" for seed, m in by_seed.items())
    how = "combined with the seeds' own intervals" if summary.bootstrap_half_width else "over the seeds"
    return dataclasses.replace(
        first, value=round(summary.mean, first.digits), ci95=summary.ci95,
        detail=f"mean of seeds {seeds}, interval t·s/√N {how}; the first seed: {first.detail}",
        extra={**first.extra, "over_seeds": summary.to_dict(first.digits)})
