"""Text files read as the reference tools read them: lines are what ``wc -l`` and sacreBLEU count.

The bytes are read by the one reader and decoded by its one rule (:mod:`repro.files.reader`,
:mod:`repro.files.text_decoding`: UTF-8 only, UTF-16/32 and NUL bytes refused by name, byte-order
marks removed, a warning naming the line for one not at the start). A line ends at ``\\n`` only (a
trailing ``\\r`` is dropped, for files written on Windows); never at the other characters
``str.splitlines`` breaks on (U+0085, U+2028, U+2029, ``\\v``, ``\\f``, ``\\x1c`` to ``\\x1e``), which
occur inside real sentences and would shift every later line against its partner. A text input may
be a pipe (``repro bleu hyp <(zcat ref.gz)``). A file with no line at all is refused by name where a
caller needs lines (``what`` says which file it is).
"""

from __future__ import annotations

import os
import unicodedata

from repro.errors import DataError
from repro.files.reader import iter_lines


def read_lines(path: str | os.PathLike[str], what: str | None = None) -> list[str]:
    """Every line of ``path`` (a regular file or a pipe); with ``what`` (e.g. "hypothesis file"), a
    file without a line is refused."""
    lines = list(iter_lines(path, what or "text file", stream=True, error=DataError))
    if what is not None and not lines:
        raise DataError(f"{path}: the {what} is empty (no line to read)")
    return lines


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: whitespace and invisible format characters only (a zero-width
    space, a word joiner, a soft hyphen: Unicode category Cf), which ``str.strip`` keeps. A sentence
    of them is an empty line a tokenizer would still read as a word."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def with_words(lines: list[str], source: str | os.PathLike[str], what: str) -> list[str]:
    """``lines`` when at least one holds a word; lines that are all blank are refused naming ``source``:
    a reference of blank lines scores every hypothesis 0, an input of blank lines translates nothing."""
    if all(blank(line) for line in lines):
        raise DataError(f"{source}: the {what} holds no words ({len(lines)} blank line(s))")
    return lines
