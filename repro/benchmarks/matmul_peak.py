"""The measured fp32 matmul rate of this machine, the yardstick for model FLOP utilisation."""

from __future__ import annotations

import time

import torch


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Best GFLOP/s of an n x n x n float32 matmul over ``repeats`` runs."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def measure_peak_flops(device: str = "cpu", size: int = 1024, repeats: int = 5) -> float:
    """Float32 matmul throughput of ``device`` (FLOP/s): a measured lower bound on its peak,
    for a run to record as ``peak_flops`` when the vendor's figure is not at hand."""
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
