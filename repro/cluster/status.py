"""The experiments ledger: one JSON file per submission, and the states of its jobs.

Layout under the state directory (``--state-dir``, env ``REPRO_CLUSTER_STATE``, default
``runs/cluster``): ``submissions/<id>.json`` (the ledger), ``submitit/<id>/`` (submitit's
pickles and logs) and ``jobs/<id>/<job>/`` (each job's ``out_dir``: checkpoints, metrics).
SLURM jobs' states come from ``sacct`` (accounting sees cancelled and finished jobs), with
``squeue`` for jobs accounting has not recorded yet; local jobs' from submitit's result files.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from submitit.core.utils import JobPaths

from repro.errors import ConfigError
from repro.atomic import atomic_write_text

ENV_STATE_DIR = "REPRO_CLUSTER_STATE"


def default_state_dir() -> Path:
    env = os.environ.get(ENV_STATE_DIR)
    return Path(env) if env else Path("runs") / "cluster"


@dataclass
class SubmissionRecord:
    id: str
    experiment: str
    profile: str
    executor: str
    created: str
    folder: str
    results_dir: str | None
    job_name: str
    jobs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "SubmissionRecord":
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: a submission record must be a JSON object")
        names = list(cls.__dataclass_fields__)
        for name in names:
            if name not in data:
                raise ConfigError(f"{source}: submission record lacks field '{name}'")
        if not isinstance(data["jobs"], list) or not all(isinstance(j, dict) and "job_id" in j for j in data["jobs"]):
            raise ConfigError(f"{source}: field 'jobs' must be a list of objects with a 'job_id'")
        return cls(**{n: data[n] for n in names})


class Ledger:
    """Submission records under ``root/submissions``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def directory(self) -> Path:
        return self.root / "submissions"

    def write(self, record: SubmissionRecord) -> Path:
        path = self.directory / f"{record.id}.json"
        atomic_write_text(path, json.dumps(record.to_dict(), indent=2) + "\n")
        return path

    def read_all(self) -> list[SubmissionRecord]:
        records = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as err:
                raise ConfigError(f"{path}: not a readable submission record ({err})") from None
            records.append(SubmissionRecord.from_dict(data, str(path)))
        return sorted(records, key=lambda r: (r.created, r.id))


_ARRAY = re.compile(r"^(\d+)_\[(.+)\]$")


def expand_job_ids(job_id: str) -> list[str]:
    """``123_[2-4,7%2]`` (a pending array in sacct/squeue) -> ``123_2 123_3 123_4 123_7``."""
    match = _ARRAY.match(job_id)
    if not match:
        return [job_id]
    base, spec = match.group(1), match.group(2).split("%")[0]
    ids = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ids += [f"{base}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def _query(cmd: list[str]) -> list[list[str]]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return [line.split("|") for line in proc.stdout.splitlines() if line.strip()]


def slurm_states(job_ids: list[str]) -> dict[str, str]:
    """SLURM job id -> state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``CANCELLED``, ...)."""
    if not job_ids:
        return {}
    states: dict[str, str] = {}
    for row in _query(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)]):
        for jid in expand_job_ids(row[0]):
            states[jid] = row[1].split()[0] if row[1] else "UNKNOWN"
    missing = [j for j in job_ids if j not in states]
    if missing:
        for row in _query(["squeue", "-h", "-o", "%i|%T", "-j", ",".join(missing)]):
            for jid in expand_job_ids(row[0]):
                states.setdefault(jid, row[1])
    return {j: states.get(j, "UNKNOWN") for j in job_ids}


def local_state(folder: str | Path, job_id: str) -> str:
    """The state of a job run by submitit's local executor, from its result file and pid."""
    paths = JobPaths(folder, job_id=job_id, task_id=0)
    if paths.result_pickle.exists():
        try:
            with paths.result_pickle.open("rb") as fh:
                outcome = pickle.load(fh)[0]  # submitit's own file: ("success" | "error", payload)
        except (OSError, EOFError, pickle.UnpicklingError, IndexError, TypeError):
            return "UNKNOWN"
        return "COMPLETED" if outcome == "success" else "FAILED"
    try:
        os.kill(int(job_id), 0)
    except (ValueError, ProcessLookupError):
        return "LOST"
    except PermissionError:
        pass
    return "RUNNING"


def job_states(record: SubmissionRecord) -> list[dict[str, Any]]:
    """Each job of ``record`` with its current state."""
    ids = [str(j["job_id"]) for j in record.jobs]
    if record.executor == "slurm":
        states = slurm_states(ids)
    else:
        states = {j: local_state(record.folder, j) for j in ids}
    return [{**job, "state": states[str(job["job_id"])]} for job in record.jobs]
