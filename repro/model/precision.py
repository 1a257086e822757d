"""Numeric precision of a run: fp32, or bf16 mixed precision where the hardware computes bf16.

The paper trained in fp32 on P100s (Section 5.2), which have no bf16. Mixed precision keeps the
model's master weights, Adam's state and every checkpoint in fp32 and runs the matrix products
of the forward and backward passes in bf16 under :func:`torch.autocast`; reductions that need
range and precision (the log-sum-exp and the loss of Section 5.4, beam scores of Section 6.1)
stay in fp32. bf16 has fp32's exponent range, so no loss scaling is needed.

``auto`` picks bf16 only where the device computes it natively:

- CUDA: when ``torch.cuda.is_bf16_supported()``; otherwise fp32, with TF32 matrix products
  (on Ampere and later) whenever fp32 is what runs.
- CPU: a short probe times a bf16 and an fp32 matrix product (cached per process); bf16 is
  picked only if it is faster. A CPU without AVX512-BF16 or AMX emulates bf16 at a few GFLOP/s
  or less, far below fp32, and the probe says so.

:func:`resolve_precision` returns the choice and the reason, which every run logs and records
in its provenance (``precision``, ``precision_reason``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from repro.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16")

#: probe(device) -> (fp32 GFLOP/s, bf16 GFLOP/s); injectable for tests
Probe = Callable[[str], tuple[float, float]]


@dataclass(frozen=True)
class Precision:
    """The precision a run computes in: ``name`` (fp32 or bf16), its autocast dtype and why."""

    name: str
    reason: str
    device_type: str = "cpu"

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.name == "bf16" else torch.float32

    @property
    def mixed(self) -> bool:
        return self.name == "bf16"

    def autocast(self) -> AbstractContextManager:
        """The context the forward passes (training, dev loss, decoding, parsing) run under."""
        if not self.mixed:
            return nullcontext()
        return torch.autocast(self.device_type, dtype=torch.bfloat16)

    def provenance(self) -> dict[str, str]:
        return {"precision": self.name, "precision_reason": self.reason}

    def describe(self) -> str:
        return f"precision {self.name} ({self.reason})"


def cpu_flags() -> set[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _rate(a: torch.Tensor, b: torch.Tensor, budget_s: float) -> float:
    """GFLOP/s of ``a @ b`` repeated for about ``budget_s`` seconds (at least twice, after a warm-up)."""
    a @ b
    n, k, m = a.size(0), a.size(1), b.size(1)
    start, runs = time.perf_counter(), 0
    while runs < 2 or time.perf_counter() - start < budget_s:
        a @ b
        runs += 1
    if a.is_cuda:
        torch.cuda.synchronize()
    return 2 * n * k * m * runs / (time.perf_counter() - start) / 1e9


def matmul_probe(device: str = "cpu", size: int = 256, budget_s: float = 0.05) -> tuple[float, float]:
    """(fp32, bf16) GFLOP/s of a ``size``^3 matrix product on ``device``: a fraction of a second
    where bf16 is native, about 0.1 s where it is emulated (~0.3-1 GFLOP/s)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(size, size, generator=g).to(device), torch.randn(size, size, generator=g).to(device)
    fp32 = _rate(a, b, budget_s)
    bf16 = _rate(a.bfloat16(), b.bfloat16(), budget_s)
    return fp32, bf16


@lru_cache(maxsize=None)
def _cached_probe(device: str) -> tuple[float, float]:
    return matmul_probe(device)


def set_tf32(enabled: bool) -> None:
    """TF32 matrix products and convolutions on CUDA (no effect on the CPU)."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def resolve_precision(name: str, device: torch.device | str = "cpu", *, probe: Probe | None = None) -> Precision:
    """``auto``, ``fp32`` or ``bf16`` on ``device`` -> the :class:`Precision` the run uses, with the reason.

    ``probe`` replaces the CPU's measured matmul probe (tests inject one)."""
    if name not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    device = torch.device(device)
    if device.type == "cuda":
        return _resolve_cuda(name, device)
    if device.type != "cpu":
        if name == "bf16":
            return Precision("bf16", f"asked for (--precision bf16) on {device.type}", device.type)
        return Precision("fp32", f"{'asked for' if name == 'fp32' else 'auto: no bf16 rule for'} {device.type}",
                         device.type)
    if name == "fp32":
        return Precision("fp32", "asked for (--precision fp32)", "cpu")
    flags = cpu_flags()
    native = sorted(f for f in ("amx_bf16", "avx512_bf16") if f in flags)
    fp32, bf16 = (probe or _cached_probe)("cpu")
    measured = f"probe: bf16 {bf16:.1f} vs fp32 {fp32:.1f} GFLOP/s; CPU flags {'/'.join(native) or 'no amx_bf16/avx512_bf16'}"
    if name == "bf16":
        return Precision("bf16", f"asked for (--precision bf16); {measured}", "cpu")
    if bf16 > fp32:
        return Precision("bf16", f"auto: bf16 matmul is faster on this CPU ({measured})", "cpu")
    return Precision("fp32", f"auto: bf16 is not faster on this CPU ({measured})", "cpu")


def _resolve_cuda(name: str, device: torch.device) -> Precision:
    supported = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    gpu = torch.cuda.get_device_name(device) if torch.cuda.is_available() else "CUDA"
    if name == "bf16" or (name == "auto" and supported):
        set_tf32(True)   # what stays fp32 under autocast runs as TF32
        why = "asked for (--precision bf16)" if name == "bf16" else f"auto: {gpu} computes bf16 natively"
        return Precision("bf16", why, "cuda")
    set_tf32(True)
    why = "asked for (--precision fp32)" if name == "fp32" else f"auto: {gpu} has no bf16"
    return Precision("fp32", f"{why}; TF32 matrix products on", "cuda")
