"""Errors a user can act on. Each names the file, line, field or step at fault.

The CLI prints one line, ``repro: error: <message>``, and exits with the error's ``exit_code``:
2 for input the user got wrong (a flag, a file, a directory, a record), 1 for a run that failed
on valid input (training diverged). docs/exit-codes.md lists every code.
"""

from __future__ import annotations

import errno
import os

#: What an operating system says when a file cannot be written for reasons outside repro: a full
#: disk or quota, a read-only file system, no permission, a file over the size limit.
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})
#: What it says of a path a user gave that cannot be looked at: a name too long, a loop of links, a
#: file where a folder is wanted, a device that is not there.
PATH_FAULTS = frozenset({errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO, errno.ENODEV})


class ReproError(Exception):
    """An error caused by input the user controls; the CLI prints it and exits ``exit_code``."""

    exit_code = 1


class UsageError(ReproError):
    """A flag or argument that is wrong or missing (a directory that does not exist, a flag without
    the one it needs); the message names the flag or path."""

    exit_code = 2


class ConfigError(ReproError, ValueError):
    """A model or training configuration that the paper's architecture cannot take."""

    exit_code = 2


class ClaimFileError(ReproError):
    """A malformed claims file; the message names the file and the claim."""

    exit_code = 2


class DataError(ReproError):
    """Malformed data: the message names the file and line."""

    exit_code = 2


class MissingSplit(DataError):
    """A split a data set does not have, or whose files are not on this machine (a file there that is
    not one, a link to a device, is a :class:`DataError` of its own)."""


class CheckpointError(ReproError):
    """A truncated, foreign or incompatible checkpoint; the message names the file."""

    exit_code = 2


class ResultError(ReproError):
    """A missing or malformed result record; the message names the file and field."""

    exit_code = 2


class OutputError(ReproError):
    """A file or folder that cannot be written (a full disk, a read-only folder, no permission); the
    message names the path. What was being written is left as it was (:mod:`repro.files.writer`)."""

    exit_code = 2


def cannot_write(path: str | os.PathLike[str], err: OSError) -> OutputError:
    """The one-line refusal for ``err`` met writing ``path``."""
    return OutputError(f"{path}: cannot write ({err.strerror or os.strerror(err.errno or 0)})")
