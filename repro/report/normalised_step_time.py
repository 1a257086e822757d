"""Step time (Section 5.2) on other hardware, normalised to the paper's 8 P100 GPUs.

The paper: 0.4 s per step for the base model, 1.0 s for the big one, on 8 NVIDIA P100, each
counted at 9.5 TFLOPS (footnote 5). A step measured on other hardware is converted by peak
throughput alone::

    t_P100x8 = t_measured * (devices * peak_FLOPS_per_device) / (8 * 9.5e12)

The assumption, stated in the report: a step costs the same number of floating point
operations on both machines and both run at the same fraction of their peak. It holds only
for the paper's configuration (same model, ~25000 tokens per side per step); a local run
with a smaller model or batch is shown for its scale, not compared.

The training cost follows Table 2's method (footnote 5): time x devices x peak FLOPS.
The device peak comes from the result (``provenance.extra["peak_flops"]``, per device, and
``provenance.extra["devices"]``); :func:`repro.results.hardware.measure_peak_flops` measures a lower bound for a run
to record. Without it, a step time is listed but not normalised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from repro.checks.table2 import FOOTNOTE5_TFLOPS
from repro.claims.claim import Claim
from repro.eval.step_time_spread import spread
from repro.report.values import show
from repro.report.runs import Run
from repro.results.store import Result

PAPER_GPUS = 8
P100_FLOPS = FOOTNOTE5_TFLOPS["P100"] * 1e12

#: Configuration -> (step-time claim, training-steps claim, Table 2 cost claim).
PAPER_CLAIMS = {
    "base": ("sec5.step-time.base", "sec5.train-steps.base", "table2.cost.base"),
    "big": ("sec5.step-time.big", "sec5.train-steps.big", "table2.cost.big"),
}

ASSUMPTION = (
    "Normalisation: t(8×P100) = t(measured) × (devices × peak FLOPS per device) / (8 × 9.5·10^12), "
    "footnote 5's 9.5 TFLOPS per P100. It assumes a step costs the same FLOPs on both machines and both "
    "sustain the same fraction of peak; it is meaningful only for the paper's configuration (same model, "
    "≈25000 tokens per side per step). Training cost = time × devices × peak FLOPS (Table 2's method)."
)


@dataclass(frozen=True)
class StepTime:
    configuration: str
    seconds_per_step: float
    source: str
    scale: str
    hardware: str
    commit: str
    devices: int = 1
    peak_flops: float | None = None  # per device
    steps: int | None = None
    spread: tuple[float, float] | None = None  # the 95% range of the logged steps' times

    def p100x8_equivalent(self) -> float | None:
        if not self.peak_flops:
            return None
        return self.seconds_per_step * self.devices * self.peak_flops / (PAPER_GPUS * P100_FLOPS)

    def cost(self, steps: int | None = None) -> float | None:
        """FLOPs by footnote 5's method for ``steps`` steps (default: the steps this run made)."""
        steps = steps if steps is not None else self.steps
        if not self.peak_flops or not steps:
            return None
        return self.seconds_per_step * steps * self.devices * self.peak_flops


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def from_result(configuration: str, result: Result) -> StepTime:
    extra = {**result.extra, **result.provenance.extra}
    prov = result.provenance
    return StepTime(
        configuration=configuration, seconds_per_step=float(result.measured), source=f"result {result.claim_id}",
        scale=prov.scale, hardware=prov.hardware, commit=prov.commit, devices=int(extra.get("devices", 1) or 1),
        peak_flops=_float(extra.get("peak_flops")), steps=int(extra["steps"]) if extra.get("steps") else None,
        spread=result.ci95,
    )


def seconds_per_step(metrics: pd.DataFrame) -> float | None:
    """Median wall time per step between logged rows of a metrics log (``elapsed_s``)."""
    found = spread(metrics)
    return found.median if found is not None else None


def from_run(run: Run) -> StepTime | None:
    found = spread(run.metrics) if run.metrics is not None else None
    if found is None or run.provenance is None:
        return None
    per = found.median
    extra = run.provenance.extra
    return StepTime(
        configuration=run.label, seconds_per_step=per, source=f"metrics.csv of {run.path}",
        scale=run.provenance.scale, hardware=run.provenance.hardware, commit=run.provenance.commit,
        devices=int(extra.get("devices", 1) or 1), peak_flops=_float(extra.get("peak_flops")),
        steps=int(run.metrics["step"].max()), spread=found.ci95,
    )


def collect(results: dict[str, Result], runs: list[Run]) -> list[StepTime]:
    """Step times from the step-time results (base, big) and from every run's metrics log."""
    found = []
    for configuration, (claim_id, _, _) in PAPER_CLAIMS.items():
        if claim_id in results and isinstance(results[claim_id].measured, (int, float)):
            found.append(from_result(configuration, results[claim_id]))
    found.extend(s for s in (from_run(r) for r in runs) if s is not None)
    return found


def table(step_times: list[StepTime], claims: dict[str, Claim]) -> pd.DataFrame:
    """Measured step time, its 8×P100 equivalent and the training cost, beside the paper's."""
    rows = []
    for st in step_times:
        step_claim, steps_claim, cost_claim = PAPER_CLAIMS.get(st.configuration, (None, None, None))
        paper_t = claims[step_claim].expected if step_claim in claims else None
        paper_steps = claims[steps_claim].expected if steps_claim in claims else None
        equivalent = st.p100x8_equivalent()
        rows.append({
            "configuration": st.configuration,
            "scale": st.scale,
            "hardware": st.hardware,
            "devices": st.devices,
            "peak TFLOPS/device": st.peak_flops / 1e12 if st.peak_flops else None,
            "measured s/step": st.seconds_per_step,
            "95% range s/step": (f"{show(st.spread[0])}–{show(st.spread[1])}" if st.spread else None),
            "8×P100-equivalent s/step": equivalent,
            "paper s/step (8×P100)": paper_t,
            "equivalent / paper": equivalent / paper_t if equivalent and paper_t else None,
            "steps run": st.steps,
            "cost of this run (FLOP)": st.cost(),
            "cost at the paper's steps (FLOP)": st.cost(int(paper_steps)) if paper_steps else None,
            "paper cost, Table 2 (FLOP)": claims[cost_claim].expected if cost_claim in claims else None,
            "from": st.source,
            "commit": st.commit,
        })
    return pd.DataFrame(rows)
