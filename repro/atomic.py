"""Files that readers see whole or not at all.

A file is written to a temporary name in its own directory, flushed to disk, and moved over
the target with ``os.replace``; on any error the temporary file is removed and the target is
left as it was. A full disk or a read-only folder is an :class:`~repro.errors.OutputError` naming
the target (exit 2), never a half-written file. Checkpoints, result records and reports are all written this way.

A write that is killed (SIGKILL, a node lost) cannot remove its temporary file. Its name says
whose it was, ``.<name>.<host>-<pid>.<random>.tmp``, and the next writer of the same file removes
such leftovers before it starts: those of a process of this host that is gone, and any whose
last change is older than :data:`STALE_AFTER_S` (a writer on another host, or one of an
older repro that did not put its pid in the name). A live writer's file is never touched.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from repro.errors import WRITE_FAULTS, cannot_write

#: A temporary file untouched this long belongs to a writer that is gone, whoever it was.
STALE_AFTER_S = 3600.0
_OWNER = re.compile(r"^(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[^.]+$")
_LEGACY = re.compile(r"^[^.]+$")  # mkstemp's random part alone (writers before names said whose)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def temporary_prefix(path: str | os.PathLike[str]) -> str:
    """The start of every temporary name a writer of ``path`` uses: ``.<name>.``."""
    return f".{Path(path).name}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def stale_temporaries(path: str | os.PathLike[str], *, now: float | None = None) -> list[Path]:
    """Temporary files of earlier writes of ``path`` whose writer is gone (see the module docstring)."""
    path = Path(path)
    folder, prefix = path.parent, temporary_prefix(path)
    if not folder.is_dir():
        return []
    now = time.time() if now is None else now
    stale = []
    for candidate in folder.iterdir():
        name = candidate.name
        if not (name.startswith(prefix) and name.endswith(".tmp")) or not candidate.is_file():
            continue
        rest = name[len(prefix):-len(".tmp")]
        owner = _OWNER.match(rest)
        if owner is None and not _LEGACY.match(rest):
            continue  # another file's temporary (``.a.json.*`` when writing ``a``)
        try:
            age = now - candidate.stat().st_mtime
        except FileNotFoundError:
            continue
        mine = owner is not None and owner.group("host") == _host()
        if (mine and not _alive(int(owner.group("pid")))) or age > STALE_AFTER_S:
            stale.append(candidate)
    return stale


def temporary_file(path: str | os.PathLike[str]) -> tuple[int, Path]:
    """An open descriptor and the name of a new temporary file beside ``path`` (readable as the
    umask allows), after removing the stale temporaries of earlier writes of ``path``."""
    path = Path(path)
    for leftover in stale_temporaries(path):
        leftover.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{temporary_prefix(path)}{_host()}-{os.getpid()}.",
                               suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; the file is for others to read too
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, Path(tmp)


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces ``path`` when the block ends without error."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary_file(path)
    except OSError as err:
        if err.errno in WRITE_FAULTS:
            raise cannot_write(path, err) from None
        raise
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in WRITE_FAULTS:   # a full disk, a read-only folder
            raise cannot_write(path, err) from None
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    with atomic_open(path, "w") as fh:
        fh.write(text)
