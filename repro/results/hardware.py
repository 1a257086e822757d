"""What a run measures of its own hardware, to record beside its figures.

:func:`measure_peak_flops` gives a lower bound on a device's fp32 matrix-product rate, which a
cluster job records as ``peak_flops`` so that its step time can be normalised and Table 2's cost
computed as the paper does (footnote 5) when the device is not one the paper lists.
"""

from __future__ import annotations

import time

import torch


def measure_peak_flops(device: str | torch.device = "cpu", size: int = 1024, repeats: int = 5) -> float:
    """Float32 matmul throughput of ``device`` (FLOP/s): a measured lower bound on its peak,
    for a run to record as ``peak_flops`` when the vendor's figure is not at hand."""
    device = str(device)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best
