"""``repro audit --zoo``: every installed zoo adapter against every auditable claim, side by side.

Rows are claims, columns implementations (:mod:`repro.audit.zoo`). Each cell has the claim's
status for that implementation, a one-line reason and a category that keeps apart what a
reader must not confuse: a *departure* from the paper (the claim measured and failed, or the
implementation has no such part: "absent"), a claim that does *not apply* (the adapter does not
expose the part), an *inconclusive* comparison (the outputs compared could show nothing), an
*adapter error* (the adapter or the implementation broke while being measured), and the paper
contradicting itself.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from repro.audit.audit import AuditRecord, run_audit
from repro.audit.load import load_adapter
from repro.audit.on_device import on_device
from repro.audit.zoo import NOT_INSTALLABLE, ZooEntry, missing_entries
from repro.claims import Claim, Outcome
from repro.claims.runner import ABSENT
from repro.claims.table import format_value
from repro.errors import ReproError
from repro.runtime import Runtime

#: The category of each outcome, as the report shows it.
CATEGORY = {
    Outcome.PASS: "pass",
    Outcome.FAIL: "departure",
    Outcome.INCONSISTENT: "paper inconsistent",
    Outcome.NOT_APPLICABLE: "not applicable",
    Outcome.ERROR: "adapter error",
    Outcome.NOT_RUN: "not run",
    Outcome.INCONCLUSIVE: "inconclusive",
}


@dataclass
class Cell:
    status: str
    category: str
    reason: str
    why: str = ""
    measured: Any = None


@dataclass
class Column:
    """One implementation: its entry, the adapter's name, the library's version, and either
    its cells (claim id -> cell) or the error that kept the adapter from loading."""

    entry: ZooEntry
    name: str = ""
    version: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0


@dataclass
class ZooAudit:
    claims: list[Claim]
    columns: list[Column]
    provenance: dict[str, Any]
    missing: list[ZooEntry]
    not_installable: dict[str, str]


def one_line(record: AuditRecord, limit: int = 160) -> str:
    """The reason in one short line: measured vs paper (and the detail's first clause) for a
    measurement, the reason without the implementation's name otherwise."""
    check = record.check
    if ABSENT in check.extra:
        text = f"absent: {check.extra[ABSENT]}".replace(f"{record.target} ", "")
    elif record.status.measured:
        text = f"{format_value(check.measured, 40)} vs paper {format_value(record.claim.expected, 40)}"
        first = check.detail.split(";")[0].strip()
        if first and len(text) + len(first) < limit:
            text += f"; {first}"
    else:
        text = check.detail.replace(f"{record.target} ", "").replace(f"{record.target}: ", "")
        text = text.split(f"claim {record.claim.id}: ")[-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(record: AuditRecord) -> Cell:
    return Cell(record.status.value, CATEGORY[record.status], one_line(record), record.why, record.check.measured)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance(runtime: Runtime | None = None) -> dict[str, Any]:
    host = f"{platform.machine()} CPU, {torch.get_num_threads()} torch threads"
    on_gpu = runtime is not None and runtime.on_gpu
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": _commit(),
        "hardware": f"{torch.cuda.get_device_name(runtime.device)} ({runtime.device}), inputs built on the {host}"
                    if on_gpu else host,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "scale": ("each claim at the sizes it names (equation checks at d_model 16-512; the base model "
                  "d_model 512, N 6, h 8, d_ff 2048 for sec3.base.dimensions; Table 3's rows at a shared vocabulary "
                  "of 37000, built on the meta device where the library allows); random weights, nothing downloaded"),
    }


def run_zoo(
    entries: Sequence[ZooEntry],
    claims: Sequence[Claim],
    seed: int = 0,
    on_record: Callable[[ZooEntry, AuditRecord], None] | None = None,
    runtime: Runtime | None = None,
) -> ZooAudit:
    """Audit each entry's adapter on ``claims`` (its parts on ``runtime``'s device, default the
    CPU); an adapter that cannot be loaded is a column with its error, never a stop."""
    columns = []
    for entry in entries:
        column = Column(entry, version=_version(entry.distribution))
        start = time.perf_counter()
        try:
            adapter = load_adapter(entry.target)
        except ReproError as err:
            column.error = str(err)
            columns.append(column)
            continue
        column.name = adapter.name
        callback = (lambda r, e=entry: on_record(e, r)) if on_record else None
        target = on_device(adapter, runtime) if runtime is not None else adapter
        for record in run_audit(target, claims, seed=seed, on_record=callback):
            column.cells[record.claim.id] = _cell(record)
        column.seconds = time.perf_counter() - start
        columns.append(column)
    return ZooAudit(list(claims), columns, provenance(runtime), missing_entries(), dict(NOT_INSTALLABLE))
