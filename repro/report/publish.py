"""Writing the report's files all or nothing (:func:`repro.files.writer.publish_all`).

Every file is rendered in memory first; then each is written to a temporary file beside its
destination, and only when all are written are they moved into place. An error before that point
leaves the previous report untouched and no temporary file behind. Stale figures of the previous
report are removed afterwards, only those it wrote, and only inside the report's folder.
"""

from __future__ import annotations

from pathlib import Path

from repro.files.writer import publish_all, remove


def publish(out_dir: Path, files: dict[str, bytes], *, prune: str | None = "figures",
            owned: set[str] | None = None) -> list[Path]:
    """Write ``files`` (relative path -> bytes) under ``out_dir``; remove stale PNGs of ``prune``.
    With ``owned`` (relative paths the previous report wrote), only those are ever removed."""
    out_dir = Path(out_dir)
    written = [out_dir / name for name in files]
    publish_all(dict(zip(written, files.values())), within=out_dir)
    if prune:
        for old in (out_dir / prune).glob("*.png"):
            if owned is not None and old.relative_to(out_dir).as_posix() not in owned:
                continue
            if old not in written:
                remove(old, within=out_dir)
    return written
