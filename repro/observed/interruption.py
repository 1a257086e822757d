"""Whether a run's last session was interrupted, and where its records stop.

A session writes its checkpoints and metrics rows as it trains, but the run's record (``run.json``,
:mod:`repro.train.run_record`) only when it ends. A session killed before its end (a SLURM time limit,
preemption, an out-of-memory kill, Ctrl-C: SIGKILL, SIGTERM and SIGINT all end ``repro train`` before
it writes the record) leaves records that say so, each of them a sign that no later record explains:

- checkpoints, but no run record (no session of the run ended);
- a newest checkpoint past the update the run record ends at (a later session, resumed, that never ended);
- metrics rows past the newest checkpoint (updates made after it, lost: a resume makes them again);
- a last metrics row cut short (no line end: the kill came as it was written).

The run's records then hold, consistently, what happened up to its newest checkpoint (the point a
resume restarts from, :func:`repro.train.resume.restore`). ``repro check --run`` checks what they say
up to it, and says "needs another run" (the run was interrupted) for what only a session's end writes.
A run record whose ``steps`` lie *past* the newest checkpoint is no interruption: a contradiction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Interruption:
    """Where an interrupted run's records stop (module docstring)."""

    #: the newest checkpoint's update: the run's last consistent point, where a resume restarts
    last_step: int
    #: the update the run record ends at (None: no session of the run ended)
    recorded: int | None
    #: the updates the recipe asks for
    max_steps: int | None
    #: what shows the interruption, in words
    signs: tuple[str, ...]
    #: the run's folder
    path: str

    @property
    def unrecorded_from(self) -> int:
        """The update after which the sessions the record does not list made the run's updates."""
        return self.recorded or 0

    def describe(self) -> str:
        """One line: where the run stopped, why that reads as an interruption, how to go on."""
        of = f" of its {self.max_steps}" if self.max_steps else ""
        return (f"interrupted: its records stop at update {self.last_step}{of} (its newest checkpoint, "
                f"checkpoints/step_{self.last_step:08d}.pt; {'; '.join(self.signs)}); resume it by rerunning the "
                f"same repro train (or requeueing the job) with --out-dir {self.path}: it restarts from that checkpoint")

    def reason(self, absent: str) -> str:
        """Why a claim is not checked whose record is ``absent`` (in words): the interruption explains it."""
        return f"needs another run: {absent}; the run was {self.describe()}"

    def to_dict(self) -> dict[str, Any]:
        return {"last_step": self.last_step, "recorded_steps": self.recorded, "max_steps": self.max_steps,
                "signs": list(self.signs)}


def interruption(files: Any) -> Interruption | None:
    """The interruption of the run whose records ``files`` (a :class:`~repro.observed.run_files.RunFiles`)
    holds, or None when its last session ended (module docstring)."""
    if files.newest is None:
        return None
    last = files.newest.step
    recorded = files.record.get("steps") if files.record is not None else None
    signs = []
    if files.record is None:
        signs.append(f"no {files.record_path.name}: no session of the run ended")
    elif isinstance(recorded, int) and recorded < last:
        signs.append(f"{files.record_path.name} ends at update {recorded}: the sessions after it never ended")
    past = [r.step for r in files.metrics or () if r.step > last]
    if past:
        span = f"update {past[0]}" if len(past) == 1 else f"updates {past[0]}-{past[-1]}"
        signs.append(f"{files.metrics_path.name} logs {span} past it, lost")
    if files.cut_row is not None:
        signs.append(f"{files.metrics_path.name} line {files.cut_row} was cut as it was written (left out)")
    if not signs or (isinstance(recorded, int) and recorded > last):
        return None
    max_steps = files.train.get("max_steps")
    return Interruption(last, recorded if isinstance(recorded, int) else None,
                        max_steps if isinstance(max_steps, int) else None, tuple(signs), str(files.path))
