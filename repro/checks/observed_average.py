"""Section 6.1's checkpoint averaging observed on a run's own records (``repro check --run``, basis ``run``):
"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which were
written at 10-minute intervals. For the big models, we averaged the last 20 checkpoints."

Read off the records of the run's evaluations of its model (``RUN/evaluations/*.json``, written by the
jobs and by ``repro evaluate``): the checkpoints averaged (``provenance.extra.averaged_from``), their
identities as the averaged file kept them (``averaged``: name, update, SHA-256) and the evaluated file's
SHA-256 (``evaluated_sha256``), each compared with the files the run folder holds now. Records that
contradict each other, the run's checkpoints or the files fail; an empty list fails; a run whose
records show no evaluation of its model reads "needs another run".
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from repro.checks.observed_records import kept_steps, own_evaluations, run_steps, written_at_end
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Contradiction, Measurement
from repro.content_hash import file_sha256
from repro.errors import CheckpointError
from repro.instants import FUTURE_SKEW_S, instant
from repro.measures.run_dev import DEV_REQUEST
from repro.observed.judge import judge, paper_job
from repro.recipes import PAPER_STEP_SECONDS
from repro.train.checkpoint import step_of

FIELD = "provenance.extra.averaged_from"


def _steps(names: list[str], where: str) -> list[int]:
    """The updates of checkpoints named ``step_NNNNNNNN.pt``; another name contradicts ``where``'s record."""
    try:
        return [step_of(name) for name in names]
    except CheckpointError as err:
        raise Contradiction(f"{where} names {err}", names) from None


def _in_update_order(names: list[str], where: str) -> list[str]:
    """``names`` oldest first: an average is the same model in whatever order its record lists the checkpoints."""
    return [name for _, name in sorted(zip(_steps(names, where), names))]


def _model_records(files: Any) -> list[tuple[Any, Any]]:
    """The evaluations of the run's trained model for its claims (its own dev evaluation of ``repro train``,
    of the newest checkpoint, left out)."""
    return own_evaluations(files, lambda r: isinstance(r.provenance.extra.get("averaged_from"), list)
                           and r.claim_id != DEV_REQUEST.result_id)


def _same_file(path: Path, field: str, recorded: Any, file: Path) -> None:
    """A SHA-256 a record keeps of a file of the run must be the file's, where the file is still there."""
    if file.is_file() and recorded != (now := file_sha256(file)):
        raise Contradiction(f"{path}: field '{field}' is {recorded!r}, but {file} now hashes to {now!r}: not the "
                            "file that was evaluated", recorded)


def _same_checkpoints(files: Any, path: Path, field: str, averaged: Any, names: list[str]) -> None:
    """The identities (name, update, SHA-256) ``path`` keeps in ``field`` of the checkpoints averaged, against
    the names its evaluation lists and the checkpoint files of the run folder."""
    listed = [a.get("name") for a in averaged]
    if sorted(map(str, listed)) != sorted(names):
        raise Contradiction(f"{path}: field '{field}' names {listed}, but field '{FIELD}' lists {names}", listed)
    for i, identity in enumerate(averaged):
        where = f"{field}[{i}]"
        [step] = _steps([identity["name"]], f"{path}: field '{where}.name'")
        if identity["step"] != step:
            raise Contradiction(f"{path}: field '{where}.step' is {identity['step']!r}, but the checkpoint "
                                f"{identity['name']} holds update {step}", identity["step"])
        _same_file(path, f"{where}.sha256", identity.get("sha256"), files.path / "checkpoints" / identity["name"])
    _written_in_order(path, field, averaged)


def _written_in_order(path: Path, field: str, averaged: Any) -> None:
    """One run writes its checkpoints in the order of their updates: a later update written before an earlier
    one (beyond another host's clock, :data:`repro.instants.FUTURE_SKEW_S`) is no checkpoint of the same run."""
    dated = []
    for i, identity in enumerate(averaged):
        if identity.get("written") is None:
            continue
        try:
            dated.append((identity["step"], instant(identity["written"]), i))
        except ValueError as err:
            raise Contradiction(f"{path}: field '{field}[{i}].written' {err}", identity["written"]) from None
    dated.sort(key=lambda d: d[0])
    for (_, early, i), (step, late, j) in zip(dated, dated[1:]):
        if (early - late).total_seconds() > FUTURE_SKEW_S:
            raise Contradiction(f"{path}: field '{field}[{j}].written' is {averaged[j]['written']}, before "
                                f"'{field}[{i}].written' {averaged[i]['written']}, though it holds the later update {step}: "
                                "not the checkpoints of one run as it wrote them", averaged[j]["written"])


def _identities(files: Any, path: Path, extra: dict[str, Any], names: list[str]) -> None:
    """The identities a record keeps of the averaged checkpoints and of the evaluated file, against its
    names and against the files of the run folder; the model it scored must be the one it names."""
    if extra.get("averaged") is not None:
        _same_checkpoints(files, path, "provenance.extra.averaged", extra["averaged"], names)
    name = extra.get("evaluated_checkpoint")
    if isinstance(name, str) and name.startswith("step_") and names != [name]:
        raise Contradiction(f"{path}: field 'provenance.extra.evaluated_checkpoint' is {name!r}, a training checkpoint "
                            f"scored as it is, but field '{FIELD}' lists {names}: the model scored is no average of "
                            "them", names)
    averaged = files.averaged.get(str(name))
    if averaged is not None:   # the averaged file, made from the run's checkpoints as it keeps them, of this run
        if averaged.averaged_checkpoints:
            _same_checkpoints(files, averaged.path, "averaged_checkpoints", list(averaged.averaged_checkpoints),
                              list(averaged.averaged_from or names))
        own = files.newest.lineage if files.newest is not None else {}
        other = next((k for k in ("vocab_sha256", "data_sha256") if own.get(k) and averaged.lineage.get(k)
                      and own[k] != averaged.lineage[k]), None)
        if other is not None:
            raise Contradiction(f"{averaged.path}: field 'lineage.{other}' is {averaged.lineage[other]!r}, but the run's "
                                f"checkpoints were trained with {own[other]!r}: an average of another run's "
                                "checkpoints", averaged.lineage[other])
    if isinstance(name, str) and "evaluated_sha256" in extra:
        folder = files.path / "checkpoints" if name.startswith("step_") else files.path
        _same_file(path, "provenance.extra.evaluated_sha256", extra["evaluated_sha256"], folder / name)


def averaged_steps(claim: Claim, files: Any) -> tuple[Path, list[str], list[int]]:
    """The checkpoints the run's evaluations averaged, one list for all of them, each a checkpoint of the
    run as its records name and hash it, and its last ones: (the first record, the names, their updates)."""
    paper_job(claim, files)
    records = _model_records(files)
    if not records:
        raise written_at_end(files, f"{files.path / 'evaluations'} holds no evaluation of the run's model")
    first_path, first = records[0]
    names = _in_update_order(list(first.provenance.extra["averaged_from"]), f"{first_path}: field '{FIELD}'")
    for path, result in records:
        extra = result.provenance.extra
        if not extra["averaged_from"]:
            raise Contradiction(f"{path}: field '{FIELD}' is empty: the record names no checkpoint it evaluated", 0)
        if _in_update_order(list(extra["averaged_from"]), f"{path}: field '{FIELD}'") != names:
            raise Contradiction(f"{path}: field '{FIELD}' lists {extra['averaged_from']}, {first_path.name} {names}", names)
        if extra.get("checkpoints_averaged") not in (None, len(names)):
            raise Contradiction(f"{path}: field 'provenance.extra.checkpoints_averaged' is "
                                f"{extra.get('checkpoints_averaged')!r}, but field '{FIELD}' lists {len(names)}", names)
        averaged = files.averaged.get(str(extra.get("evaluated_checkpoint")))
        if averaged is not None and averaged.averaged_from is not None and \
                _in_update_order(list(averaged.averaged_from), f"{averaged.path}: field 'averaged_from'") != names:
            raise Contradiction(f"{path}: field '{FIELD}' lists {names}, but the model it scored, {averaged.path}, was "
                                f"averaged from {averaged.averaged_from}", names)
        _identities(files, path, extra, names)
        newest = max(_steps(names, f"{path}: field '{FIELD}'"))
        if isinstance(extra.get("steps"), int) and extra["steps"] < newest:   # (past it: not the last, below)
            raise Contradiction(f"{path}: field 'provenance.extra.steps' is {extra['steps']}, but the newest checkpoint "
                                f"it averaged holds update {newest}: the model it scored is not the one it names",
                                extra["steps"])
    made = run_steps(files) or 0
    stale = [(p, r.provenance.extra["steps"]) for p, r in records
             if isinstance(r.provenance.extra.get("steps"), int) and r.provenance.extra["steps"] < made]
    if stale:   # evaluated before a resume went on training: none of the run's last checkpoints
        raise written_at_end(files, f"{stale[0][0]} evaluated the model of update {stale[0][1]}, but the run went on "
                             f"to update {made}: no evaluation of its last checkpoints")
    steps = _steps(names, f"{first_path}: field '{FIELD}'")
    kept = kept_steps(files)
    final = kept[-1]
    # the run's last checkpoints: none kept after the first averaged that is not averaged, and each averaged
    # one kept unless the run's keep_checkpoints pruned it before the oldest it kept
    if steps != sorted(set(steps)) or steps[-1] != final or [s for s in kept if s >= steps[0]] != \
            [s for s in steps if s >= kept[0]]:
        raise Contradiction(f"{first_path}: field '{FIELD}' lists {names}: not the run's last {len(names)} checkpoint(s) "
                            f"(its checkpoints: updates {', '.join(map(str, kept[-max(len(names), 3):]))}; its last "
                            f"update {final})", names)
    return first_path, names, steps


@checker("observed.average", audits=False, evidence="run")
def average(claim: Claim, ctx: CheckContext) -> Measurement:
    """The checkpoints the run's evaluation averaged (Section 6.1): the run's last k, k its recipe's, the
    same list the averaged file names, each the file the run holds (module docstring)."""
    files = ctx.target
    first_path, names, _ = averaged_steps(claim, files)
    asked = files.train.get("average_last")
    if asked is not None and asked != len(names):
        raise Contradiction(f"{first_path}: field '{FIELD}' lists {len(names)} checkpoint(s), but the run's recipe "
                            f"averages the last {asked} (average_last)", len(names))
    return judge(claim, len(names), f"averaged {', '.join(names)} (the run's last {len(names)})",
                 [f"average_last {asked}"] if asked is not None else [], unit="checkpoints averaged")


@checker("observed.average_spacing", audits=False, evidence="run")
def average_spacing(claim: Claim, ctx: CheckContext) -> Measurement:
    """The spacing of the checkpoints the run's evaluation averaged, in minutes at the paper's step time
    for the model's size (Section 5.2: 0.4 s base, 1.0 s big), as ``observed.checkpoint-interval`` reads
    the run's: the median gap in updates between consecutive averaged checkpoints, the last left out
    where the run's last update lies off its spacing. One checkpoint has no spacing: it fails."""
    files = ctx.target
    job = paper_job(claim, files)
    _, names, steps = averaged_steps(claim, files)
    paper_s = PAPER_STEP_SECONDS["big" if job is not None and job.model == "big" else "base"]
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    every = int(files.train.get("checkpoint_every_steps") or 0)
    if every and len(gaps) > 1 and steps[-1] % every:
        gaps = gaps[:-1]   # the run's last update, written at its end off the spacing
    if not gaps:
        return Measurement(0.0, passed=False, unit=claim.unit,
                           detail=f"averaged one checkpoint ({names[0]}): no interval between averaged checkpoints")
    value = round(median(gaps) * paper_s / 60, 4)
    minutes = files.train.get("checkpoint_every_minutes")
    asked = [f"checkpoint_every_steps {every}"] if every else [f"checkpoint_every_minutes {minutes}"] if minutes else []
    return judge(claim, value, f"averaged updates {', '.join(map(str, steps))}: {median(gaps):g} updates apart = "
                 f"{value:g} min at the paper's {paper_s} s per update", asked)
