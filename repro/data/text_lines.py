"""Text files read as the reference tools read them: lines are what ``wc -l`` and sacreBLEU count.

A line ends at ``\\n`` only (a trailing ``\\r`` is dropped, for files written on Windows); never at
the other characters ``str.splitlines`` breaks on (U+0085, U+2028, U+2029, ``\\v``, ``\\f``, ``\\x1c``
to ``\\x1e``), which occur inside real sentences and would shift every later line against its
partner. A UTF-8 byte-order mark at the start of a file is not text: it is dropped (else it would
glue itself to the first word and cost that sentence its n-grams). A file with no line at all is
refused by name where a caller needs lines (``what`` says which file it is).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from repro.errors import DataError

BOM = "\ufeff"


def split_lines(text: str) -> list[str]:
    """``text``'s lines: split at ``\\n`` only, a final ``\\n`` ending the last line, a BOM dropped."""
    if text.startswith(BOM):
        text = text[len(BOM):]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def iter_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """The lines of the UTF-8 file ``path`` one at a time (as :func:`split_lines` splits them); bytes
    that are not UTF-8 are refused naming the file and line."""
    path = Path(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):   # binary files split at b"\n" only
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{path}:{lineno}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
            if lineno == 1 and line.startswith(BOM):
                line = line[len(BOM):]
            line = line[:-1] if line.endswith("\n") else line
            yield line[:-1] if line.endswith("\r") else line


def read_lines(path: str | os.PathLike[str], what: str | None = None) -> list[str]:
    """Every line of ``path``; with ``what`` (e.g. "hypothesis file"), a file without a line is refused."""
    lines = list(iter_lines(path))
    if what is not None and not lines:
        raise DataError(f"{path}: the {what} is empty (no line to read)")
    return lines
