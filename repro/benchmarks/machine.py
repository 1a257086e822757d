"""What every benchmark records beside its figures: the CPU, the commit, torch, the threads, how
the machine was shared, and the median and spread of repeated, alternated measurements."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import resource
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from repro.argtypes import non_negative_int, output_path
from repro.files.writer import atomic_write_text
from repro.results.provenance import cpu_model, git_commit, vector_flags


def parse_benchmark_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Add the flags every benchmark takes (``--threads``, ``--note``, ``--out``), parse ``argv``,
    and set torch's thread count when ``--threads`` asks for one."""
    parser.add_argument("--threads", type=non_negative_int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--note", default="", help="how the machine was shared (e.g. under the CPU lock)")
    parser.add_argument("--out", type=output_path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def environment(note: str = "") -> dict[str, Any]:
    """The machine and code a benchmark ran on (the CPU's bf16/AMX/AVX-512 flags included)."""
    return {"cpu": cpu_model(),
            "cpu_flags": vector_flags(),
            "threads": torch.get_num_threads(), "torch": torch.__version__, "commit": git_commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "conditions": note}


def alternate(cases: Mapping[str, Callable[[], Any]], rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Wall seconds of each case, run in turn (case A, case B, ..., then again) ``warmup + rounds``
    times, so that every case sees the same machine load; the warm-up rounds are not kept."""
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(warmup + rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            if i >= warmup:
                seconds[name].append(time.perf_counter() - start)
    return seconds


def spread(values: list[float], digits: int = 3) -> dict[str, Any]:
    """Median, min, max and the values themselves (rounded)."""
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "n": len(values), "values": [round(v, digits) for v in values]}


def ratio_spread(slow: list[float], fast: list[float], digits: int = 3) -> dict[str, Any]:
    """The per-round ratios slow/fast (same round: same load) with their median and spread."""
    return spread([s / f for s, f in zip(slow, fast)], digits)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a wall clock read after it sees the work done)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_gib(device: torch.device) -> float:
    """Peak memory in GiB: the device's allocator on CUDA, the process's resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def publish(out: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """Print a benchmark's figures as JSON, and write them (atomically) to ``path`` when given."""
    text = json.dumps(out, indent=2)
    print(text)
    if path:
        atomic_write_text(path, text + "\n")
    return out
