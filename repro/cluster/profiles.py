"""Cluster profiles: the hardware a reproduction job asks SLURM for (Section 5.2).

A profile is a TOML file under ``slurm/`` (``paper-p100.toml`` mirrors the paper's one machine
with 8 P100 GPUs). Every field is checked before anything is submitted; a bad or missing field
raises :class:`ClusterProfileError` naming the file and the field.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from repro.errors import ConfigError
from repro.files.reader import read_toml
from repro.files.text_decoding import unprintable
from repro.limits import SLURM_COUNT, TIMEOUT_MIN
from repro.shipped import shipped_dir

ENV_PROFILE_DIR = "REPRO_SLURM_PROFILES"
EXECUTORS = ("slurm", "local", "auto")


class ClusterProfileError(ConfigError):
    """A cluster profile that cannot be submitted; the message names the file and field."""


@dataclass(frozen=True)
class ClusterProfile:
    """What one job of an experiment gets: ``nodes`` x ``tasks_per_node`` processes.

    One process per GPU (NCCL); on a CPU-only cluster ``gpus_per_node`` is 0 and the processes
    talk over gloo. ``max_tokens_per_device`` is what one forward pass fits on one device; the
    gradient accumulation that reaches the paper's 25000 tokens per update follows from it.
    """

    name: str
    path: Path
    description: str
    executor: str
    partition: str
    nodes: int
    gpus_per_node: int
    gpu_type: str
    tasks_per_node: int
    cpus_per_task: int
    mem_gb: int
    time_limit_min: int
    account: str
    qos: str
    constraint: str
    max_requeues: int
    max_tokens_per_device: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    def resources(self) -> dict[str, Any]:
        """The fields a job's resources are made of, as JSON (no file path)."""
        data = asdict(self)
        data.pop("path")
        data.pop("description")
        data["profile"] = data.pop("name")
        data["world_size"] = self.world_size
        return data


#: field -> (type, required, default). Strings default to "" (= not passed to sbatch).
_FIELDS: dict[str, tuple[type, bool, Any]] = {
    "description": (str, False, ""),
    "executor": (str, False, "slurm"),
    "partition": (str, False, ""),
    "nodes": (int, True, None),
    "gpus_per_node": (int, True, None),
    "gpu_type": (str, False, ""),
    "tasks_per_node": (int, False, None),  # default: one per GPU, else 1
    "cpus_per_task": (int, True, None),
    "mem_gb": (int, True, None),
    "time_limit_min": (int, True, None),
    "account": (str, False, ""),
    "qos": (str, False, ""),
    "constraint": (str, False, ""),
    "max_requeues": (int, False, 10),
    "max_tokens_per_device": (int, True, None),
}

#: Text fields that reach the sbatch script.
SCRIPT_FIELDS = ("partition", "gpu_type", "account", "qos", "constraint")


def profile_dir() -> Path:
    """``$REPRO_SLURM_PROFILES`` if set, else ``slurm/`` of the checkout, else the profiles the package ships."""
    env = os.environ.get(ENV_PROFILE_DIR)
    return Path(env) if env else shipped_dir("slurm", "slurm_profiles")


def available_profiles() -> list[str]:
    directory = profile_dir()
    return sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []


def resolve_profile_path(name_or_path: str) -> Path:
    """A profile name (``paper-p100``) in :func:`profile_dir`, or a path to a TOML file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.parent != Path("."):
        if not candidate.is_file():
            raise ClusterProfileError(f"{candidate}: cluster profile not found")
        return candidate
    path = profile_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(available_profiles()) or "none"
        raise ClusterProfileError(f"unknown cluster profile '{name_or_path}' (no {path}); known profiles: {known}")
    return path


def load_profile(name_or_path: str) -> ClusterProfile:
    """Read and validate one profile."""
    path = resolve_profile_path(name_or_path)
    data = read_toml(path, "cluster profile", error=ClusterProfileError)
    return parse_profile(data, path)


def parse_profile(data: dict[str, Any], path: Path) -> ClusterProfile:
    """Validate ``data`` (a parsed TOML table) field by field."""

    def fail(field: str, why: str) -> ClusterProfileError:
        return ClusterProfileError(f"{path}: field '{field}' {why}")

    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise fail(unknown[0], f"is not a profile field (known: {', '.join(_FIELDS)})")
    values: dict[str, Any] = {}
    for field, (kind, required, default) in _FIELDS.items():
        if field not in data:
            if required:
                raise fail(field, "is missing")
            values[field] = default
            continue
        value = data[field]
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise fail(field, f"must be an integer, got {value!r}")
        if kind is str and not isinstance(value, str):
            raise fail(field, f"must be a string, got {value!r}")
        values[field] = value

    for field in SCRIPT_FIELDS:  # these go into the sbatch script, one #SBATCH line each
        bad = unprintable(values[field])
        if bad is not None:
            raise fail(field, f"holds the unprintable character {bad!r} (got {values[field]!r}); it would reach the "
                              "job script, which takes printable text only")
        if any(c.isspace() for c in values[field]):   # passed a dry run, then sbatch refused the job
            raise fail(field, f"holds whitespace (got {values[field]!r}); SLURM's partition, account, QOS, feature "
                              "and GPU type names hold none")
    for field in ("nodes", "cpus_per_task", "mem_gb", "time_limit_min", "max_tokens_per_device"):
        if values[field] <= 0:
            raise fail(field, f"must be positive, got {values[field]}")
    if values["time_limit_min"] > TIMEOUT_MIN.hard:
        raise fail("time_limit_min", f"must be at most {TIMEOUT_MIN.hard} ({TIMEOUT_MIN.why}), got {values['time_limit_min']}")
    for field in ("gpus_per_node", "max_requeues"):
        if values[field] < 0:
            raise fail(field, f"must be >= 0, got {values[field]}")
    for field, (kind, _, _) in _FIELDS.items():   # 10**20 nodes passed a dry run, then failed in sbatch
        if kind is int and values[field] is not None and values[field] > SLURM_COUNT.hard:
            raise fail(field, f"must be at most {SLURM_COUNT.hard} ({SLURM_COUNT.why}), got {values[field]}")
    if values["executor"] not in EXECUTORS:
        raise fail("executor", f"must be one of {', '.join(EXECUTORS)}, got {values['executor']!r}")
    gpus = values["gpus_per_node"]
    if values["tasks_per_node"] is None:
        values["tasks_per_node"] = gpus or 1
    tasks = values["tasks_per_node"]
    if tasks <= 0:
        raise fail("tasks_per_node", f"must be positive, got {tasks}")
    if gpus and tasks != gpus:
        raise fail("tasks_per_node", f"must equal gpus_per_node ({gpus}): one process per GPU, got {tasks}")
    if values["gpu_type"] and not gpus:
        raise fail("gpu_type", "is set but gpus_per_node is 0")
    return ClusterProfile(name=path.stem, path=path, **values)
