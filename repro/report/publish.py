"""Writing the report's files all or nothing.

Every file is rendered in memory first; then each is written to a temporary file beside its
destination, and only when all are written are they moved into place with ``os.replace``.
An error before that point leaves the previous report untouched and no temporary file behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from repro.atomic import temporary_file
from repro.errors import WRITE_FAULTS, cannot_write


def _stage(path: Path, content: bytes) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary_file(path)  # a killed earlier report's leftovers of this file are removed first
    except OSError as err:
        raise (cannot_write(path, err) if err.errno in WRITE_FAULTS else err) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in WRITE_FAULTS:   # a full disk: named, nothing moved
            raise cannot_write(path, err) from None
        raise
    return tmp


def publish(out_dir: Path, files: dict[str, bytes], *, prune: str | None = "figures",
            owned: set[str] | None = None) -> list[Path]:
    """Write ``files`` (relative path -> bytes) under ``out_dir``; remove stale PNGs of ``prune``.
    With ``owned`` (relative paths the previous report wrote), only those are ever removed."""
    out_dir = Path(out_dir)
    staged: list[tuple[Path, Path]] = []
    try:
        for name, content in files.items():
            target = out_dir / name
            staged.append((_stage(target, content), target))
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    try:
        for tmp, target in staged:
            os.replace(tmp, target)
    except OSError as err:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        if err.errno in WRITE_FAULTS:
            raise cannot_write(out_dir, err) from None
        raise
    if prune:
        written = {out_dir / n for n in files}
        for old in (out_dir / prune).glob("*.png"):
            if owned is not None and old.relative_to(out_dir).as_posix() not in owned:
                continue
            if old not in written:
                old.unlink(missing_ok=True)
    return [target for _, target in staged]
