"""The sustained matrix-product rate of this machine: the yardstick for model FLOP utilisation.

One product is not a yardstick: a single 2048^3 product read 181.6 and 362 GFLOP/s on two
machines of the same kind, while a sustained 4096^3 product gave 179. Here large products run
back to back for ``seconds`` and the figure is the median rate over them (with min and max),
recorded with the CPU model. bf16 is measured the same way (smaller products by default:
where the CPU emulates bf16 a 2048^3 product takes about a minute).

    python -m repro.benchmarks.matmul_peak [--n 2048] [--seconds 5] [--out reports/benchmarks/matmul_peak.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from repro.argtypes import OneLineParser, non_negative_int, positive_float, positive_int
from repro.benchmarks.machine import environment, parse_benchmark_args, publish, spread


def sustained_matmul(n: int = 2048, seconds: float = 5.0, dtype: torch.dtype = torch.float32,
                     min_runs: int = 3) -> dict[str, Any]:
    """GFLOP/s of back-to-back n x n x n products in ``dtype`` for about ``seconds`` (at least
    ``min_runs``, after one warm-up): median, min, max over the products."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g).to(dtype), torch.randn(n, n, generator=g).to(dtype)
    a @ b
    rates, began = [], time.perf_counter()
    while len(rates) < min_runs or time.perf_counter() - began < seconds:
        start = time.perf_counter()
        a @ b
        rates.append(2 * n**3 / (time.perf_counter() - start) / 1e9)
    return {"n": n, "dtype": str(dtype).replace("torch.", ""), "seconds": round(time.perf_counter() - began, 2),
            "gflops": spread(rates, 1)}


def matmul_gflops(n: int = 2048, seconds: float = 3.0) -> float:
    """The sustained fp32 rate (median GFLOP/s of back-to-back n^3 products over ``seconds``)."""
    return float(statistics.median(sustained_matmul(n, seconds)["gflops"]["values"]))


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=positive_int, default=2048, help="fp32 product size")
    parser.add_argument("--seconds", type=positive_float, default=5.0)
    parser.add_argument("--bf16-n", type=non_negative_int, default=512, help="bf16 product size (0: skip bf16)")
    args = parse_benchmark_args(parser, argv)
    out: dict[str, Any] = {"benchmark": "matmul_peak", **environment(args.note),
                           "fp32": sustained_matmul(args.n, args.seconds)}
    if args.bf16_n:
        out["bf16"] = sustained_matmul(args.bf16_n, args.seconds, torch.bfloat16, min_runs=2)
        out["bf16_over_fp32"] = round(out["bf16"]["gflops"]["median"] / out["fp32"]["gflops"]["median"], 4)
    out["peak_gflops"] = out["fp32"]["gflops"]["median"]
    return publish(out, args.out)


if __name__ == "__main__":
    main()
