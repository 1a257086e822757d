"""Provenance of a measurement: which commit, config, hardware and data produced it.

A result without provenance is refused by the store and by the reporter: a figure that
cannot say where it came from cannot be cited.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.files.reader import read_bytes
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


#: The folder that holds the ``repro`` package: a checkout's top level when repro runs from one.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git_commit(repo: Path | None = None) -> str:
    """The project's commit, with ``-dirty`` when tracked source files (:data:`SOURCE_PATHS`) have
    uncommitted changes; asked of git only where git's top level is the project's own checkout
    (``repo``, default :data:`PROJECT_ROOT`). Run from anywhere else (an installed package, a copy of
    ``repro/``, a virtual environment inside another repository, whose HEAD is not this code's) it
    names no commit: :func:`source_identity` instead, which says so. ``REPRO_COMMIT`` (set by whoever
    deployed a known commit) is taken outside a checkout."""
    root = (repo or PROJECT_ROOT).resolve()
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        if Path(top).resolve() != root:
            raise LookupError(f"git's top level {top} is not the project's checkout {root}")
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PATHS],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError, LookupError):
        return os.environ.get("REPRO_COMMIT") or source_identity(root)
    return f"{sha}-dirty" if dirty else sha


@functools.lru_cache(maxsize=4)
def source_identity(root: Path | None = None) -> str:
    """What names the code when no commit can: ``no-git:repro-<version>:sha256-<12 hex>``, the installed
    version and a content hash of the package's source files (``repro/**/*.py`` and the claims it
    ships, by relative path and content), the same for the same code wherever it is installed; hashed
    once per process (the code does not change under a running process)."""
    package = (root or PROJECT_ROOT) / "repro"
    digest = hashlib.sha256()
    files = sorted(p for p in package.rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".csv")
                   and "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + read_bytes(path, "package source")
                      + b"\0")
    return f"no-git:repro-{_version()}:sha256-{digest.hexdigest()[:12]}"


def _version() -> str:
    try:
        return metadata.version("repro")
    except metadata.PackageNotFoundError:
        return "unknown"


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
