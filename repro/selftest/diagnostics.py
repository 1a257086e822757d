"""What one GPU run must tell a developer without a GPU: beside the figures, where the time went.

Collected from the stages' figures into one place of the summary: for the paper's base and big
updates and for the job's path, the kernels that took the device's time (top 20 with their shares,
grouped by kind, and how busy the device was), dynamo's graph count and the guards that made it
compile again, the peak memory and the padding of the job's passes, the job's gap split into its
shapes and its data path with the host's milliseconds per update (batch, launch, read) and the
driver allocations made while measured; for every stage, its seconds
split into compilation, warm-up and measured time where it measured any.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repro.selftest.stage import StageResult

#: The figures of a measured case that say where its time went (each stage keeps them under these names).
KEYS = ("kernels", "compilations", "recompile_reasons", "peak_memory_gib", "padding_fraction", "seconds",
        "ratio_shapes", "ratio_data_path", "host_ms_per_update", "device_allocations_while_measured")


def diagnostics(results: Sequence[StageResult]) -> dict[str, Any]:
    out: dict[str, Any] = {"stage_seconds": {}}
    for result in results:
        split = result.figures.get("seconds") if isinstance(result.figures.get("seconds"), dict) else {}
        out["stage_seconds"][result.name] = {"total": round(result.seconds, 1), **split}
        cases = {result.name: result.figures, **{f"{result.name}/{name}": value for name, value
                                                 in result.figures.items() if isinstance(value, dict)}}
        for name, figures in cases.items():
            found = {key: figures[key] for key in KEYS if isinstance(figures, dict) and key in figures}
            if "kernels" in found or "recompile_reasons" in found:
                out[name] = found
    return out
