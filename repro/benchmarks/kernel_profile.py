"""Where an update's device time goes, kernel by kernel (``torch.profiler``).

GPU time reaches this project rarely and briefly, so one GPU run must say what to change without
another: besides the seconds per update, the benchmarks record the kernels that took the device's
time (the top ``top`` by device time, each with its share of the total), the same grouped by kind
(matrix products, attention, inductor's fused element-wise and reduction kernels, the optimizer,
copies), and how busy the device was (device time over wall time: well under 1 means the host's
launches or a sync leave it idle, which no faster kernel mends).

On a CPU the same table lists the CPU operators (``self_cpu_time_total``), so the code path is
tested everywhere.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from repro.benchmarks.machine import synchronize

__all__ = ["KINDS", "kernel_kind", "profile_kernels"]

#: Kinds of kernel, by name (first match wins); anything else is ``other``.
KINDS: tuple[tuple[str, str], ...] = (
    ("attention", r"fmha|flash|attention|sdpa|cudnn.*(mha|attn)"),
    ("matrix product", r"gemm|cutlass|xmma|nvjet|matmul|\bmm\b|addmm|bmm|sm90_|sm80_|cublas"),
    ("optimizer", r"adam|multi_tensor|foreach|fused_adam"),
    ("inductor fused", r"^triton_"),   # before copy: their names hold the ops they fuse (``_to_copy``)
    ("copy", r"memcpy|memset|copy_|contiguous|to_copy"),
    ("element-wise / reduction", r"elementwise|reduce|vectorized|unrolled|softmax|layer_?norm|dropout|index|scatter"
                                 r"|gather|embedding|fill|where|mul|add"),
)


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, pattern in KINDS if re.search(pattern, lowered)), "other")


def profile_kernels(step: Callable[[], Any], device: torch.device, *, steps: int = 3, top: int = 20) -> dict[str, Any]:
    """Run ``step`` ``steps`` times under the profiler (after the caller's warm-up) and return the top
    ``top`` kernels by device time per step, their kinds' totals, and the device's busy fraction."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    synchronize(device)
    with profile(activities=activities) as prof:
        began = time.perf_counter()
        for _ in range(steps):
            step()
        synchronize(device)
        wall = time.perf_counter() - began
    rows, host = [], []
    for event in prof.key_averages():
        us = _self_device_us(event) if gpu else float(event.self_cpu_time_total)
        if us > 0 and (not gpu or _on_device(event)):
            rows.append((event.key, us / steps, int(event.count) // steps))
        if gpu and not _on_device(event) and event.self_cpu_time_total > 0:
            host.append((event.key, float(event.self_cpu_time_total) / steps))
    total = sum(us for _, us, _ in rows)
    rows.sort(key=lambda row: -row[1])
    kinds: dict[str, float] = {}
    for name, us, _ in rows:
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + us
    return {
        "what": ("CUDA kernels by self device time" if gpu else "CPU operators by self CPU time")
                + f", per update, over {steps} profiled updates",
        "device_ms_per_update": round(total / 1e3, 3),
        "wall_ms_per_update": round(wall / steps * 1e3, 3),
        "device_busy": round(total / 1e6 / wall * steps, 3) if wall > 0 else None,
        "by_kind": {kind: {"ms": round(us / 1e3, 3), "share": round(us / total, 4) if total else 0.0}
                    for kind, us in sorted(kinds.items(), key=lambda item: -item[1])},
        "top": [{"kernel": name[:160], "kind": kernel_kind(name), "ms": round(us / 1e3, 4),
                 "share": round(us / total, 4) if total else 0.0, "calls": calls}
                for name, us, calls in rows[:top]],
        # what held the host (a busy fraction well under 1 asks where): operators by self CPU time
        **({"host_top": [{"op": name[:160], "ms": round(us / 1e3, 3)}
                         for name, us in sorted(host, key=lambda row: -row[1])[:10]]} if gpu else {}),
    }


def _self_device_us(event: Any) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, attr, None)
        if value is not None:
            return float(value)
    return 0.0


def _on_device(event: Any) -> bool:
    """A kernel, not a host operator whose children ran on the device (their time is the kernels' own)."""
    kind = getattr(event, "device_type", None)
    return kind is None or str(kind).endswith("CUDA")
