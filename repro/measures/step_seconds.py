"""Seconds per training step (Section 5.2: 0.4 s base, 1.0 s big, on 8 P100), three ways.

- ``step-time.steady-state`` (what the paper's step-time claims name): the median seconds of this run's
  steady updates, as the training loop timed them (:mod:`repro.train.step_clock`): start-up,
  warm-up, compilation, dev evaluations and checkpoint writes left out, and stored beside it by
  name; its interval is the 2.5-97.5 percentile range of the same updates, so it contains the value.
  With the device count and each device's measured peak
  (:func:`repro.results.hardware.measure_peak_flops`) the reporter normalises it to 8 P100
  (:mod:`repro.results.normalise`). Nothing to store when the run made no steady update;
- ``step-time.run-mean``: the wall seconds of this run of the job over the updates it made, start-up
  and compilation included (an H200 job of 600 updates stored 0.66 s here, against 0.15 s per
  steady update): kept for older claims files; it has no interval of its own. Nothing to store
  when the run made no update (a requeued job that resumed at its last step);
- ``step-time.logged-median``: the median over the intervals of the training log (``metrics.csv``);
  nothing to store with fewer than two logged rows.

The last two keep the spread of the logged intervals (:mod:`repro.eval.step_time_spread`).
"""

from __future__ import annotations

import logging

from repro.eval.step_time_spread import spread_of_log
from repro.measures.measure_registry import Measured, Request, Trained, measurement
from repro.results.hardware import measure_peak_flops

log = logging.getLogger("repro.measures.step_seconds")


def _dataset(trained: Trained) -> str:
    return f"{trained.dataset.name} train" if trained.dataset is not None else "the run's training data"


#: The parts of a run's wall time that are not a steady update, stored beside the step time by name.
EXCLUDED = ("startup_s", "warmup_s", "compile_s", "evaluation_s", "checkpoint_s")


@measurement("step-time.steady-state")
def steady_state(trained: Trained, request: Request) -> Measured | None:
    """Median seconds per steady update of this run (module docstring); measured on rank 0."""
    if not trained.runtime.is_main:
        return None
    timing = trained.summary.get("step_time")
    if not isinstance(timing, dict):
        log.warning("%s: not stored: the run's summary has no step timing (trained by an older repro?)",
                    request.result_id)
        return None
    if not timing.get("steady_updates"):
        log.warning("%s: not stored: this run of the job made no steady update (%s updates, %s of them warm-up "
                    "or compiling)", request.result_id, timing.get("updates", 0),
                    timing.get("updates", 0) - timing.get("steady_updates", 0))
        return None
    value, (low, high) = float(timing["steady_s_per_update"]), timing["ci95_s"]
    parts = ", ".join(f"{name[:-2]} {float(timing.get(name, 0.0)):.1f} s" for name in EXCLUDED)
    return Measured(
        round(value, 4), "s/step on the job's hardware",
        f"median of {timing['steady_updates']} steady updates of {timing['updates']} "
        f"(quartiles {timing['quartiles_s'][0]:.4f}-{timing['quartiles_s'][1]:.4f} s) on {trained.devices} "
        f"device(s); left out: {parts}; the run in all {float(timing.get('total_s', 0.0)):.0f} s",
        _dataset(trained), 4, ci95=(min(low, value), max(high, value)),
        provenance={"peak_flops": measure_peak_flops(trained.runtime.device)},
        extra={"step_time": {k: timing[k] for k in timing}})


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
        _dataset(trained), 4,   # a mean of the whole run has no interval of its own (the log's is the steps')
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
