"""How a job ended, in JSON, for ``repro status``: never read from submitit's pickles.

submitit stores a job's outcome as a pickle (``<job>_<task>_result.pkl``). Unpickling runs
whatever code the file names, and ``repro status`` finds its files through a folder named in
the ledger, which anyone who can write the ledger controls; so repro never unpickles. Instead
each job submitted through :func:`repro.cluster.executor.submit_jobs` runs inside
:class:`RecordsState`, which writes ``<folder>/<job>_<task>_state.json`` (``{"state":
"COMPLETED"}`` or ``"FAILED"`` with the error) when the job returns or raises; ``repro status``
reads that, strictly (:mod:`repro.files.strict_json`), and refuses a malformed one by name.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import submitit

from repro.files import reader
from repro.files.writer import atomic_write_text
from repro.errors import ConfigError

#: What a state file may say.
ENDED = ("COMPLETED", "FAILED")


def state_path(folder: str | Path, job_id: str, task: int = 0) -> Path:
    """Where the job ``job_id``'s task ``task`` records how it ended."""
    return Path(folder) / f"{job_id}_{task}_state.json"


def write_state(path: Path, state: str, error: str | None = None) -> None:
    atomic_write_text(path, json.dumps({"state": state, **({"error": error} if error else {})}, indent=1) + "\n")


def read_state(folder: str | Path, job_id: str, task: int = 0) -> str | None:
    """``COMPLETED`` or ``FAILED`` as the job recorded it, or None when it has not ended (or ran
    before state files); a file that says anything else is refused naming it."""
    path = state_path(folder, job_id, task)
    if not path.exists():
        return None
    data = reader.read_json(path, "job state file", error=ConfigError)
    if not isinstance(data, dict) or data.get("state") not in ENDED:
        raise ConfigError(f"{path}: not a job state file (an object whose 'state' is {' or '.join(ENDED)})")
    return data["state"]


class RecordsState(submitit.helpers.Checkpointable):
    """Runs ``job`` (a submitit callable) and records in JSON how it ended; requeues keep the wrapper."""

    def __init__(self, job: Any) -> None:
        self.job = job

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            env = submitit.JobEnvironment()
        except RuntimeError:  # not under submitit: nothing to record for `repro status`
            return self.job(*args, **kwargs)
        path = state_path(env.paths.folder, env.job_id, env.global_rank)
        try:
            result = self.job(*args, **kwargs)
        except Exception as err:
            write_state(path, "FAILED", "".join(traceback.format_exception_only(err)).strip()[-2000:])
            raise
        write_state(path, "COMPLETED")
        return result

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission | None:
        """The wrapped job's own requeue decision, wrapped again (None: not requeued)."""
        inner = getattr(self.job, "checkpoint", None)
        delayed = inner(*args, **kwargs) if inner is not None else None
        if delayed is None:
            return None
        return submitit.helpers.DelayedSubmission(RecordsState(delayed.function), *delayed.args, **delayed.kwargs)
