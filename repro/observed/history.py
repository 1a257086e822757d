"""The recipe each update of a run trained with, and the record that states it.

``repro train`` resumes a run from its newest checkpoint with the recipe it is given then: ``--set
warmup_steps=2000`` on a run that began with 4000 is taken, so a run's recipe is one per session, not one
per run. Each part of the run is read from two records: the session of ``run.json`` that ran it keeps its
training config (``sessions[].train``; records written before that lack it), and each checkpoint holds the
recipe of the session that wrote it. A statement judged over the whole run (Eq. 3's rates, the warm-up,
label smoothing, Adam; the loop refuses a resume that changes the model or the batch) is judged on each
part with that part's recipe (:func:`parts`), and a change of a setting it reads (:func:`changes`) is
what the run did: it departs, naming the update the setting changed at, never passes on the last
session's value alone.

``run.json`` states the recipe of the session it ends with; where it says otherwise than the checkpoint
that session wrote, the records contradict each other (:func:`stated_as_checkpointed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from repro.claims.outcome import Contradiction
from repro.train.config import recipe_identity

#: Training settings a resume may change without changing what is trained (the updates asked for).
_NOT_RECIPE = ("max_steps",)


@dataclass(frozen=True)
class Part:
    """Updates ``first`` onwards of a run, trained with ``train`` (as ``where`` records it)."""

    first: int
    train: dict[str, Any]
    where: str


def _identity(train: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in recipe_identity(train)["train"].items() if k not in _NOT_RECIPE}


def _session_start(sessions: list[dict[str, Any]], step: int) -> int | None:
    return next((s["resumed_from"] for s in sessions if s["resumed_from"] < step <= s["ended_at"]), None)


def parts(files: Any) -> list[Part]:
    """The parts of the run in order, each with the training config it ran: from the sessions of its record
    that keep theirs, else from its kept checkpoints (a part then begins after the session that wrote the
    checkpoint resumed, else after the checkpoint before it)."""
    sessions = list((files.record or {}).get("sessions") or [])
    found: list[tuple[int, dict[str, Any], str]] = []
    for i, session in enumerate(sessions):
        if isinstance(session.get("train"), dict):
            found.append((session["resumed_from"], session["train"], f"{files.record_path}: field 'sessions[{i}].train'"))
    covered = [(s["resumed_from"], s["ended_at"]) for s in sessions if isinstance(s.get("train"), dict)]
    before = 0
    for ckpt in files.kept:
        _written_as_recorded(files, sessions, ckpt)
        if not any(start < ckpt.step <= end for start, end in covered) and ckpt.train_config:
            start = _session_start(sessions, ckpt.step)
            found.append((start if start is not None else before, ckpt.train_config, str(ckpt.path)))
        before = ckpt.step
    out: list[Part] = []
    for start, train, where in sorted(found, key=lambda f: f[0]):
        if not out or _identity(train) != _identity(out[-1].train):
            out.append(Part(start + 1 if out else 1, train, where))
    return out


def _written_as_recorded(files: Any, sessions: list[dict[str, Any]], ckpt: Any) -> None:
    """A checkpoint a session of the run wrote holds the training config ``run.json`` keeps for that session
    (what is trained: where it ran and how many updates it asked for aside)."""
    i = next((i for i, s in enumerate(sessions) if s["resumed_from"] < ckpt.step <= s["ended_at"]
              and isinstance(s.get("train"), dict)), None)
    if i is None or not ckpt.train_config:
        return
    mine, theirs = _identity(sessions[i]["train"]), _identity(json.loads(json.dumps(ckpt.train_config, default=str)))
    key = next((k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)), None)
    if key is not None:
        raise Contradiction(f"{files.record_path}: field 'sessions[{i}].train.{key}' is {mine.get(key)!r}, but "
                            f"{ckpt.path.name}, which that session wrote, holds {theirs.get(key)!r}", mine.get(key))


def changes(files: Any, keys: tuple[str, ...], value: Any = None) -> list[str]:
    """How the run changed what ``keys`` read at its resumes, in words ("warmup_steps 4000 for updates 1-4,
    then 2000 from update 5 (where it is recorded)"); ``value(train)`` reads it (default: the keys' values)."""
    read = value or (lambda train: tuple(train.get(k) for k in keys))
    said = []
    found = parts(files)
    for before, after in zip(found, found[1:]):
        old, new = read(before.train), read(after.train)
        if old != new:
            old, new = (old[0], new[0]) if value is None and len(keys) == 1 else (old, new)
            said.append(f"{'/'.join(keys)} {old!r} for updates {before.first}-{after.first - 1}, then {new!r} from "
                        f"update {after.first} ({after.where}): the run was resumed with another recipe")
    return said


def stated_as_checkpointed(files: Any) -> None:
    """``run.json``'s recipe must be the one the checkpoint its last session ended at holds (any field)."""
    stated = (files.record or {}).get("recipe")
    steps = (files.record or {}).get("steps")
    ckpt = next((c for c in files.kept if c.step == steps and c.recipe), None)
    if not isinstance(stated, dict) or ckpt is None:
        return
    held = json.loads(json.dumps(ckpt.recipe, default=str))   # as run.json writes it (a tuple is a list there)
    for section in sorted(set(stated) | set(held)):
        mine, theirs = stated.get(section), held.get(section)
        if isinstance(mine, dict) and isinstance(theirs, dict):
            key = next((k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)), None)
            if key is not None:
                raise Contradiction(f"{files.record_path}: field 'recipe.{section}.{key}' is {mine.get(key)!r}, but "
                                    f"the run's checkpoint {ckpt.path.name} holds {theirs.get(key)!r}", mine.get(key))
        elif mine != theirs:
            raise Contradiction(f"{files.record_path}: field 'recipe.{section}' is {mine!r}, but the run's checkpoint "
                                f"{ckpt.path.name} holds {theirs!r}", mine)


__all__ = ["Part", "changes", "parts", "stated_as_checkpointed"]
