"""How much memory this process may still take, and the refusal of work that needs more.

A size within :mod:`repro.limits` (a model of 4.7e9 weights, a bootstrap of 10 million resamples)
may still not fit the machine it is asked of, or the memory limit it runs under (``ulimit -v``, a
SLURM job's cgroup). Such work is refused before it allocates, in one line: "too large for this
machine", what it needs and what there is (exit 2); an allocation that fails anyway
(:class:`MemoryError`, torch's "can't allocate memory") is reported the same way by the CLI.

What there is, is the least of: the memory the kernel calls available (``MemAvailable``), what the
cgroup's ``memory.max`` leaves, and what the address-space limit (``RLIMIT_AS``) leaves beyond the
address space already mapped.
"""

from __future__ import annotations

import resource

import torch

from repro.errors import ReproError
from repro.files.reader import read_text

GIB = 2**30


def _read_number(path: str, field: str | None = None) -> int | None:
    """A number from a small kernel file (``/proc``, ``/sys``): the whole file, or the value of ``field``
    (in kB, as /proc/meminfo and /proc/self/status give it), in bytes; None where there is none."""
    try:
        text = read_text(path, "kernel file", limit=1 << 16)
    except ReproError:
        return None
    if field is None:
        value = text.strip()
        return int(value) if value.isdigit() else None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) > 1 and parts[1].isdigit() else None
    return None


def available_bytes() -> int | None:
    """The memory this process may still allocate (see the module docstring); None where nothing says."""
    candidates = [_read_number("/proc/meminfo", "MemAvailable")]
    limit, used = _read_number("/sys/fs/cgroup/memory.max"), _read_number("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        candidates.append(max(limit - used, 0))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        mapped = _read_number("/proc/self/status", "VmSize") or 0
        candidates.append(max(soft - mapped, 0))
    known = [c for c in candidates if c is not None]
    return min(known) if known else None


def device_free_bytes(device: torch.device | str) -> int | None:
    """Free memory of a GPU (``torch.cuda.mem_get_info``); None for the CPU or where it cannot say."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except (RuntimeError, AssertionError):
        return None


def too_large(needed: int | float, what: str, device: torch.device | str = "cpu") -> str | None:
    """Why ``what``, needing ``needed`` bytes (on ``device``), cannot be done here ("too large for this
    machine"), or None."""
    on_gpu = torch.device(device).type == "cuda"
    free = device_free_bytes(device) if on_gpu else available_bytes()
    if free is None or needed <= free:
        return None
    where = f"on {device}" if on_gpu else "here" + _limit_note()
    return (f"{what} is too large for this machine: it needs about {needed / GIB:.1f} GiB of memory, and "
            f"{free / GIB:.1f} GiB are free {where}")


def available_note() -> str:
    """What memory is free here, in words (for the refusal of work that ran out of it)."""
    free = available_bytes()
    return ("how much memory is free here is unknown" if free is None else
            f"{free / GIB:.1f} GiB of memory are free here{_limit_note()}")


def _limit_note() -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return f" (under a memory limit of {soft / GIB:.1f} GiB: ulimit -v)" if soft != resource.RLIM_INFINITY else ""


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation that failed: Python's MemoryError, torch's CPU allocator or
    CUDA running out."""
    if isinstance(err, MemoryError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text.lower())

