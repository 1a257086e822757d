"""submitit executors for a cluster profile, and the submission of an experiment's jobs.

``slurm`` submits with sbatch (several jobs become one job array); ``local`` runs the jobs as
local processes with submitit's LocalExecutor, the fallback where no SLURM answers: several jobs
run ``parallel`` at a time (default one after another: one GPU, or the CPU), each lane one
process running its jobs in turn (:class:`~repro.cluster.job.JobSequence`); ``auto`` picks SLURM
when ``sinfo`` answers, else local.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from repro.cluster.experiments import JobSpec
from repro.cluster.job import JobSequence, TrainingJob
from repro.cluster.process_identity import process_start
from repro.cluster.job_state import RecordsState
from repro.cluster.profiles import ClusterProfile, ClusterProfileError
from repro.cluster.ledger import Ledger, SubmissionRecord


def slurm_reachable(timeout_s: float = 10.0) -> tuple[bool, str]:
    """Whether a SLURM controller answers ``sinfo``; the reason in words when not."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False, "sinfo/sbatch not installed (run slurm/local/setup.sh)"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%P %a %D %t"], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"sinfo did not answer within {timeout_s:.0f} s"
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        return False, f"sinfo failed: {first} (is SLURM_CONF set? run slurm/local/setup.sh)"
    return True, proc.stdout.strip()


def resolve_executor(kind: str | None, profile: ClusterProfile) -> str:
    """``slurm`` or ``local``, from ``--executor`` or the profile's ``executor`` field."""
    kind = kind or profile.executor
    if kind == "auto":
        kind = "slurm" if slurm_reachable()[0] else "local"
    if kind not in ("slurm", "local"):
        raise ClusterProfileError(f"executor must be slurm, local or auto, got {kind!r}")
    if kind == "local" and profile.nodes > 1:
        raise ClusterProfileError(f"{profile.path}: field 'nodes' is {profile.nodes}; the local executor runs one node")
    return kind


def executor_parameters(profile: ClusterProfile, job_name: str, timeout_min: int | None = None,
                        kind: str = "slurm") -> dict[str, Any]:
    """submitit's AutoExecutor parameters for ``profile`` (SLURM-only ones prefixed ``slurm_``).

    On SLURM the GPUs are a generic resource of the node (``--gres=gpu:TYPE:N``) when the profile
    names a type; the local executor takes ``gpus_per_node`` and hands its tasks GPUs 0..N-1
    (``CUDA_VISIBLE_DEVICES``), each task computing on the one of its local rank."""
    params: dict[str, Any] = {
        "name": job_name,
        "timeout_min": timeout_min or profile.time_limit_min,
        "nodes": profile.nodes,
        "tasks_per_node": profile.tasks_per_node,
        "cpus_per_task": profile.cpus_per_task,
        "mem_gb": profile.mem_gb,
    }
    if profile.gpus_per_node:
        if kind == "local":
            params["gpus_per_node"] = profile.gpus_per_node
        elif profile.gpu_type:
            params["slurm_gres"] = f"gpu:{profile.gpu_type}:{profile.gpus_per_node}"
        else:
            params["gpus_per_node"] = profile.gpus_per_node
    for field in ("partition", "account", "qos", "constraint"):
        value = getattr(profile, field)
        if value:
            params[f"slurm_{field}"] = value
    return params


def make_executor(profile: ClusterProfile, folder: Path, kind: str, job_name: str,
                  timeout_min: int | None = None) -> submitit.AutoExecutor:
    executor = submitit.AutoExecutor(folder=folder, cluster=kind)
    executor.update_parameters(**executor_parameters(profile, job_name, timeout_min, kind))
    return executor


@dataclass
class Submitted:
    record: SubmissionRecord
    jobs: list[submitit.Job]


def new_submission_id() -> str:
    """A sortable, unique id: UTC time and a random suffix."""
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def submit_jobs(specs: list[JobSpec], profile: ClusterProfile, *, kind: str, ledger: Ledger,
                results_dir: Path | None, job_name: str, submission_id: str | None = None,
                timeout_min: int | None = None, parallel: int = 1) -> Submitted:
    """Submit ``specs`` (an array when more than one) and record the submission in the ledger. With the
    local executor, several specs run in ``parallel`` lanes, each lane's jobs one after another."""
    if not specs:
        raise ClusterProfileError("nothing to submit: the experiment has no jobs")
    if parallel < 1:
        raise ClusterProfileError(f"parallel must be positive, got {parallel}")
    stamp = _dt.datetime.now(_dt.timezone.utc)
    submission_id = submission_id or new_submission_id()
    folder = ledger.root / "submitit" / submission_id
    executor = make_executor(profile, folder, kind, job_name, timeout_min)
    trainings = [TrainingJob(s.to_dict(), str(results_dir) if results_dir else None, profile.max_requeues)
                 for s in specs]
    lanes = min(parallel, len(trainings)) if kind == "local" and len(trainings) > 1 else 0
    try:
        # each job records how it ended in JSON for `repro status` (repro.cluster.job_state)
        if lanes:   # one process per lane; spec i runs in lane i % lanes
            sequences = [RecordsState(JobSequence(trainings[lane::lanes], profile.max_requeues))
                         for lane in range(lanes)]
            lane_jobs = [executor.submit(seq) for seq in sequences]
            jobs = [lane_jobs[i % lanes] for i in range(len(trainings))]
        elif len(trainings) == 1:
            jobs = [executor.submit(RecordsState(trainings[0]))]
        else:
            with executor.batch():
                jobs = [executor.submit(RecordsState(t)) for t in trainings]
    except submitit.core.utils.FailedJobError as err:
        reason = " ".join(str(err).split())[-400:]
        raise ClusterProfileError(f"{profile.path}: {kind} refused the job(s) of profile '{profile.name}': {reason}") from None
    record = SubmissionRecord(
        id=submission_id, experiment=specs[0].experiment, profile=profile.name, executor=kind,
        created=stamp.isoformat(timespec="seconds"), folder=str(folder),
        results_dir=str(results_dir) if results_dir else None, job_name=job_name,
        jobs=[{"name": s.name, "job_id": str(j.job_id), "out_dir": s.train.get("out_dir"),
               **({"lane": i % lanes} if lanes else {}), **_started(kind, j)}
              for i, (s, j) in enumerate(zip(specs, jobs))],
    )
    ledger.write(record)
    return Submitted(record, jobs)


def _started(kind: str, job: Any) -> dict[str, str]:
    """A local job's process start, so that ``repro status`` never takes a reused pid for the job."""
    if kind != "local":
        return {}
    try:
        started = process_start(int(job.job_id))
    except (TypeError, ValueError):
        return {}
    return {"started": started} if started is not None else {}
