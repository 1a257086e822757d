"""Section 5.2's step times (0.4 s base, 1.0 s big, on 8 P100), compared only where comparable.

A step time measured by a cluster job is normalised to 8 P100 by peak throughput before it is set
against the paper's, by the rule of :mod:`repro.results.normalise`; a run of another
configuration, or on hardware whose peak it did not record, reads "not run: not comparable on
this hardware", never a raw comparison of seconds on another machine. The relations built on the
step times (Section 5.2's 12 hours and 3.5 days) read the same normalised values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement, NotRun, Outcome
from repro.results.normalise import NotComparable, comparable_step_time
from repro.results.provenance import Provenance
from repro.results.store import Result

#: The claims whose stored value is a step time on the run's own hardware.
STEP_TIME_CLAIMS = ("sec5.step-time.base", "sec5.step-time.big")


def normalised(result: Result) -> tuple[float, str]:
    """(seconds per step on 8 P100, how) of a stored step time, or NotComparable."""
    prov = result.provenance
    return comparable_step_time(result.measured, prov.scale, prov.hardware, {**result.extra, **prov.extra})


@checker("metric.step_time", audits=False, reads_results=True)
def step_time(claim: Claim, ctx: CheckContext) -> Measurement:
    """The newest stored step time of this claim, normalised to 8 P100 (module docstring)."""
    stored = ctx.results.get(claim.id)
    if stored is None:
        raise NotRun("no result yet; needs a cluster job (repro submit)")
    finite(stored.measured, f"the stored step time of {claim.id}")
    measured_by, wanted = stored.provenance.extra.get("measure"), claim.params.get("measure")
    if measured_by is not None and wanted is not None and measured_by != wanted:
        raise NotRun(f"the stored value ({stored.measured} s/step) was measured as '{measured_by}', not as the claim's "
                     f"'{wanted}' (Section 5.2's step is a steady-state update: start-up and compilation left out); "
                     "needs a job of this version of repro")
    try:
        value, how = normalised(stored)
    except NotComparable as why:
        raise NotRun(f"not comparable on this hardware: {why} (measured {stored.measured} s/step; "
                     f"{stored.provenance.hardware})") from None
    prov = stored.provenance
    return Measurement(round(value, 4), unit="s/step on 8 P100 (normalised)",
                       detail=f"{how} [{prov.scale}; {prov.hardware}; commit {prov.commit[:12]}]")


def comparable_results(results: Mapping[str, Result]) -> dict[str, Result]:
    """``results`` with each step time replaced by its 8-P100 equivalent (the detail says how) and
    left out where it is not comparable, for the relations that read step times."""
    out = dict(results)
    for claim_id in STEP_TIME_CLAIMS:
        if claim_id not in out:
            continue
        try:
            value, how = normalised(out[claim_id])
        except NotComparable:
            del out[claim_id]
            continue
        out[claim_id] = dataclasses.replace(out[claim_id], measured=value, unit="s/step on 8 P100 (normalised)",
                                            detail=how)
    return out


def step_time_result(claim: Claim, results: Mapping[str, Result]) -> Result | None:
    """The report's result for a step-time claim: the normalised value, or the stored one marked
    ``not run`` with why it is not comparable; ``None`` without a stored step time."""
    stored = results.get(claim.id)
    if stored is None:
        return None
    try:
        value, how = normalised(stored)
    except NotComparable as why:
        return dataclasses.replace(stored, status=Outcome.NOT_RUN.value,
                                   detail=f"not comparable on this hardware: {why}; measured {stored.measured} s/step")
    return dataclasses.replace(stored, measured=round(value, 4), unit="s/step on 8 P100 (normalised)", detail=how)


def _probe(seconds: float, hardware: str, devices: int, peak_flops: float | None) -> Result:
    """A stored step time of the paper's configuration (scale ``cluster``) on ``devices`` of ``hardware``."""
    prov = Provenance(commit="probe", config_hash="probe", hardware=hardware, dataset="wmt14-en-de",
                      date="2026-01-01T00:00:00+00:00", scale="cluster: a probe of the normalisation",
                      extra={"devices": devices})
    return Result("sec5.step-time.base", seconds, prov, unit="s/step",
                  extra={"devices": devices, **({"peak_flops": peak_flops} if peak_flops else {})})


@checker("step_time.normalisation", audits=False)
def normalisation(claim: Claim, ctx: CheckContext) -> Measurement:
    """Section 5.2 and footnote 5: a step time measured on other hardware is set against the paper's
    ``params.gpus`` P100 at ``params.tflops`` each by assuming one step costs the same floating point
    operations on both machines at the same share of their peak: seconds x devices x peak per device
    is the same on both. Probed on the path the step-time claims and the report read
    (:func:`normalised`) with stored step times of the paper's configuration on machines of 8 x 9.5
    TFLOPS in all (kept as they are), of more or less compute (counted longer or shorter in proportion),
    and on 8 P100 (compared as measured). Measured: the largest relative departure from that rule."""
    gpus, peak = int(claim.params["gpus"]), float(claim.params["tflops"]) * 1e12
    paper = gpus * peak
    probes = [(0.4, f"{gpus} x NVIDIA Tesla P100-SXM2-16GB", gpus, None, 0.4),
              (0.4, "NVIDIA H200", 1, paper, 0.4),
              (0.5, "NVIDIA A100-SXM4-80GB", 4, paper / 4, 0.5),
              (0.1, "NVIDIA H100 80GB HBM3", 8, 60e12, 0.1 * 8 * 60e12 / paper),
              (1.0, "Tesla V100-SXM2-32GB", 2, 15.7e12, 1.0 * 2 * 15.7e12 / paper)]
    worst, where = 0.0, ""
    for seconds, hardware, devices, device_peak, want in probes:
        try:
            got, _ = normalised(_probe(seconds, hardware, devices, device_peak))
        except NotComparable as why:
            return Measurement(None, False, f"{seconds} s/step on {devices} x {hardware} refused: {why}")
        departure = abs(finite(got, f"{seconds} s/step on {devices} x {hardware} normalised") / want - 1)
        if departure >= worst:
            worst, where = departure, f"{seconds} s/step on {devices} x {hardware}: {got:.4g} s on 8 P100, want {want:.4g}"
    return Measurement(worst, detail=f"{len(probes)} stored step times of the paper's configuration; the farthest: {where}")
