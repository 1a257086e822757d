"""The metrics log: one CSV row per logged step (:func:`read_log` reads it), TensorBoard optional.

It is appended to through the one writer (:func:`repro.files.writer.open_append`: never through a
symbolic link, in the run's folder) and read through the one reader.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from repro import numerals
from repro.errors import WRITE_FAULTS, ResultError, cannot_write
from repro.files.reader import read_text
from repro.files.writer import atomic_write_text, make_dirs, open_append
from repro.limits import TEXT_BYTES

#: ``dev_ppl`` and ``dev_accuracy`` (token accuracy) are filled at checkpoints when the loop is given a dev
#: evaluation, empty elsewhere; ``padding``: the share of the logged update's passes (on this device) that is PAD.
COLUMNS = ("step", "loss", "nll", "lr", "tokens_per_s", "src_tokens", "tgt_tokens", "elapsed_s", "epoch", "dev_ppl",
           "padding", "dev_accuracy")


def checked_header(header: list[str] | None, path: str | os.PathLike[str]) -> list[str]:
    """The columns a metrics log's header names; one named twice is refused naming the file and the
    column (a CSV reader keeps one of the two without a word: which loss would be read?)."""
    names = list(header or [])
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ResultError(f"{path}:1: column '{twice}' is named twice in the header")
    return names


def whole_rows(text: str) -> tuple[str, int | None]:
    """The text of a metrics log up to its last line end, and the line of the row after it when there is
    one: a row cut as it was written (the process killed then), which no reader takes as a row."""
    if "\n" not in text or text.endswith(("\n", "\r")):
        return text, None
    return text[:text.rfind("\n") + 1], text.count("\n") + 1


class MetricsLog:
    """Appends rows to ``OUT_DIR/metrics.csv``. On resume from step s, rows after s are dropped
    first, and a last row cut as it was written (:func:`whole_rows`), so that the log of a resumed run
    reads like the log of an uninterrupted one."""

    def __init__(self, path: str | os.PathLike[str], resume_step: int = 0, tensorboard: bool = False) -> None:
        self.path = Path(path)
        make_dirs(self.path.parent)
        self._truncate_after(resume_step)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = open_append(self.path, newline="")
        # A log begun by an older version keeps its header (and drops the columns it lacks).
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS if new else self._header(), extrasaction="ignore")
        if new:
            self._written(self._writer.writeheader)
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                # TensorBoard writes its own files: into a real folder of the run, made by the one writer
                self._tb = SummaryWriter(str(make_dirs(self.path.parent / "tensorboard", self.path.parent)))
            except ImportError:  # tensorboard is optional
                self._tb = None

    def _text(self) -> str:
        return read_text(self.path, "metrics log", limit=TEXT_BYTES.hard, error=ResultError)

    def _header(self) -> list[str]:
        return next(csv.reader(io.StringIO(self._text(), newline="")), None) or list(COLUMNS)

    def _truncate_after(self, step: int) -> None:
        if not self.path.exists():
            return
        text, cut = whole_rows(self._text())
        try:
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as err:
            raise ResultError(f"{self.path}: not a readable metrics log ({err})") from None
        kept = [r for line, r in enumerate(rows, start=2) if self._step(r, line) <= step]
        if len(kept) == len(rows) and cut is None:
            return
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(kept)
        atomic_write_text(self.path, out.getvalue())

    def _step(self, row: dict[str, str | None], line: int) -> int:
        """The update a row logs: ASCII digits (``str.isdigit`` takes ``²``, which ``int`` refuses)."""
        step = numerals.integer(row.get("step") or "")
        if step is None or step < 0:
            raise ResultError(f"{self.path}:{line}: field 'step' must be an update number in ASCII digits, "
                              f"got {row.get('step')!r}")
        return step

    def _written(self, write: Callable[[], Any]) -> None:
        """``write`` a row (or the header) and flush it; a full disk is named, in one line (the rows
        before it are whole)."""
        try:
            write()
            self._fh.flush()
        except OSError as err:
            if err.errno in WRITE_FAULTS:
                raise cannot_write(self.path, err) from None
            raise

    def log(self, row: dict[str, Any]) -> None:
        self._written(lambda: self._writer.writerow(row))
        if self._tb is not None:
            for key in ("loss", "nll", "lr", "tokens_per_s", "dev_ppl", "dev_accuracy"):
                if key in row:
                    self._tb.add_scalar(f"train/{key}", row[key], row["step"])

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()


def read_log(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A metrics log as pandas reads it (through the one reader); an unreadable one is a ResultError
    naming it. A last row cut as it was written (:func:`whole_rows`: a killed run) is left out, as the
    resume and ``check --run`` leave it out."""
    text, _ = whole_rows(read_text(path, "metrics log", limit=TEXT_BYTES.hard, error=ResultError))
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        header = checked_header(next(rows, None), path)
        for line, row in enumerate(rows, start=2):   # pandas would take a row with more fields for an index
            if row and len(row) != len(header):
                raise ResultError(f"{path}:{line}: {len(row)} fields, but the header names {len(header)} columns")
        # only an empty field is missing: a written "nan", "NA" or "null" stays text, for the readers to name
        return pd.read_csv(io.StringIO(text), index_col=False, keep_default_na=False, na_values=[""])
    except csv.Error as err:
        raise ResultError(f"{path}: not a readable metrics log ({err})") from None
    except (ValueError, pd.errors.ParserError) as err:
        raise ResultError(f"{path}: not a readable metrics log ({str(err).splitlines()[0][:200]})") from None


def read_numbers(path: str | os.PathLike[str]) -> pd.DataFrame:
    """:func:`read_log` with every column a number: a value that is there but is no number (``nan``
    is one), or is infinite, is a ResultError naming the file, line and column. The loop stops a run
    whose loss is not finite (``TrainingDiverged``) before it logs it, so repro never logs ``inf``."""
    df = read_log(path)
    for column in df.columns:
        numbers = pd.to_numeric(df[column], errors="coerce")
        for wrong, what in ((numbers.isna() & df[column].notna(), "is not a number"),
                            (numbers.isin([np.inf, -np.inf]), "is infinite")):
            if wrong.any():
                row = int(wrong.to_numpy().argmax())
                raise ResultError(f"{path}:{row + 2}: field '{column}' {what} ({df[column].iloc[row]!r})")
        df[column] = numbers
    return df
