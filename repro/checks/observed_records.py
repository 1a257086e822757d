"""What a run's records must say of each other before a statement of the paper is judged on them.

A statement read off one record (a logged rate, a kept checkpoint, an evaluation) counts only when
that record is one the run wrote as it ran (``repro check --run``):

- the metrics log holds a row for every update each session of the run logged (its ``log_every`` and the
  update it ended at; a session's own, where the run's record keeps its training config), in order, each
  of an update that happened (:func:`logged_rows`);
- the kept checkpoints are each of the update they are named for, and are the newest the run's
  spacing wrote and its ``keep_checkpoints`` kept (:func:`kept_steps`);
- the sessions of the run's record follow one another and end at its last update (:func:`sessions`);
- each evaluation record is of this run's recipe (:func:`own_evaluations`);
- the checkpoint's model config is the model its recipe builds (:func:`built_as_recipe`).

A run whose last session was interrupted (:mod:`repro.observed.interruption`: killed before it wrote
``run.json``) is checked up to its newest checkpoint: the rows and checkpoints of the sessions its
record does not list must be there, every one, from the update its record ends at (else 0); the rows
logged past the newest checkpoint are lost updates, left out; what only a session's end writes reads
"needs another run", naming the interruption (:func:`written_at_end`).

Each failure is a :class:`~repro.claims.outcome.Contradiction` naming the file, the line or field and
both values: the claims that read the record fail, never pass on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.claims.compare import finite
from repro.claims.outcome import Contradiction, NotRun
from repro.instants import FUTURE_SKEW_S, instant
from repro.observed.run_files import LoggedRow, missing
from repro.results.provenance import config_hash
from repro.train.config import TrainConfig, recipe_identity

#: The model settings the paper states, which a checkpoint's model config must hold as its recipe builds them.
STATED_MODEL = ("n_layers", "d_model", "d_ff", "n_heads", "d_k", "d_v", "dropout")


def run_steps(files: Any) -> int | None:
    """The updates the run made: its newest checkpoint's, else its record's. A run whose last session ended
    (not interrupted) wrote a checkpoint of its last update: a record of more updates than the newest
    checkpoint holds, where the log's last row agrees with the record, names a checkpoint that is missing."""
    recorded = (files.record or {}).get("steps")
    if files.newest is not None:
        logged = files.metrics[-1].step if files.metrics else recorded
        if isinstance(recorded, int) and recorded == logged > files.newest.step and files.interrupted is None:
            raise Contradiction(f"{files.path / 'checkpoints'}: step_{recorded:08d}.pt is missing: {files.record_path} "
                                f"(field 'steps') and {files.metrics_path.name} say the run made {recorded} "
                                f"updates, and it writes a checkpoint of its last; the newest there is of update {files.newest.step}", files.newest.step)
        return files.newest.step
    return recorded if isinstance(recorded, int) else None


def sessions(files: Any) -> list[dict[str, Any]]:
    """The sessions of the run's record, which must follow one another and end at its last update."""
    found = list((files.record or {}).get("sessions") or [])
    for i, session in enumerate(found):
        if session["ended_at"] < session["resumed_from"]:
            raise Contradiction(f"{files.record_path}: field 'sessions[{i}]' ends at update {session['ended_at']}, "
                                f"before it resumed (update {session['resumed_from']})", session["ended_at"])
        if i and session["resumed_from"] < found[i - 1]["ended_at"]:
            raise Contradiction(f"{files.record_path}: field 'sessions[{i}].resumed_from' is {session['resumed_from']}, "
                                f"but the session before it ended at update {found[i - 1]['ended_at']}",
                                session["resumed_from"])
    _dated_in_order(files, found)
    steps = (files.record or {}).get("steps")
    if found and found[-1]["ended_at"] != steps:
        raise Contradiction(f"{files.record_path}: field 'sessions[{len(found) - 1}].ended_at' is "
                            f"{found[-1]['ended_at']}, but field 'steps' is {steps!r}: a session is missing",
                            found[-1]["ended_at"])
    return found


def _dated_in_order(files: Any, found: list[dict[str, Any]]) -> None:
    """Each session is dated when it ended (:func:`repro.train.run_record.write_run_record`): a session resumed
    from the one before it ended after it, give or take another host's clock (:data:`repro.instants.FUTURE_SKEW_S`)."""
    before: tuple[int, Any] | None = None
    for i, session in enumerate(found):
        if session.get("date") is None:
            continue
        try:
            when = instant(session["date"])
        except ValueError as err:
            raise Contradiction(f"{files.record_path}: field 'sessions[{i}].date' {err}", session["date"]) from None
        if before is not None and (before[1] - when).total_seconds() > FUTURE_SKEW_S:
            raise Contradiction(f"{files.record_path}: field 'sessions[{i}].date' is {session['date']}, before "
                                f"'sessions[{before[0]}].date' {found[before[0]]['date']}, the session it resumed after: "
                                "the records' clock runs backwards", session["date"])
        before = (i, when)


def _last_session_start(files: Any) -> int | None:
    """The update the run's last session resumed from (None: the run keeps no record of its sessions);
    of an interrupted run, the update after which its unrecorded sessions made its updates."""
    found = sessions(files)
    if files.interrupted is not None:
        return files.interrupted.unrecorded_from
    return found[-1]["resumed_from"] if found else None


def written_at_end(files: Any, absent: str) -> NotRun:
    """"Needs another run" for want of a record only a session's end (or the evaluation after training)
    writes, ``absent`` saying which; of an interrupted run, naming where it stopped and how to resume it."""
    if files.interrupted is not None:
        return NotRun(files.interrupted.reason(absent))
    return NotRun(f"needs another run: {absent}")


def not_found(files: Any, what: str, path: Path) -> NotRun:
    """:func:`written_at_end` for a record file that is not there (:func:`repro.observed.run_files.missing`)."""
    return written_at_end(files, missing(what, path).removeprefix("needs another run: "))


def logged_rows(files: Any) -> list[LoggedRow]:
    """The rows of the run's metrics log, each of an update that happened (from 1, in order, a finite
    rate, the last at the run's last update), and one for every update each of its sessions logged."""
    path = files.metrics_path
    if files.metrics is None:
        raise NotRun(missing("the metrics log: the rate and tokens of the logged updates", path))
    rows, steps, stopped = files.metrics, run_steps(files), files.interrupted
    for before, row in zip([None, *rows], rows):
        finite(row.lr, f"{path} line {row.line} (step {row.step}): lr")
        if row.step < 1:
            raise Contradiction(f"{path} line {row.line}: step {row.step}; updates count from 1", row.step)
        if before is not None and row.step <= before.step:
            raise Contradiction(f"{path} line {row.line}: step {row.step} after step {before.step}", row.step)
    if stopped is not None:   # the rows past the newest checkpoint are updates the interruption lost
        rows = [r for r in rows if r.step <= steps]
    elif rows and steps is not None and rows[-1].step != steps:
        raise Contradiction(f"{path} line {rows[-1].line}: the log ends at step {rows[-1].step}, but the run made "
                            f"{steps} updates (its newest checkpoint, else {files.record_path.name})", rows[-1].step)
    start = _last_session_start(files)
    end = None if stopped is not None else steps   # the update a session ended at, which it logs
    if start is not None and steps is not None:
        _logged_as_ran(path, rows, files.train.get("log_every"), start, steps, end, "its last session")
    recorded = sessions(files)
    for i, session in enumerate(recorded[:-1] if stopped is None else recorded):   # the sessions before it
        if isinstance(session.get("train"), dict) and session["ended_at"] <= (steps or 0):
            _logged_as_ran(path, rows, session["train"].get("log_every"), session["resumed_from"], session["ended_at"],
                           session["ended_at"], f"its session {i} ({files.record_path.name}: field 'sessions[{i}]')")
    if not rows:
        raise NotRun(f"needs another run: {path} logs no update" +
                     (f" up to update {steps}; the run was {stopped.describe()}" if stopped is not None else ""))
    return rows


def _logged_as_ran(path: Path, rows: list[LoggedRow], every: Any, start: int, last: int, end: int | None,
                   session: str) -> None:
    """The log holds a row for every update a session of the run made from ``start + 1`` to ``last`` that it
    logged (``log_every``, and the update ``end`` it ended at), and none it did not log (but a dev evaluation's)."""
    if not isinstance(every, int) or isinstance(every, bool) or every <= 0:
        return
    logged = {r.step for r in rows}
    due = next((s for s in range(start + 1, last + 1) if (s % every == 0 or s == end) and s not in logged), None)
    if due is not None:
        raise Contradiction(f"{path}: no row for update {due}, which the run logged (log_every {every}; {session} "
                            f"made updates {start + 1}-{last}; {len(rows)} row(s) in the log)", due)
    off = next((r for r in rows if start < r.step <= last and r.step % every and r.step != end
                and r.dev_ppl is None and r.dev_accuracy is None), None)
    if off is not None:
        raise Contradiction(f"{path} line {off.line}: step {off.step} is not an update the run logs (log_every "
                            f"{every}, no dev evaluation on the row)", off.step)


def kept_steps(files: Any) -> list[int]:
    """The updates of the run's kept checkpoints, each the one its file is named for; with a spacing in
    updates, every checkpoint of it the run's last session wrote and its ``keep_checkpoints`` kept."""
    folder = files.path / "checkpoints"
    if not files.kept:
        raise NotRun(missing("the run's checkpoints", folder))
    for ckpt in files.kept:
        if ckpt.path.name != f"step_{ckpt.step:08d}.pt":
            raise Contradiction(f"{ckpt.path}: holds update {ckpt.step} (its field 'step'), but is named for another",
                                ckpt.step)
    steps = [c.step for c in files.kept]
    every, keep = files.train.get("checkpoint_every_steps") or 0, files.train.get("keep_checkpoints") or 0
    if keep > 0 and len(steps) > keep:
        raise Contradiction(f"{folder}: {len(steps)} checkpoints, but the run keeps its newest {keep} "
                            f"(keep_checkpoints)", len(steps))
    start = _last_session_start(files)
    if every > 0 and start is not None:
        since = max(start, steps[0]) if keep > 0 and len(steps) == keep else start
        written = range((since // every + 1) * every, steps[-1], every)
        gone = next((s for s in written if s not in steps), None)
        if gone is not None:
            raise Contradiction(f"{folder}: step_{gone:08d}.pt is missing: the run writes a checkpoint every {every} "
                                f"updates and keeps its newest {keep or 'all'} (kept: updates "
                                f"{', '.join(map(str, steps))})", gone)
    return steps


def recorded_recipe(files: Any, path: Path, result: Any) -> None:
    """An evaluation's ``config_hash`` must be the hash of the recipe it keeps, and that recipe the run's
    (records written before evaluations kept their recipe are not compared: the gate never counts them)."""
    identity = result.provenance.extra.get("recipe_identity")
    if not isinstance(identity, dict):
        return
    if config_hash(identity) != result.provenance.config_hash:
        raise Contradiction(f"{path}: field 'provenance.config_hash' is {result.provenance.config_hash!r}, but the "
                            f"recipe it keeps (provenance.extra.recipe_identity) hashes to {config_hash(identity)!r}",
                            result.provenance.config_hash)
    if result.provenance.config_hash != files.recipe_hash and not _earlier_session(files, identity, result):
        raise Contradiction(f"{path}: field 'provenance.config_hash' is {result.provenance.config_hash!r}, but the run's "
                            f"recipe (its checkpoint's) hashes to {files.recipe_hash!r}: an evaluation of another run",
                            result.provenance.config_hash)


def _earlier_session(files: Any, identity: dict[str, Any], result: Any) -> bool:
    """Whether an evaluation is of this run before a resume asked it for more updates: its recipe is the run's
    but for max_steps, and it evaluated an update the run made (``repro train`` resumes with a larger
    max_steps; :data:`repro.observed.history._NOT_RECIPE`)."""
    ours = recipe_identity(files.train, dict(files.recipe.get("decode") or {}))
    theirs = json.loads(json.dumps(identity))
    for recipe in (ours, theirs):
        recipe.get("train", {}).pop("max_steps", None)
    evaluated = result.provenance.extra.get("steps")
    return json.loads(json.dumps(ours, default=str)) == theirs and isinstance(evaluated, int) \
        and evaluated < (run_steps(files) or 0)


def own_evaluations(files: Any, wanted: Callable[[Any], bool]) -> list[tuple[Path, Any]]:
    """The run's evaluation records a claim reads (``wanted``), each of this run's recipe and of no
    update past its last."""
    out, steps = [], run_steps(files)
    for path, result in files.evaluations.values():
        if not wanted(result):
            continue
        recorded_recipe(files, path, result)
        evaluated = result.provenance.extra.get("steps")
        if isinstance(evaluated, int) and steps is not None and evaluated > steps:
            raise Contradiction(f"{path}: field 'provenance.extra.steps' is {evaluated}, but the run made {steps} "
                                "updates: an evaluation of another run", evaluated)
        out.append((path, result))
    return out


def built_as_recipe(files: Any) -> dict[str, Any]:
    """The newest checkpoint's model config, whose stated settings must be the model its recipe builds."""
    newest, config = files.newest, files.newest.model_config
    if not files.train:
        return config
    built = TrainConfig.from_dict(files.train, source=f"{files.path}: the run's recipe").model_config(
        config.get("src_vocab_size")).to_dict()
    for key in STATED_MODEL:
        if key in config and config[key] != built[key]:
            raise Contradiction(f"{newest.path}: field 'model_config.{key}' is {config[key]!r}, but the run's recipe "
                                f"builds {key} {built[key]!r}", config[key])
    return config
