"""Reading line-aligned parallel text, refusing malformed input loudly (nothing is dropped silently).

Unequal line counts and empty lines are errors that name the file and line. Over-long pairs
(either side longer than ``max_len``) are filtered, as is usual for WMT training data, and
counted: ``ParallelCorpus.filtered`` and ``.filtered_lines`` say exactly what was left out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from repro.data.text_lines import blank
from repro.files.reader import iter_lines
from repro.errors import DataError


@dataclass
class ParallelCorpus:
    pairs: list[tuple[str, str]]
    filtered: int = 0
    filtered_lines: list[int] = field(default_factory=list)  # 1-based line numbers of the over-long pairs

    def __len__(self) -> int:
        return len(self.pairs)


def _lines(path: Path) -> Iterator[str]:
    """Lines without their line ending, as :mod:`repro.data.text_lines` reads them (``\n`` only, a
    BOM dropped); decoded line by line so errors name the line."""
    return iter_lines(path, "corpus file", error=DataError)


def whitespace_length(text: str) -> int:
    return len(text.split())


def read_parallel(
    src_path: str | os.PathLike[str],
    tgt_path: str | os.PathLike[str],
    max_len: int | None = None,
    *,
    length: Callable[[str], int] = whitespace_length,
) -> ParallelCorpus:
    """Read a line-aligned pair of files.

    ``max_len`` bounds each side's ``length`` (whitespace tokens by default; pass e.g.
    ``lambda s: len(vocab.encode(s))`` to bound subword tokens). Raises DataError naming the
    file and line on an empty (or whitespace-only) line and on unequal line counts.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    if _one_file(src_path, tgt_path):   # each sentence paired with itself: no translation to learn or score
        raise DataError(f"{tgt_path}: the target side is the source side's file ({src_path}); a parallel "
                        "corpus pairs two files")
    pairs: list[tuple[str, str]] = []
    filtered_lines: list[int] = []
    empty: list[tuple[Path, int]] = []
    lineno = 0
    for lineno, (src, tgt) in enumerate(zip_longest(_lines(src_path), _lines(tgt_path)), start=1):
        if src is None or tgt is None:
            short, long_ = (src_path, tgt_path) if src is None else (tgt_path, src_path)
            n_short = lineno - 1
            n_long = n_short + 1 + sum(1 for _ in _lines_from(long_, lineno))
            raise DataError(
                f"{long_}:{lineno}: line has no partner: {short} has {n_short} lines but {long_} has {n_long}"
            )
        for path, text in ((src_path, src), (tgt_path, tgt)):
            if blank(text):
                empty.append((path, lineno))
        if empty:
            continue  # keep scanning so the error can say how many empty lines there are
        if max_len is not None and (length(src) > max_len or length(tgt) > max_len):
            filtered_lines.append(lineno)
            continue
        pairs.append((src, tgt))
    if empty:
        path, line = empty[0]
        more = f" ({len(empty) - 1} more empty lines after it)" if len(empty) > 1 else ""
        raise DataError(f"{path}:{line}: empty line{more}; parallel files must have text on every line")
    return ParallelCorpus(pairs=pairs, filtered=len(filtered_lines), filtered_lines=filtered_lines)


def _one_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (by any name: a link, a relative path); False when either
    cannot be looked at (the reader then names it)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _lines_from(path: Path, start: int) -> Iterator[str]:
    """Lines of ``path`` after line ``start`` (1-based), for counting the rest of the longer file."""
    for i, line in enumerate(_lines(path), start=1):
        if i > start:
            yield line


def count_lines(path: str | os.PathLike[str]) -> int:
    return sum(1 for _ in _lines(Path(path)))
