"""One writer per run directory: ``OUT_DIR/.repro-lock``, held while a run writes there.

Two runs writing one run directory mix their checkpoints and metrics logs. A run takes an
exclusive ``flock`` on the lock file before it writes anything (atomic: of two runs started at
the same instant exactly one gets it) and writes its holder into it (pid, host, start time, the
command), so that the second run is refused naming the holder (exit 2). The operating system
drops the lock when its holder ends, however it ends (a crash, SIGKILL): a lock file left behind
is stale and taken over, never a reason to refuse. On release the holder removes the file; a run
that got the lock on a file removed meanwhile (the path now names another file) tries again.

The lock file is opened by the one writer (:func:`repro.files.writer.open_lock`): never through a
symbolic link (a ``.repro-lock`` linked to a user's file is refused, the file untouched), and only
when it is a regular file of one link. A run directory inside another run's folder (``--out-dir``
set to another run's ``checkpoints/``) is refused before anything is written: the two runs would
mix their files. A folder is a run's when it holds a lock, a manifest of what repro wrote
(:mod:`repro.manifest`) or a metrics log beside a ``checkpoints/`` folder (:func:`run_marker`); the
runs a pipeline's own layout holds (``OUT_DIR/seed-S``, a Table 3 job's folder: their checkpoints
claimed in its manifest) are its, not another run's.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from repro.errors import WRITE_FAULTS, ReproError, UsageError, cannot_write
from repro.files import strict_json
from repro.files.writer import make_dirs, open_lock, remove
from repro.manifest import NAME as MANIFEST, Manifest

NAME = ".repro-lock"
#: Files whose presence makes a folder a run's: this lock, and the manifest of what repro wrote there.
MARKERS = (NAME, MANIFEST)


class RunDirBusy(UsageError):
    """Another live run holds the run directory's lock (exit 2)."""


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = strict_json.loads(os.read(fd, 65536).decode("utf-8") or "{}", NAME)
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(data["started"])))
        return f"pid {data['pid']} on {data['host']} since {started} ({data.get('command', '?')})"
    except (OSError, ValueError, KeyError, TypeError, OverflowError, ReproError):
        return "another process (it has not written who it is)"


def run_marker(folder: Path) -> str | None:
    """What marks ``folder`` as a run's folder (a file name), or None."""
    for name in MARKERS:
        if os.path.lexists(folder / name):
            return name
    if (folder / "metrics.csv").is_file() and (folder / "checkpoints").is_dir():
        return "metrics.csv and checkpoints/"
    return None


def refuse_nested(folder: str | os.PathLike[str], what: str = "run directory") -> None:
    """Refuse ``folder`` when it lies inside another run's folder (naming that folder and its marker)."""
    folder = Path(os.path.abspath(folder))
    for parent in folder.parents:
        marker = run_marker(parent)
        if marker is None:
            continue
        if os.path.lexists(parent / MANIFEST) and Manifest.load(parent).plans_run_in(
                folder.relative_to(parent).as_posix()):
            return   # one of the runs the enclosing run's own layout holds (a seed, a Table 3 job)
        raise UsageError(f"{folder}: the {what} lies inside {parent}, another run's folder (it holds {marker}); "
                         "a run there would mix its files with that run's: choose a folder outside it")


@contextmanager
def run_dir_lock(folder: str | os.PathLike[str], what: str = "run directory") -> Iterator[Path]:
    """Hold ``folder``'s lock for the block; a live holder's is refused (:class:`RunDirBusy`, naming
    it). A folder that did not exist is created, and removed again at the end if it is still empty."""
    folder = Path(folder)
    refuse_nested(folder, what)
    created = not os.path.lexists(folder)
    try:
        make_dirs(folder)
    except OSError as err:
        raise UsageError(f"{folder}: cannot create the {what} ({err.strerror})") from None
    path = folder / NAME
    while True:
        fd = open_lock(path, within=folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            for _ in range(40):   # the holder writes its record right after it locks: give it a second
                if not holder.startswith("another process"):
                    break
                time.sleep(0.025)
                holder = _holder(fd)
            os.close(fd)
            raise RunDirBusy(f"{folder}: the {what} is in use by {holder}; wait for it to end, or choose another "
                             f"--out-dir (lock file {path})") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)   # the holder before us removed the file between our open and our lock
    try:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                  "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:])[:200]}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            os.write(fd, json.dumps(record).encode("utf-8"))
        except OSError as err:   # a full disk: named here (os.write's error names no file)
            if err.errno in WRITE_FAULTS:
                raise cannot_write(path, err) from None
            raise
        yield path
    finally:
        try:
            remove(path, within=folder)
            if created:
                remove(folder, within=folder.parent)   # a run refused before it wrote anything leaves no folder
        except (OSError, ReproError):
            pass
        os.close(fd)
