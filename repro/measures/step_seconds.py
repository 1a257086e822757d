"""Seconds per training step (Section 5.2: 0.4 s base, 1.0 s big, on 8 P100), two ways.

- ``step-time.run-mean``: the wall seconds of this run of the job over the updates it made, with the
  device count and each device's measured peak (:func:`repro.results.hardware.measure_peak_flops`) so
  that the reporter can normalise it to 8 P100 (:mod:`repro.results.normalise`); nothing to store
  when the run made no update (a requeued job that resumed at its last step);
- ``step-time.logged-median``: the median over the intervals of the training log (``metrics.csv``);
  nothing to store with fewer than two logged rows.

Both keep the spread of the logged intervals (:mod:`repro.eval.step_time_spread`).
"""

from __future__ import annotations

import logging

from repro.eval.step_time_spread import spread_of_log
from repro.measures.measure_registry import Measured, Request, Trained, measurement
from repro.results.hardware import measure_peak_flops

log = logging.getLogger("repro.measures.step_seconds")


def _dataset(trained: Trained) -> str:
    return f"{trained.dataset.name} train" if trained.dataset is not None else "the run's training data"


@measurement("step-time.run-mean")
def run_mean(trained: Trained, request: Request) -> Measured | None:
    """Wall seconds per update of this run of the job (module docstring); measured on rank 0."""
    summary = trained.summary
    if not trained.runtime.is_main:
        return None
    steps = int(summary.get("steps", 0)) - int(summary.get("resumed_from", 0) or 0)
    if steps <= 0:
        log.warning("%s: not stored: this run of the job made no update (it resumed at step %s)",
                    request.result_id, summary.get("resumed_from"))
        return None
    elapsed = float(summary.get("elapsed_s", 0.0))
    step = spread_of_log(trained.run_dir / "metrics.csv")
    return Measured(
        round(elapsed / steps, 4), "s/step on the job's hardware",
        f"{steps} steps in {elapsed:.0f} s on {trained.devices} device(s)"
        + (f"; logged intervals: median {step.median:.4f} s, quartiles {step.q1:.4f}-{step.q3:.4f} s" if step else ""),
        _dataset(trained), 4, ci95=step.ci95 if step else None,
        provenance={"peak_flops": measure_peak_flops(trained.runtime.device), **({"spread": step.to_dict()} if step else {})})


@measurement("step-time.logged-median")
def logged_median(trained: Trained, request: Request) -> Measured | None:
    """Median wall seconds per step over the training log's intervals (module docstring)."""
    step = spread_of_log(trained.run_dir / "metrics.csv")
    if step is None:
        log.warning("%s: not stored: the training log holds fewer than two rows", request.result_id)
        return None
    return Measured(
        round(step.median, 4), "s/step",
        f"median wall seconds per step over {step.intervals} logged intervals; quartiles {step.q1:.3f}-{step.q3:.3f} s, "
        f"range {step.low:.3f}-{step.high:.3f} s (includes checkpoint writing; the interval is the 2.5-97.5 "
        "percentile range of the intervals)",
        _dataset(trained), 4, ci95=step.ci95, extra={"spread": step.to_dict()}, raw=step)
