"""Checkers for Table 2's training cost: GPU time x number of GPUs x assumed peak (footnote 5)."""

from __future__ import annotations

from repro.claims.outcome import CheckContext, Measurement
from repro.checks.registry import checker
from repro.claims.claim import Claim

#: Footnote 5: sustained single-precision TFLOPS assumed per GPU.
FOOTNOTE5_TFLOPS = {"K80": 2.8, "K40": 3.7, "M40": 6.0, "P100": 9.5}


def training_cost(hours: float, gpus: int, gpu: str) -> float:
    """Floating point operations per footnote 5: hours x 3600 x GPUs x TFLOPS x 10^12."""
    return hours * 3600 * gpus * FOOTNOTE5_TFLOPS[gpu] * 1e12


@checker("table2.cost", audits=False)
def cost(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 2's cost recomputed from the training time and hardware of Section 5.2.

    ``params.hours`` is the wall time the text gives (12 hours; 3.5 days); with
    ``params.seconds_per_step`` and ``params.steps`` the time is derived from the step time
    instead, which shows how much the paper rounded. Measured: FLOPs."""
    p = claim.params
    if "seconds_per_step" in p:
        hours = p["seconds_per_step"] * p["steps"] / 3600
        basis = f"{p['seconds_per_step']} s/step x {p['steps']:,} steps = {hours:.2f} h"
    else:
        hours = p["hours"]
        basis = f"{hours} h"
    flops = training_cost(hours, p["gpus"], p["gpu"])
    return Measurement(
        float(f"{flops:.3e}"), unit="FLOP",
        detail=f"{basis} x {p['gpus']} {p['gpu']} x {FOOTNOTE5_TFLOPS[p['gpu']]} TFLOPS = {flops:.3e}",
    )
