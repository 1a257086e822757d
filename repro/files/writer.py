"""The one writer: every file repro writes is written here, by these rules.

- **Never through a symbolic link.** A target that is a symbolic link is refused by name (exit 2),
  never replaced and never followed: the file it points to (a user's, outside the run) is left as
  it was. A target that is a directory, a device or a pipe (``/dev/null``) is refused likewise.
- **Never outside the folder it belongs to.** A writer names the folder it writes in (``within``:
  a run's ``--out-dir``, a results store, a ledger, a report's ``--out``; for a single file the
  user named, the file's own folder). That folder may itself be a link the user made
  (``runs -> /scratch/runs``), but below it every folder on the way to the file must be a real
  folder inside it: a ``checkpoints`` that is a symbolic link to elsewhere, or a name with ``..``
  that climbs out, is refused before anything is written. Folders are created the same way
  (:func:`make_dirs`), and files are removed only the same way (:func:`remove`).
- **Atomically.** A file is written to a temporary name in its own folder, flushed to disk, and moved
  over the target with ``os.replace``; on any error the temporary file is removed and the target is
  left as it was. A full disk or a read-only folder is an :class:`~repro.errors.OutputError` naming
  the target (exit 2), never a half-written file. Several files that belong together (a report)
  are all written before any is moved into place (:func:`publish_all`).
- **Files kept open** (a metrics log appended to, a run's lock) are opened with ``O_NOFOLLOW`` and
  refused when they are not a regular file with a single link (a hard link to a user's file would
  let a truncation reach it).

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
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from repro.errors import WRITE_FAULTS, OutputError, cannot_write
from repro.files.reader import kind_of

Pathish = str | os.PathLike[str]

#: A temporary file untouched this long belongs to a writer that is gone, whoever it was.
STALE_AFTER_S = 3600.0
_OWNER = re.compile(r"^(?P<host>[A-Za-z0-9_-]+)-(?P<pid>[0-9]+)\.[^.]+$")
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


def temporary_file(path: Pathish) -> tuple[int, Path]:
    """An open descriptor and the name of a new temporary file beside ``path`` (readable as the
    umask allows), after removing the stale temporaries of earlier writes of ``path``. The caller
    has checked ``path`` (:func:`checked_target`)."""
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


def _refuse(path: Pathish, why: str) -> OutputError:
    return OutputError(f"{path}: {why}")


def _root(path: Path, within: Pathish | None) -> Path:
    """The folder ``path`` must lie in, as an absolute path (links in it are the user's, not resolved)."""
    root = Path(os.path.abspath(within)) if within is not None else path.parent
    if root not in path.parents:
        raise _refuse(path, f"lies outside {root}, the folder this file is written in; repro writes nowhere else")
    return root


def _real_folders(path: Path, root: Path) -> None:
    """Refuse a symbolic link, or a file, among the folders from below ``root`` down to ``path``'s own."""
    current = root
    for part in path.relative_to(root).parts[:-1]:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return  # the rest is created by make_dirs, as real folders
        except OSError as err:
            raise _refuse(current, f"cannot write in this folder ({err.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(current, f"a symbolic link (to {os.path.realpath(current)}) inside {root}; repro writes "
                                   "only into real folders there, never through a link to elsewhere")
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(current, f"is {kind_of(st.st_mode)}, not a folder, so {path} cannot be written")


def cannot_write_in(directory: Pathish) -> str | None:
    """Why no file can be created in ``directory`` (tried with a temporary file, removed at once), or None."""
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".repro-write-probe.", suffix=".tmp")
    except OSError as err:
        return err.strerror or type(err).__name__
    os.close(fd)
    os.unlink(name)
    return None


def checked_target(path: Pathish, within: Pathish | None = None) -> Path:
    """``path`` (made absolute) if a file may be written there by the rules above; else OutputError."""
    path = Path(os.path.abspath(path))
    _real_folders(path, _root(path, within))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as err:
        raise _refuse(path, f"cannot write ({err.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, f"is a symbolic link (to {os.readlink(path)}); repro never writes through one: "
                            "remove the link, or name the file it points to")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, f"is {kind_of(st.st_mode)}, not a regular file; repro writes only regular files")
    return path


def make_dirs(folder: Pathish, within: Pathish | None = None) -> Path:
    """Create ``folder`` and its missing parents (below ``within``: each a real folder inside it, never
    through a link); the absolute folder. Without ``within``, ``folder`` is the root itself."""
    folder = Path(os.path.abspath(folder))
    root = Path(os.path.abspath(within)) if within is not None else folder
    if folder != root:
        _real_folders(folder / "_", _root(folder / "_", root))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _refuse(folder, "is a file, not a folder") from None
    except OSError as err:
        if err.errno in WRITE_FAULTS:
            raise cannot_write(folder, err) from None
        raise _refuse(folder, f"cannot create this folder ({err.strerror})") from None
    if folder != root:
        _real_folders(folder / "_", root)   # made by someone else meanwhile: checked again
    return folder


def _prepared(path: Pathish, within: Pathish | None) -> tuple[Path, int, Path]:
    path = checked_target(path, within)
    try:
        make_dirs(path.parent, within if within is not None else path.parent)
        fd, tmp = temporary_file(path)
    except OSError as err:
        if err.errno in WRITE_FAULTS:
            raise cannot_write(path, err) from None
        raise
    return path, fd, tmp


def _replace(tmp: Path, path: Path, within: Pathish | None) -> None:
    checked_target(path, within)   # nothing became a link while the file was written
    os.replace(tmp, path)


def _absent_folders(paths: list[Path]) -> list[Path]:
    """The folders above ``paths`` that are not there yet (up to the first that is), deepest first: the
    ones a write creates, and removes again when it fails, so that a failed write leaves nothing behind."""
    absent: set[Path] = set()
    for path in paths:
        folder = Path(os.path.abspath(path)).parent
        while not os.path.lexists(folder) and folder != folder.parent:
            absent.add(folder)
            folder = folder.parent
    return sorted(absent, key=lambda f: len(f.parts), reverse=True)


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:   # never made, or holding another writer's file by now
            pass


@contextmanager
def atomic_open(path: Pathish, mode: str = "w", encoding: str | None = "utf-8", *,
                within: Pathish | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces ``path`` when the block ends without error;
    ``within``: the folder the file belongs to (default: its own). A failure removes the folders it made."""
    made = _absent_folders([Path(path)])
    try:
        path, fd, tmp = _prepared(path, within)
    except BaseException:
        _remove_empty(made)
        raise
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _replace(tmp, path, within)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        _remove_empty(made)
        if isinstance(err, OSError) and err.errno in WRITE_FAULTS:   # a full disk, a read-only folder
            raise cannot_write(path, err) from None
        raise


def atomic_write_text(path: Pathish, text: str, *, within: Pathish | None = None) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    with atomic_open(path, "w", within=within) as fh:
        fh.write(text)


def publish_all(files: Mapping[Pathish, bytes], *, within: Pathish) -> list[Path]:
    """Write every file of ``files`` (path -> bytes, all under ``within``) to its temporary name first,
    and move them into place only when all are written: an error leaves every target as it was, and
    no folder it made."""
    staged: list[tuple[Path, Path]] = []
    made = _absent_folders([Path(target) for target in files])
    try:
        for target, content in files.items():
            path, fd, tmp = _prepared(target, within)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, path in staged:
            _replace(tmp, path, within)
    except BaseException as err:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        _remove_empty(made)
        if isinstance(err, OSError) and err.errno in WRITE_FAULTS:
            raise cannot_write(staged[-1][1] if staged else Path(within), err) from None
        raise
    return [path for _, path in staged]


def atomic_symlink(link: Pathish, target: Pathish, *, within: Pathish | None = None) -> Path:
    """Make ``link`` a symbolic link to ``target`` (an existing file or link there replaced at once,
    never followed); the one kind of link repro makes: a prepared folder naming a user's corpus."""
    link = Path(os.path.abspath(link))
    _real_folders(link, _root(link, within))
    if not os.path.islink(link):   # a link of an earlier run is replaced; anything else must be a file
        checked_target(link, within)
    make_dirs(link.parent, within if within is not None else link.parent)
    tmp = link.with_name(f"{temporary_prefix(link)}{_host()}-{os.getpid()}.link.tmp")
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise (cannot_write(link, err) if err.errno in WRITE_FAULTS else _refuse(link, f"cannot link ({err.strerror})"))
    return link


def _open_single(path: Pathish, flags: int, within: Pathish | None) -> int:
    """A descriptor of ``path`` opened with ``flags`` and never through a link, once it is known to be
    a regular file with one link (a hard link to a user's file is refused, not truncated)."""
    path = checked_target(path, within)
    make_dirs(path.parent, within if within is not None else path.parent)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as err:
        if err.errno in WRITE_FAULTS:
            raise cannot_write(path, err) from None
        raise _refuse(path, f"cannot open for writing ({err.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        why = f"is {kind_of(st.st_mode)}" if not stat.S_ISREG(st.st_mode) else f"has {st.st_nlink} hard links"
        raise _refuse(path, f"{why}; repro writes only a regular file of its own here (remove it)")
    return fd


def open_append(path: Pathish, *, within: Pathish | None = None, newline: str | None = None) -> IO[str]:
    """``path`` opened to append text (created if missing), never through a link."""
    fd = _open_single(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, within)
    return os.fdopen(fd, "a", encoding="utf-8", newline=newline)


def open_log(path: Pathish, *, within: Pathish | None = None) -> IO[str]:
    """``path`` opened to write text from its start (a log another process writes into), never
    through a link."""
    fd = _open_single(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, within)
    return os.fdopen(fd, "w", encoding="utf-8")


def open_lock(path: Pathish, *, within: Pathish | None = None) -> int:
    """A read-write descriptor of the lock file ``path`` (created if missing), never through a link."""
    return _open_single(path, os.O_RDWR | os.O_CREAT, within)


def remove(path: Pathish, *, within: Pathish) -> bool:
    """Remove the file (or the empty folder) ``path`` under ``within``, never through a link to
    elsewhere (a link itself is removed, not what it points to); whether there was one."""
    path = Path(os.path.abspath(path))
    _real_folders(path, _root(path, within))
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            path.rmdir()
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True
