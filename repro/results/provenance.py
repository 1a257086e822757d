"""Provenance of a measurement: which commit, config, hardware and data produced it.

A result without provenance is refused by the store and by the reporter: a figure that
cannot say where it came from cannot be cited.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.instants import instant
from repro.model.precision import cpu_flags, cpuinfo_lines

REQUIRED_FIELDS = ("commit", "config_hash", "hardware", "dataset", "date", "scale")


@dataclass(frozen=True)
class Provenance:
    """Where a measured value came from.

    ``scale`` says in words how far the run is from the paper's (e.g. "local: 2-core CPU,
    Multi30k, 1500 steps, d_model=256"); ``bleu_signature`` is set for BLEU results and names
    the protocol (sacreBLEU signature or the paper's tokenized protocol).
    """

    commit: str
    config_hash: str
    hardware: str
    dataset: str
    date: str
    scale: str
    bleu_signature: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def instant(self) -> _dt.datetime:
        """``date`` as a timezone-aware moment (:mod:`repro.instants`): what records are compared by."""
        return instant(self.date)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Provenance":
        missing = [k for k in REQUIRED_FIELDS if not data.get(k)]
        if missing:
            raise ValueError(f"provenance lacks {', '.join(missing)}")
        known = {k: data[k] for k in (*REQUIRED_FIELDS, "bleu_signature") if k in data}
        return cls(**known, extra=dict(data.get("extra") or {}))


#: The paths whose uncommitted changes make a result's code differ from its commit: the package,
#: the claims, the SLURM scripts and the build. Changes to reports/ or runs/ (the main job's own
#: writes) do not.
SOURCE_PATHS = ("repro", "claims", "slurm", "pyproject.toml")


def git_commit(repo: Path | None = None) -> str:
    """The current commit, with ``-dirty`` when tracked source files (:data:`SOURCE_PATHS`) have
    uncommitted changes; ``unknown`` outside git."""
    cwd = repo or Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PATHS],
            cwd=cwd, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("REPRO_COMMIT", "unknown")
    return f"{sha}-dirty" if dirty else sha


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what the platform says."""
    return next((line.split(":", 1)[1].strip() for line in cpuinfo_lines() if line.startswith("model name")),
                platform.processor() or platform.machine())


def vector_flags() -> list[str]:
    """The CPU's flags that decide its matrix-product speed: AVX2/FMA, AVX-512 (with BF16) and AMX.
    Machines of the same name differ in them, so every measurement records them."""
    return sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")) or f in ("avx2", "fma"))


def hardware_description() -> str:
    """A one-line description of the device a measurement ran on."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"{torch.cuda.device_count()}x {name} (CUDA {torch.version.cuda}), torch {torch.__version__}"
    flags = " ".join(vector_flags()) or "no AVX2"
    return (f"CPU {cpu_model()} ({flags}), {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}")


def config_hash(config: Any) -> str:
    """A short stable hash of a JSON-serialisable config (dataclasses are converted first)."""
    if hasattr(config, "__dataclass_fields__"):
        config = asdict(config)
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def collect_provenance(
    *, config: Any, dataset: str, scale: str, bleu_signature: str | None = None, **extra: Any
) -> Provenance:
    """Provenance for a measurement taken now, in this process, on this machine."""
    return Provenance(
        commit=git_commit(),
        config_hash=config_hash(config),
        hardware=hardware_description(),
        dataset=dataset,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        scale=scale,
        bleu_signature=bleu_signature,
        extra=extra,
    )
