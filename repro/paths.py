"""Paths a command is given and must find, or write, before it starts work: each check names the
path and what it was meant to be, so a typo is refused in one line (exit 2), never read as
"empty", and an output that cannot be written is refused before the work, not after it."""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from pathlib import Path

from repro.errors import OutputError, UsageError
from repro.files.reader import folder_present, inspect
from repro.files.writer import cannot_write_in, checked_target
from repro.run_lock import MARKERS, run_marker

#: What a run folder holds that a command's output flag must never replace: its own records (the
#: run lock and manifest, the run's record, metrics log and vocabulary) and its folders of checkpoints,
#: encoded corpus and evaluations.
RUN_RECORDS = frozenset({*MARKERS, "run.json", "metrics.csv", "vocab.json"})
RUN_FOLDERS = frozenset({"checkpoints", "encoded", "evaluations"})


def existing_dir(path: str | os.PathLike[str], what: str = "directory") -> Path:
    """``path`` as a Path if it is a directory; else a :class:`UsageError` naming it and ``what``."""
    path = Path(path)
    if not folder_present(path, what):   # a loop of links is named as one, never "does not exist"
        raise UsageError(f"{path}: {what} does not exist")
    return path


def existing_file(path: str | os.PathLike[str], what: str = "file", *, stream: bool = False) -> Path:
    """``path`` as a Path if the one reader would read it (:func:`repro.files.reader.inspect`: a
    regular file, or a pipe with ``stream``); else a :class:`UsageError` naming it."""
    inspect(path, what, stream=stream)
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: {what} is not readable")
    return Path(path)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _writable_folder(path: Path, folder: Path, what: str) -> None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise UsageError(f"{path}: {what} cannot be created: {existing} is a file, not a directory")
    why = cannot_write_in(existing)
    if why is not None:
        raise UsageError(f"{path}: {what} cannot be written: {existing} is not writable ({why})")


def output_dir(path: str | os.PathLike[str], what: str = "output directory") -> Path:
    """``path`` as a Path if it is (or can be created as) a directory this process can write in;
    else a :class:`UsageError` naming it. Nothing is created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: {what} is a file, not a directory")
    _writable_folder(path, path, what)
    return path


def output_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """``path`` as a Path if a file can be written there (not a directory; its folder exists or can
    be created, and is writable); else a :class:`UsageError` naming it. Nothing is created."""
    path = Path(path)
    if os.path.isdir(os.path.abspath(path)):   # as the one writer takes the name (``new/../dir`` is ``dir``)
        raise UsageError(f"{path}: {what} is a directory, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{path}: {what} exists and is not writable")
    try:
        checked_target(path)   # not a link, not a device: the one writer's rules, checked before the work
    except OutputError as err:
        raise UsageError(f"{err} (the {what})") from None
    _writable_folder(path, path.parent, what)
    return path


def not_an_input(output: str | os.PathLike[str] | None, inputs: list[str | os.PathLike[str] | None],
                 what: str = "output") -> None:
    """Refuse ``output`` when it is one of the command's ``inputs`` (the same file, by any name): the
    atomic write would replace what the command read, a checkpoint or a reference lost."""
    if output is None or str(output) == "-":
        return
    written = os.path.abspath(output)   # the name as the one writer takes it: ``new/../in.en`` is ``in.en``
    if not os.path.exists(written):
        return
    for source in inputs:
        if source is not None and str(source) != "-" and os.path.exists(source) and os.path.samefile(written, source):
            raise UsageError(f"{output}: the {what} is {source}, one of this command's inputs; writing it would "
                             "replace what was read: give another path")


#: A folder a command reads as its input: (the folder, what it is, the names of the files read in it
#: (``fnmatch`` patterns, the folder's own files only), or ``None`` for every file below it).
InputFolder = tuple[str | os.PathLike[str] | None, str, tuple[str, ...] | None]


def outside_inputs(output: str | os.PathLike[str] | None, folders: list[InputFolder], what: str = "output") -> None:
    """Refuse ``output`` (a file or folder) that is, or lies inside, one of ``folders`` where the
    command reads it (a claims folder's ``*.toml``, anything in a results store). What it wrote there
    would replace a claims file or be read back as a claim or a record, breaking the next run. A folder
    not made yet (a results store this command starts) is compared by its name: one made first, the
    output then written into it, is the same fault."""
    if output is None or str(output) == "-":
        return
    target = Path(os.path.realpath(output))
    for folder, name, reads in folders:
        if folder is None or (os.path.lexists(folder) and not os.path.isdir(folder)):
            continue
        root = Path(os.path.realpath(folder))
        inside = target == root or root in target.parents
        if inside and (reads is None or (target.parent == root and any(fnmatchcase(target.name, p) for p in reads))):
            raise UsageError(f"{output}: the {what} lies in {folder}, the {name} this command reads; writing there "
                             "would change its input: give a path outside it")


def not_a_run_record(path: str | os.PathLike[str], what: str = "output file") -> None:
    """Refuse ``path`` when it is one of a run's own files (:data:`RUN_RECORDS`, or a file in one of
    :data:`RUN_FOLDERS`): an output flag pointed there would replace the run's record, vocabulary or
    checkpoint with something else."""
    target = Path(os.path.abspath(path))
    for folder, inside in ((target.parent, target.name in RUN_RECORDS),
                           (target.parent.parent, target.parent.name in RUN_FOLDERS)):
        marker = run_marker(folder) if inside else None
        if marker is not None:
            raise UsageError(f"{path}: the {what} would replace a file of the run in {folder} (it holds {marker}); "
                             "give a path outside the run's own records")
