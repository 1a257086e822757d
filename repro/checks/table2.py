"""Checkers for Table 2's training cost: GPU time x number of GPUs x assumed peak (footnote 5)."""

from __future__ import annotations

from repro.claims.outcome import CheckContext, Measurement, NotRun
from repro.results.normalise import FOOTNOTE5_TFLOPS
from repro.results.store import Result
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import NonFinite, finite



def training_cost(hours: float, gpus: int, gpu: str) -> float:
    """Floating point operations per footnote 5: hours x 3600 x GPUs x TFLOPS x 10^12."""
    return hours * 3600 * gpus * FOOTNOTE5_TFLOPS[gpu] * 1e12


@checker("table2.cost", audits=False, evidence="paper arithmetic")
def cost(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 2's cost recomputed from the training time and hardware of Section 5.2.

    ``params.hours`` is the wall time the text gives (12 hours; 3.5 days); with
    ``params.seconds_per_step`` and ``params.steps`` the time is derived from the step time
    instead, which shows how much the paper rounded. Computed on the paper's own numbers alone:
    basis ``paper arithmetic``, a check of the paper's consistency, not of a run."""
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


@checker("table2.cost_from_run", audits=False, reads_results=True)
def cost_from_run(claim: Claim, ctx: CheckContext) -> Measurement:
    """Table 2's cost for a run that was made: its measured seconds per step x the paper's number
    of steps x its devices x each device's peak (footnote 5's figure where the device is one it
    lists, else the peak the job measured and recorded as ``peak_flops``)."""
    source = claim.params["step_time_claim"]
    stored = ctx.results.get(source)
    if stored is None:
        raise NotRun(f"needs a measured step time ({source}, written by a cluster job)")
    extra = stored.provenance.extra
    devices = int(extra.get("devices", 1))
    listed = next((gpu for gpu in FOOTNOTE5_TFLOPS if gpu.lower() in stored.provenance.hardware.lower()), None)
    if listed is not None:
        peak, peak_from = FOOTNOTE5_TFLOPS[listed] * 1e12, f"footnote 5's {FOOTNOTE5_TFLOPS[listed]} TFLOPS ({listed})"
    elif extra.get("peak_flops"):
        peak, peak_from = float(extra["peak_flops"]), f"the measured peak {float(extra['peak_flops']) / 1e12:.2f} TFLOPS"
    else:
        raise NotRun(f"{source}: the run recorded no device peak (peak_flops) and its device is not in footnote 5")
    steps = claim.params["steps"]
    flops = finite(float(stored.measured), f"the stored step time of {source}") * steps * devices * finite(peak, "the peak")
    return Measurement(float(f"{flops:.3e}"), unit="FLOP", detail=(
        f"{stored.measured} s/step x {steps:,} steps x {devices} device(s) x {peak_from} "
        f"[{stored.provenance.scale}; {stored.provenance.hardware}]"))


def cost_result(claim: Claim, results: dict[str, Result]) -> Result | None:
    """:func:`cost_from_run` as a result of its own, with the provenance (and scale) of the step
    time it is computed from; ``None`` until that exists."""
    source = results.get(claim.params["step_time_claim"])
    if source is None:
        return None
    try:
        measured = cost_from_run(claim, CheckContext(target=None, results=dict(results)))
    except (NotRun, NonFinite):
        return None
    return Result(claim.id, measured.value, source.provenance, unit="FLOP", detail=measured.detail)
