"""The files a pipeline writes into its run directory, claimed before they are written, and ``--fresh``.

``--out-dir`` may name a folder that holds other things. The pipelines claim the paths below in
the folder's manifest (:mod:`repro.manifest`) before they write them, and ``--fresh`` deletes
only what the manifest says repro wrote. What a run would read back and resume from
(checkpoints, the vocabulary, the metrics log) but repro did not write (a run of a repro older
than manifests, or a file of the user's) is never deleted: ``--fresh`` refuses, naming it.
Every check here is done before anything is deleted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

from repro.errors import UsageError
from repro.files.reader import iter_lines, present, read_json
from repro.files.writer import checked_target
from repro.manifest import NAME as MANIFEST, Manifest
from repro.paths import output_dir, output_file
from repro.run_lock import NAME as LOCK, refuse_nested
from repro.train.checkpoint import list_checkpoints
from repro.train.metrics_log import COLUMNS, checked_header
from repro.train.run_record import FORMAT as RUN_FORMAT, RUN_RECORD

#: What a training run (:mod:`repro.train`) writes into its ``out_dir``: with its record (``run.json``) and
#: the records of the evaluations taken of it (``evaluations/``, the ones replaced in ``evaluations/earlier/``,
#: :mod:`repro.measures.recording`; ``repro evaluate``'s translations, :mod:`repro.measures.evaluated_run`).
TRAINING = ("checkpoints/", "checkpoints/step_*.pt", "metrics.csv", "metrics.csv.tmp", "vocab.json",
            "tensorboard/", "tensorboard/events.out.tfevents.*", "run.json", "evaluations/", "evaluations/*.json",
            "evaluations/earlier/", "evaluations/earlier/*.json", "hypotheses.evaluate.*")
#: What a training run reads back when it resumes.
RESUMED_FROM = ("checkpoints/step_*.pt", "vocab.json", "metrics.csv")
#: A cluster job's ``out_dir`` (:class:`repro.cluster.job.TrainingJob`): training, the corpus it encoded, the
#: translations it scored.
JOB = (*TRAINING, "encoded/", "encoded/*", "hypotheses.*")
#: Table 3 at a scale run here (:mod:`repro.pipeline.table3_small`): ``<signature>/<job>/``, each a job's ``out_dir``.
TABLE3 = ("*/", "*/table3-*/", *(f"*/table3-*/{p}" for p in JOB))
#: What a job of Table 3 at a scale resumes from.
TABLE3_RESUMED_FROM = tuple(f"*/table3-*/{p}" for p in RESUMED_FROM)
#: The local main job (:mod:`repro.pipeline.local`): training, the averaged model, the test hypotheses.
LOCAL = (*TRAINING, "average_last*.pt", "test_2016_flickr.hyp.de")
#: The local parser (:mod:`repro.pipeline.parsing`): the prepared PTB sample, the sanity run, the outputs.
PARSING = (*TRAINING, "data/", "data/*.src", "data/*.tgt", "data/*.trees", "data/manifest.json",
           "overfit/", *(f"overfit/{p}" for p in TRAINING), "overfit/overfit.*", "probe.json", "test.*")


def with_temporaries(patterns: Iterable[str]) -> tuple[str, ...]:
    """``patterns`` and the hidden temporary files of their atomic writes (:mod:`repro.files.writer`)."""
    out = []
    for pattern in patterns:
        out.append(pattern)
        if not pattern.endswith("/"):
            folder, _, name = pattern.rpartition("/")
            out.append(f"{folder + '/' if folder else ''}.{name}.*.tmp")
    return tuple(out)


def under(prefix: str, patterns: Iterable[str]) -> tuple[str, ...]:
    """``patterns`` inside the sub-directory ``prefix`` (e.g. ``seed-*``), with the directory itself."""
    return (f"{prefix}/", *(f"{prefix}/{p}" for p in patterns))


def check_fresh(out_dir: str | os.PathLike[str], resumed_from: Iterable[str]) -> Manifest:
    """Before ``--fresh`` deletes anything: the manifest must be readable, and nothing a run would
    resume from may be left that repro did not write. Returns the manifest; deletes nothing."""
    out_dir = Path(out_dir)
    manifest = Manifest.load(out_dir)
    if not out_dir.is_dir():
        return manifest
    owned = set(manifest.owned())
    foreign = [p for p in manifest.matching(list(resumed_from)) if p not in owned]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise UsageError(f"{out_dir / foreign[0]}{more}: --fresh deletes only what repro's runs wrote "
                         f"({out_dir / manifest.path.name} does not list it), and a run would resume from it; "
                         "move it away, or choose another --out-dir")
    return manifest


def start_run(out_dir: str | os.PathLike[str], layout: Iterable[str], manifest: Manifest | None = None,
              *, fresh: bool = False) -> list[Path]:
    """Delete what repro wrote (with ``fresh``; :func:`check_fresh` first), then claim ``layout``
    (and its temporary files) for the run about to write it. Returns what was deleted."""
    manifest = manifest or Manifest.load(out_dir)
    removed = manifest.remove() if fresh else []
    manifest.claim(*with_temporaries(layout))
    return removed


#: Files every training run writes in its folder (a checkpoint's name stands for all of them).
RUN_FILES = ("metrics.csv", "vocab.json", "checkpoints/step_00000001.pt", "encoded/manifest.json", LOCK, MANIFEST)


def check_writable(out_dir: str | os.PathLike[str], what: str = "run directory (--out-dir)") -> None:
    """A training run can write in ``out_dir``: the folder, its ``checkpoints/`` and its metrics log
    (a file where a folder is wanted, or the reverse, is refused naming it, before any work)."""
    out_dir = Path(out_dir)
    refuse_nested(out_dir, what)   # before the write probes below touch another run's folder
    output_dir(out_dir, what)
    output_dir(out_dir / "checkpoints", "checkpoint folder")
    output_file(out_dir / "metrics.csv", "metrics log")
    if (out_dir / "vocab.json").is_dir():
        raise UsageError(f"{out_dir / 'vocab.json'}: vocabulary is a directory, not a file")
    for name in RUN_FILES:   # no link in the run folder leads a write elsewhere (repro.files.writer)
        checked_target(out_dir / name, within=out_dir)
    refuse_foreign_records(out_dir)


def refuse_foreign_records(out_dir: Path) -> None:
    """Refuse a metrics log or run record in ``out_dir`` that no run of repro wrote (a header of other
    columns; a record of another format or, in a folder without checkpoints, one that is no JSON):
    training appends to the one and rewrites the other, so a user's file of that name would be lost."""
    log = out_dir / "metrics.csv"
    if present(log, "metrics log"):   # a folder of its name is refused now, not after training
        with closing(iter_lines(log, "metrics log")) as lines:
            header = checked_header([c.strip() for c in next(lines, "").rstrip("\r").split(",")], log)
        if header != [""] and not set(header) <= set(COLUMNS):
            raise UsageError(f"{log}: not a metrics log of repro (its header names {', '.join(header)[:120]}); "
                             "training would replace it: move it away, or choose another --out-dir")
    record = out_dir / RUN_RECORD
    if present(record, "run record"):
        try:
            data = read_json(record, "run record")
        except UsageError:
            if list_checkpoints(out_dir):
                return   # a damaged record of this run: training writes a new one, saying so
            raise UsageError(f"{record}: not a run record of repro (no JSON) in a folder without checkpoints; "
                             "training would replace it: move it away, or choose another --out-dir") from None
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
            raise UsageError(f"{record}: not a run record of repro (no 'format': '{RUN_FORMAT}'); training would "
                             "replace it: move it away, or choose another --out-dir")
