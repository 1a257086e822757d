"""The metrics log: one CSV row per logged step (pandas.read_csv reads it), TensorBoard optional."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from repro.errors import WRITE_FAULTS, cannot_write

#: ``dev_ppl`` and ``dev_accuracy`` (token accuracy) are filled at checkpoints when the loop is given a dev
#: evaluation, empty elsewhere; ``padding``: the share of the logged update's passes (on this device) that is PAD.
COLUMNS = ("step", "loss", "nll", "lr", "tokens_per_s", "src_tokens", "tgt_tokens", "elapsed_s", "epoch", "dev_ppl",
           "padding", "dev_accuracy")


class MetricsLog:
    """Appends rows to ``OUT_DIR/metrics.csv``. On resume from step s, rows after s are dropped
    first, so that the log of a resumed run reads like the log of an uninterrupted one."""

    def __init__(self, path: str | os.PathLike[str], resume_step: int = 0, tensorboard: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_after(resume_step)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = self.path.open("a", newline="", encoding="utf-8")
        # A log begun by an older version keeps its header (and drops the columns it lacks).
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS if new else self._header(), extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._fh.flush()
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self._tb = SummaryWriter(str(self.path.parent / "tensorboard"))
            except ImportError:  # tensorboard is optional
                self._tb = None

    def _header(self) -> list[str]:
        with self.path.open(newline="", encoding="utf-8") as fh:
            return next(csv.reader(fh), None) or list(COLUMNS)

    def _truncate_after(self, step: int) -> None:
        if not self.path.exists():
            return
        with self.path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        kept = [r for r in rows if r.get("step", "").isdigit() and int(r["step"]) <= step]
        if len(kept) == len(rows):
            return
        tmp = self.path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(kept)
        os.replace(tmp, self.path)

    def log(self, row: dict[str, Any]) -> None:
        try:
            self._writer.writerow(row)
            self._fh.flush()
        except OSError as err:   # a full disk: named, one line (the rows before it are whole)
            if err.errno in WRITE_FAULTS:
                raise cannot_write(self.path, err) from None
            raise
        if self._tb is not None:
            for key in ("loss", "nll", "lr", "tokens_per_s", "dev_ppl", "dev_accuracy"):
                if key in row:
                    self._tb.add_scalar(f"train/{key}", row[key], row["step"])

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()
