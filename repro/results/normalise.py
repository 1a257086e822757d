"""Section 5.2's step times, measured on other hardware, set against the paper's 8 P100 GPUs.

The paper: "each training step took about 0.4 seconds" (base; 1.0 s big) "on 8 NVIDIA P100
GPUs", each counted at 9.5 TFLOPS (footnote 5). A stored step time is comparable only when:

1. it is a run of the paper's configuration: a result whose scale starts with ``cluster`` (the
   paper's model and ~25000 tokens per side per update, run to its end); a local or ``reduced``
   run measures another amount of work per step and is never compared;
2. and either it ran on 8 P100 (its hardware names the P100 and it used 8 devices): compared as
   measured; or it recorded its devices and each device's measured peak (``peak_flops``, per
   device, :func:`repro.results.hardware.measure_peak_flops`): normalised by peak throughput,

       t(8 x P100) = t(measured) x devices x peak per device / (8 x 9.5e12 FLOP/s).

The rule assumes a step costs the same floating point operations on both machines and both run at
the same fraction of their peak. Anything else is "not comparable on this hardware"
(:class:`NotComparable`), never compared raw.
"""

from __future__ import annotations

import math
from typing import Any

#: Footnote 5: sustained single-precision TFLOPS assumed per GPU.
FOOTNOTE5_TFLOPS = {"K80": 2.8, "K40": 3.7, "M40": 6.0, "P100": 9.5}
PAPER_GPUS = 8
P100_FLOPS = FOOTNOTE5_TFLOPS["P100"] * 1e12

RULE = ("t(8×P100) = t(measured) × devices × peak FLOPS per device / (8 × 9.5·10^12); only for a run of "
        "the paper's configuration (scale 'cluster'); a run on 8 P100 is compared as measured")


class NotComparable(ValueError):
    """A step time that cannot be set against the paper's 8 P100: the message says why."""


def p100x8_seconds(seconds: float, devices: int, peak_flops: float) -> float:
    """Seconds per step on 8 P100 by peak throughput (module docstring)."""
    return seconds * devices * peak_flops / (PAPER_GPUS * P100_FLOPS)


def comparable_step_time(measured: Any, scale: str, hardware: str, extra: dict[str, Any]) -> tuple[float, str]:
    """(seconds per step on 8 P100, how it was obtained) for a stored step time, or
    :class:`NotComparable` naming why it cannot be compared (module docstring)."""
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or not math.isfinite(float(measured)):
        raise NotComparable(f"the stored step time {measured!r} is not a finite number")
    if not scale.strip().lower().startswith("cluster"):
        raise NotComparable(f"a run at scale '{scale.split(':')[0]}' does the work of another configuration per step")
    devices = int(extra.get("devices", 1) or 1)
    if "p100" in hardware.lower() and devices == PAPER_GPUS:
        return float(measured), f"{measured} s/step measured on {devices} P100"
    peak = extra.get("peak_flops")
    try:
        peak = float(peak) if peak is not None else None
    except (TypeError, ValueError):
        peak = None
    if not peak or not math.isfinite(peak) or peak <= 0:
        raise NotComparable(f"not comparable on this hardware ({hardware}, {devices} device(s)): the run recorded "
                            "no measured peak (peak_flops) to normalise by")
    value = p100x8_seconds(float(measured), devices, peak)
    return value, (f"{measured} s/step on {devices} device(s) of {peak / 1e12:.2f} TFLOPS peak = {value:.4g} s/step "
                   f"on 8 P100 at 9.5 TFLOPS ({RULE})")


__all__ = ["FOOTNOTE5_TFLOPS", "NotComparable", "P100_FLOPS", "PAPER_GPUS", "RULE", "comparable_step_time",
           "p100x8_seconds"]
