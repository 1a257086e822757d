"""The experiments ledger: one JSON file per submission, and the states of its jobs.

Layout under the state directory (``--state-dir``, env ``REPRO_CLUSTER_STATE``, default
``runs/cluster``): ``submissions/<id>.json`` (the ledger), ``submitit/<id>/`` (submitit's
pickles and logs) and ``jobs/<id>/<job>/`` (each job's ``out_dir``: checkpoints, metrics).
SLURM jobs' states come from ``sacct`` (accounting sees cancelled and finished jobs), with
``squeue`` for jobs accounting has not recorded yet; local jobs' from the JSON state file each job
writes (:mod:`repro.cluster.job_state`; submitit's own result pickles are never read: unpickling
runs code, and the ledger names the folder). Every ledger record is validated against
:data:`SUBMISSION_SCHEMA` (:mod:`repro.validation`) before anything is done with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repro.files import reader
from repro.files.writer import atomic_write_text
from repro.cluster import process_identity
from repro.cluster.job_state import read_state
from repro.errors import ConfigError
from repro.instants import instant
from repro.validation import problem

ENV_STATE_DIR = "REPRO_CLUSTER_STATE"
#: How long after a submission's record was made its local jobs' processes may have started (a batch
#: of jobs is started while the record is written).
START_MARGIN_S = 300.0


#: A SLURM job id (``123``, an array task ``123_4``) or a local job's process id.
JOB_ID = r"^[0-9]{1,18}(_[0-9]{1,9})?$"

SUBMISSION_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "experiment", "profile", "executor", "created", "folder", "results_dir", "job_name", "jobs"],
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"},
        "experiment": {"type": "string", "minLength": 1},
        "profile": {"type": "string", "minLength": 1},
        "executor": {"enum": ["slurm", "local"]},
        "created": {"type": "string", "format": "date-time"},
        "folder": {"type": "string", "minLength": 1},
        "results_dir": {"type": ["string", "null"]},
        "job_name": {"type": "string"},
        "jobs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "job_id"],
            "properties": {"name": {"type": "string", "minLength": 1}, "job_id": {"type": "string", "pattern": JOB_ID},
                           "out_dir": {"type": ["string", "null"]},
                           # the local executor's lane that runs the job (repro.cluster.executor)
                           "lane": {"type": "integer", "minimum": 0},
                           # a local job's process start (repro.cluster.process_identity): its pid alone may
                           # be another process's by now
                           "started": {"type": "string", "maxLength": 200}}}},
    },
}


def default_state_dir() -> Path:
    """``$REPRO_CLUSTER_STATE`` if set (a folder, or nothing yet: ``submit`` makes it), else ``runs/cluster``.
    A file there is refused by name, never read as a ledger without submissions."""
    env = os.environ.get(ENV_STATE_DIR)
    if not env:
        return Path("runs") / "cluster"
    reader.folder_present(env, f"state directory (${ENV_STATE_DIR})")
    return Path(env)


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
        why = problem(data, SUBMISSION_SCHEMA)
        if why is not None:
            raise ConfigError(f"{source}: submission record {why}")
        return cls(**{n: data[n] for n in cls.__dataclass_fields__})


class Ledger:
    """Submission records under ``root/submissions``. With ``skip_invalid``, a malformed record is
    left out and listed in ``skipped`` (path, why); otherwise it raises ConfigError naming it."""

    def __init__(self, root: str | os.PathLike[str], *, skip_invalid: bool = False) -> None:
        self.root = Path(root)
        self.skip_invalid = skip_invalid
        self.skipped: list[tuple[Path, str]] = []

    @property
    def directory(self) -> Path:
        return self.root / "submissions"

    def write(self, record: SubmissionRecord) -> Path:
        path = self.directory / f"{record.id}.json"
        atomic_write_text(path, json.dumps(record.to_dict(), indent=2) + "\n", within=self.root)
        return path

    def read_all(self) -> list[SubmissionRecord]:
        records = []
        self.skipped = []
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(f"{self.directory}: the ledger must be a folder of submission records, but this is a "
                              "file (is --state-dir the right folder?)")
        for path in sorted(self.directory.iterdir()) if self.directory.is_dir() else []:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                continue  # a write in progress, or a killed one the next writer removes (repro.files.writer)
            try:
                records.append(self._read(path))
            except ConfigError as err:
                if not self.skip_invalid:
                    raise
                self.skipped.append((path, str(err)))
        return sorted(records, key=lambda r: (instant(r.created), r.id))

    @staticmethod
    def _read(path: Path) -> SubmissionRecord:
        if path.suffix != ".json" or not path.is_file():
            raise ConfigError(f"{path}: not a submission record (the ledger holds <id>.json files only)")
        record = SubmissionRecord.from_dict(reader.read_json(path, "submission record", error=ConfigError), str(path))
        if record.id != path.stem:
            raise ConfigError(f"{path}: submission record field 'id' is '{record.id}', but the file is named for "
                              f"'{path.stem}'")
        return record


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


def local_state(folder: str | Path, job_id: str, started: str | None = None, created: str | None = None) -> str:
    """The state of a job run by submitit's local executor, from its JSON state file, else from its
    process: RUNNING only while the process with its pid is the one that started at ``started``
    (the ledger's record, :mod:`repro.cluster.process_identity`), or, for records without it, runs
    submitit's job runner for this submission's ``folder`` and started by :data:`START_MARGIN_S`
    after the record was ``created``; a pid now another process's, or gone, reads LOST."""
    ended = read_state(folder, job_id)
    if ended is not None:
        return ended
    if os.path.lexists(Path(folder) / f"{job_id}_0_result.pkl"):
        return "UNKNOWN"  # ended, but submitted before jobs recorded their state (its pickle is not read)
    try:
        pid = int(job_id)
        os.kill(pid, 0)
    except (ValueError, OverflowError, ProcessLookupError):
        return "LOST"
    except PermissionError:
        pass
    if process_identity.has_proc():
        if started is not None:
            return "RUNNING" if process_identity.is_same_process(pid, started) else "LOST"
        if not process_identity.runs_local_job_of(pid, str(folder)):
            return "LOST"
        began = process_identity.started_at(pid)
        if began is None or (created is not None and began > instant(created).timestamp() + START_MARGIN_S):
            return "LOST"
    return "RUNNING"


def job_states(record: SubmissionRecord) -> list[dict[str, Any]]:
    """Each job of ``record`` with its current state."""
    ids = [str(j["job_id"]) for j in record.jobs]
    if record.executor == "slurm":
        states = slurm_states(ids)
    else:
        states = {str(j["job_id"]): local_state(record.folder, str(j["job_id"]), j.get("started"), record.created)
                  for j in record.jobs}
    return [{**job, "state": states[str(job["job_id"])]} for job in record.jobs]
