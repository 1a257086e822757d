"""Paths a command is given and must find before it starts work: each check names the path and
what it was meant to be, so a typo is refused in one line (exit 2), never read as "empty"."""

from __future__ import annotations

import os
from pathlib import Path

from repro.errors import UsageError


def existing_dir(path: str | os.PathLike[str], what: str = "directory") -> Path:
    """``path`` as a Path if it is a directory; else a :class:`UsageError` naming it and ``what``."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: {what} does not exist")
    if not path.is_dir():
        raise UsageError(f"{path}: {what} is not a directory")
    return path


def existing_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` as a Path if it is a readable regular file; else a :class:`UsageError` naming it."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: {what} does not exist")
    if path.is_dir():
        raise UsageError(f"{path}: {what} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: {what} is not readable")
    return path
