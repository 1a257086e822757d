"""One writer per run directory: ``OUT_DIR/.repro-lock``, held while a run writes there.

Two runs writing one run directory mix their checkpoints and metrics logs. A run takes an
exclusive ``flock`` on the lock file before it writes anything (atomic: of two runs started at
the same instant exactly one gets it) and writes its holder into it (pid, host, start time, the
command), so that the second run is refused naming the holder (exit 2). The operating system
drops the lock when its holder ends, however it ends (a crash, SIGKILL): a lock file left behind
is stale and taken over, never a reason to refuse. On release the holder removes the file; a run
that got the lock on a file removed meanwhile (the path now names another file) tries again.
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

from repro.errors import UsageError

NAME = ".repro-lock"


class RunDirBusy(UsageError):
    """Another live run holds the run directory's lock (exit 2)."""


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536).decode("utf-8") or "{}")
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(data["started"])))
        return f"pid {data['pid']} on {data['host']} since {started} ({data.get('command', '?')})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not written who it is)"


@contextmanager
def run_dir_lock(folder: str | os.PathLike[str], what: str = "run directory") -> Iterator[Path]:
    """Hold ``folder``'s lock for the block; a live holder's is refused (:class:`RunDirBusy`, naming
    it). A folder that did not exist is created, and removed again at the end if it is still empty."""
    folder = Path(folder)
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{folder}: cannot create the {what} ({err.strerror})") from None
    path = folder / NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UsageError(f"{path}: cannot create the {what}'s lock file ({err.strerror})") from None
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
        os.write(fd, json.dumps(record).encode("utf-8"))
        yield path
    finally:
        try:
            path.unlink(missing_ok=True)
            if created:
                folder.rmdir()   # a run refused before it wrote anything leaves no folder behind
        except OSError:
            pass
        os.close(fd)
