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
