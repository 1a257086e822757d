"""The arithmetic a claim is measured in: IEEE fp32, whatever the device and whatever the job set.

A claim about an equation (Eq. 1's attention, Eq. 2's feed-forward, Section 5.4's smoothed loss)
asks whether the code computes that function. On a CPU fp32 products are IEEE fp32; on an Ampere or
Hopper GPU a job turns on TF32 matrix products (10-bit mantissas, :func:`repro.model.precision.set_tf32`)
and the fused attention kernels may compute fp32 inputs at reduced precision. Held to tolerances set
in IEEE fp32, those errors (~1e-3 on a Transformer layer, seen on an H200) fail claims that pass on
the CPU: the verdict would depend on the hardware, not on the code.

:func:`ieee_fp32` pins, for the duration of one check, what torch lets a process choose:

- fp32 matrix products at "highest" precision (no TF32 on CUDA, no bf16/TF32 in oneDNN on the CPU);
- cuDNN's TF32 off;
- scaled dot-product attention restricted to kernels that compute fp32 inputs in fp32: the math
  kernel, and the flash kernel where it takes fp32 at all (the CPU's); not the memory-efficient or
  cuDNN kernels, which reach fp32 through tensor-core shortcuts on a GPU;

and restores the caller's settings afterwards, also when the check raises. While it is in force, a
job that asks for TF32 (:func:`repro.model.precision.set_tf32`) does not get it: the pin wins.

Every check record says which arithmetic its figure was measured in (``arithmetic``). The job's fast
path in the job's own arithmetic (bf16 autocast, TF32, the flash kernels) is measured by the
benchmarks and the reduced jobs of ``repro selftest``, and held to bf16's tolerances by the tests of
mixed precision, not by the claims.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

#: What a check record says when the claim was measured under :func:`ieee_fp32` (the default).
IEEE_FP32 = "ieee-fp32"
_state = threading.local()


def pinned() -> bool:
    """Whether :func:`ieee_fp32` is in force in this thread."""
    return getattr(_state, "depth", 0) > 0


def _sdpa_flags() -> dict[str, bool]:
    cuda = torch.backends.cuda
    return {"flash": cuda.flash_sdp_enabled(), "mem_efficient": cuda.mem_efficient_sdp_enabled(),
            "math": cuda.math_sdp_enabled(), "cudnn": cuda.cudnn_sdp_enabled()}


def _set_sdpa_flags(flags: dict[str, bool]) -> None:
    cuda = torch.backends.cuda
    cuda.enable_flash_sdp(flags["flash"])
    cuda.enable_mem_efficient_sdp(flags["mem_efficient"])
    cuda.enable_math_sdp(flags["math"])
    cuda.enable_cudnn_sdp(flags["cudnn"])


def _legacy(read) -> object | None:
    """A setting read through torch's legacy API, or None where the caller mixed the legacy and
    the new API (torch then refuses to read it)."""
    try:
        return read()
    except RuntimeError:
        return None


#: torch's per-backend fp32 settings (torch >= 2.9): always readable, restored exactly.
_FP32_SETTINGS = (("", ""), ("cuda.matmul", ""), ("mkldnn", ""), ("mkldnn.matmul", ""), ("cudnn", ""))


def _backend(path: str):
    obj = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


def _fp32_settings() -> dict[str, str]:
    return {path: getattr(_backend(path), "fp32_precision") for path, _ in _FP32_SETTINGS
            if hasattr(_backend(path), "fp32_precision")}


@dataclass(frozen=True)
class Settings:
    """What decides fp32 arithmetic in this process: the legacy switches (None where torch refuses
    to read them), torch's per-backend fp32 settings and the attention kernels enabled."""

    matmul: str | None
    cudnn_tf32: bool | None
    fp32: dict[str, str]
    sdpa: dict[str, bool]


def snapshot() -> Settings:
    return Settings(_legacy(torch.get_float32_matmul_precision),
                    _legacy(lambda: bool(torch.backends.cudnn.allow_tf32)), _fp32_settings(), _sdpa_flags())


def restore(settings: Settings) -> None:
    """Put ``settings`` back (where the caller had mixed torch's legacy and new switches, the legacy
    one follows its CUDA matmul setting)."""
    matmul = settings.matmul
    if matmul is None:
        matmul = "high" if settings.fp32.get("cuda.matmul") == "tf32" else "highest"
    torch.set_float32_matmul_precision(matmul)
    if settings.cudnn_tf32 is not None:
        torch.backends.cudnn.allow_tf32 = settings.cudnn_tf32
    for path, value in settings.fp32.items():
        setattr(_backend(path), "fp32_precision", value)
    _set_sdpa_flags(settings.sdpa)


def tf32_matmul() -> bool:
    """Whether fp32 matrix products on CUDA run in TF32 now (what a GPU's cuBLAS reads)."""
    leaf = _fp32_settings()
    own = leaf.get("cuda.matmul", "none")
    return (own if own != "none" else leaf.get("", "none")) == "tf32"


@contextmanager
def ieee_fp32() -> Iterator[None]:
    """IEEE fp32 arithmetic for what runs inside (see the module docstring); the caller's settings
    come back on exit."""
    caller = snapshot()
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        torch.set_float32_matmul_precision("highest")   # the legacy switch and every backend's matmul
        if caller.cudnn_tf32 is not None:
            torch.backends.cudnn.allow_tf32 = False
        _set_sdpa_flags({**caller.sdpa, "mem_efficient": False, "cudnn": False, "math": True})
        yield
    finally:
        _state.depth -= 1
        restore(caller)


def current() -> dict[str, object]:
    """The settings that decide fp32 arithmetic now (for records and tests)."""
    return {"float32_matmul_precision": _legacy(torch.get_float32_matmul_precision),
            "cuda_tf32": _legacy(lambda: bool(torch.backends.cuda.matmul.allow_tf32)),
            "cudnn_tf32": _legacy(lambda: bool(torch.backends.cudnn.allow_tf32)),
            "fp32": _fp32_settings(), "sdpa": _sdpa_flags(), "pinned": pinned()}
