"""JSON read strictly: what a user's file says is read whole, or refused naming the file and line.

Python's ``json`` keeps the last of two equal keys (``{"seed": 1, "seed": 2}`` reads as seed 2,
silently) and takes ``NaN`` and ``Infinity``, which are not JSON. Every JSON that comes from a
file or a flag (configs, ``--set`` values, result records, the cluster ledger and job states, a
report's previous files) is read here: a repeated key is refused, and so are ``NaN`` and
``±Infinity`` unless the reader says a measurement may be one (``allow_nan``: a result record's
measured value). The error is a :class:`~repro.errors.ReproError` of the caller's class.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from repro.errors import ReproError, UsageError


class _Refused(ValueError):
    """A duplicate key or a non-finite constant, raised from inside the decoder."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"key '{key}' appears twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number")


def _line_of(text: str, needle: str, nth: int = 1) -> int | None:
    index = -1
    for _ in range(nth):
        index = text.find(needle, index + 1)
        if index < 0:
            return None
    return text.count("\n", 0, index) + 1 if index >= 0 else None


def loads(text: str, source: str, *, error: type[ReproError] = UsageError, allow_nan: bool = False) -> Any:
    """``text`` as JSON; a syntax error, a repeated key or (unless ``allow_nan``) NaN/Infinity raise
    ``error`` naming ``source`` (a file, or a flag such as ``--set seed``) and the line."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=None if allow_nan else _no_constant)
    except json.JSONDecodeError as err:
        raise error(f"{source}:{err.lineno}: not valid JSON ({err.msg})") from None
    except _Refused as why:
        duplicate = str(why).startswith("key '")
        key = str(why).split("'")[1] if duplicate else str(why).split()[0]
        line = _line_of(text, f'"{key}"', 2) if duplicate else _line_of(text, key)
        where = f"{source}:{line}" if line is not None and "\n" in text.strip() else source
        raise error(f"{where}: {why}") from None


def read(path: str | os.PathLike[str], what: str, *, error: type[ReproError] = UsageError,
         allow_nan: bool = False) -> Any:
    """The JSON in ``path`` (``what`` it is meant to be names it on error), read by :func:`loads`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {what} does not exist") from None
    except IsADirectoryError:
        raise error(f"{path}: {what} is a directory, not a file") from None
    except UnicodeDecodeError as err:
        raise error(f"{path}: {what} is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise error(f"{path}: cannot read {what} ({err.strerror})") from None
    return loads(text, str(path), error=error, allow_nan=allow_nan)
