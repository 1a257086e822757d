"""Numeric precision of a run: fp32, or bf16 mixed precision where the hardware computes bf16.

The paper trained in fp32 on P100s (Section 5.2), which have no bf16. Mixed precision keeps the
model's master weights, Adam's state and every checkpoint in fp32 and runs the matrix products
of the forward and backward passes in bf16 under :func:`torch.autocast`; reductions that need
range and precision (the log-sum-exp and the loss of Section 5.4, beam scores of Section 6.1)
stay in fp32. bf16 has fp32's exponent range, so no loss scaling is needed.

``auto`` picks bf16 only where the device computes it natively:

- CUDA: when ``torch.cuda.is_bf16_supported()``; otherwise fp32, with TF32 matrix products
  (on Ampere and later) whenever fp32 is what runs.
- CPU: a probe times a bf16 and an fp32 matrix product at the model's own sizes (2048 tokens x
  d_model x d_ff), once per machine, thread count and torch version: the rates are kept in
  ``$REPRO_CACHE_DIR/precision-probe.json`` (default ``~/.cache/repro``), so every process on one
  machine decides the same way. bf16 is picked only when it is at least :data:`MARGIN` times as
  fast as fp32: a 0.1 s probe of a 256^3 product once flipped from one process to the next, and
  picked bf16 for a d_model-128 parser that ran 10% slower in it. A CPU without AVX512-BF16 or
  AMX emulates bf16 at a few GFLOP/s or less, far below fp32, and the probe says so.

:func:`resolve_precision` returns the choice and the reason, which every run logs and records
in its provenance (``precision``, ``precision_reason``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from repro.errors import ConfigError, ReproError
from repro.files.reader import read_json, read_text
from repro.files.writer import atomic_write_text
from repro.limits import RECORD_BYTES
from repro.model import arithmetic

PRECISIONS = ("auto", "fp32", "bf16")
#: bf16 is picked by ``auto`` on a CPU only when its product is at least this many times as fast as fp32's.
MARGIN = 1.25
#: The probe's product when the model is not known: a base model's FFN on 2048 tokens.
DEFAULT_DIMS = (512, 2048)
PROBE_TOKENS = 2048

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
    return next((set(line.split(":", 1)[1].split()) for line in cpuinfo_lines() if line.startswith("flags")), set())


#: Rounds of the probe, fp32 and bf16 alternating.
PROBE_ROUNDS = 3


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


def matmul_probe(device: str = "cpu", size: int = 256, budget_s: float = 0.05,
                 shape: tuple[int, int, int] | None = None) -> tuple[float, float]:
    """(fp32, bf16) GFLOP/s of an (m x k) @ (k x n) product on ``device`` (``shape``, default
    ``size``^3): a fraction of a second where bf16 is native, more where it is emulated."""
    m, k, n = shape or (size, size, size)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g).to(device), torch.randn(k, n, generator=g).to(device)
    a16, b16 = a.bfloat16(), b.bfloat16()
    # Alternating rounds, the best of each: a burst of load from another process lowers one round,
    # not the one dtype that happened to run during it (the decision is cached per machine).
    fp32 = bf16 = 0.0
    for _ in range(PROBE_ROUNDS):
        fp32 = max(fp32, _rate(a, b, budget_s / PROBE_ROUNDS))
        bf16 = max(bf16, _rate(a16, b16, budget_s / PROBE_ROUNDS))
    return fp32, bf16


def cache_file() -> Path:
    """Where the probe's rates are kept: ``$REPRO_CACHE_DIR/precision-probe.json`` (default ~/.cache/repro)."""
    root = os.environ.get("REPRO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "repro")
    return Path(root) / "precision-probe.json"


def _machine_key(shape: tuple[int, int, int]) -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo_lines() if line.startswith("model name")),
               platform.processor() or platform.machine())
    native = "/".join(sorted(f for f in ("amx_bf16", "avx512_bf16") if f in cpu_flags())) or "none"
    return (f"{cpu}|bf16 flags {native}|{torch.get_num_threads()} threads|torch {torch.__version__}|"
            f"{shape[0]}x{shape[1]}x{shape[2]}")


def cpuinfo_lines() -> list[str]:
    """The lines of /proc/cpuinfo (none where there is none)."""
    try:
        return read_text("/proc/cpuinfo", "CPU description", limit=RECORD_BYTES.hard, undecodable="keep").splitlines()
    except ReproError:
        return []


def machine_rates(shape: tuple[int, int, int]) -> tuple[float, float, str]:
    """(fp32, bf16) GFLOP/s of this machine at ``shape``, probed once per machine, thread count and
    torch version (then read from :func:`cache_file`), and where they came from."""
    key = _machine_key(shape)
    path = cache_file()
    try:
        known = read_json(path, "precision probe cache", allow_nan=False) if os.path.lexists(path) else {}
    except ReproError:
        known = {}   # a damaged cache is probed again and rewritten
    entry = known.get(key) if isinstance(known, dict) else None
    if isinstance(entry, dict) and isinstance(entry.get("fp32"), (int, float)) and \
            isinstance(entry.get("bf16"), (int, float)):
        return float(entry["fp32"]), float(entry["bf16"]), f"probed {entry.get('date', '?')}, cached in {path}"
    fp32, bf16 = matmul_probe("cpu", budget_s=0.25, shape=shape)
    known = known if isinstance(known, dict) else {}
    known[key] = {"fp32": round(fp32, 2), "bf16": round(bf16, 2), "date": _dt.date.today().isoformat()}
    try:
        atomic_write_text(path, json.dumps(known, indent=1, sort_keys=True), within=path.parent)
        where = f"probed now, cached in {path}"
    except (OSError, ReproError):
        where = "probed now (not cached: the cache folder is not writable)"
    return fp32, bf16, where


@lru_cache(maxsize=None)
def _cached_probe(device: str, shape: tuple[int, int, int] | None = None) -> tuple[float, float, str]:
    return machine_rates(shape or (PROBE_TOKENS, *DEFAULT_DIMS))


def set_tf32(enabled: bool) -> None:
    """TF32 matrix products and convolutions on CUDA (no effect on the CPU). Inside a check
    (:func:`repro.model.arithmetic.ieee_fp32`) the check's IEEE fp32 wins: nothing changes."""
    if arithmetic.pinned():
        return
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def resolve_precision(name: str, device: torch.device | str = "cpu", *, probe: Probe | None = None,
                      dims: tuple[int, int] | None = None) -> Precision:
    """``auto``, ``fp32`` or ``bf16`` on ``device`` -> the :class:`Precision` the run uses, with the reason.

    ``dims`` (d_model, d_ff) of the model sizes the CPU's probe; ``probe`` replaces the measured,
    cached probe (tests inject one)."""
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
    shape = (PROBE_TOKENS, *(dims or DEFAULT_DIMS))
    if probe is not None:
        (fp32, bf16), where = probe("cpu"), "injected probe"
    else:
        fp32, bf16, where = _cached_probe("cpu", shape)
    measured = (f"probe at {shape[0]}x{shape[1]} @ {shape[1]}x{shape[2]}: bf16 {bf16:.1f} vs fp32 {fp32:.1f} GFLOP/s "
                f"({where}); CPU flags {'/'.join(native) or 'no amx_bf16/avx512_bf16'}")
    if name == "bf16":
        return Precision("bf16", f"asked for (--precision bf16); {measured}", "cpu")
    if bf16 >= MARGIN * fp32:
        return Precision("bf16", f"auto: bf16 matmul is faster on this CPU, by at least the {MARGIN}x margin ({measured})", "cpu")
    return Precision("fp32", f"auto: bf16 is not faster by the {MARGIN}x margin on this CPU ({measured})", "cpu")


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
