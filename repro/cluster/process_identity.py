"""Which process a local job is: its pid and the moment it started, as the kernel counts it.

A local job (submitit's local executor) is known by its process id, and process ids are reused:
a job that ended long ago may share its pid with an unrelated process running now. So the ledger
also records the process's start (``<boot id>:<start time in clock ticks since boot>``, field 22 of
``/proc/<pid>/stat``), and ``repro status`` reads a job as running only when the process with its
pid started at that very moment (and is not a zombie).
"""

from __future__ import annotations

from pathlib import Path


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3, the state, first)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return text[text.rfind(")") + 2:].split()


def process_start(pid: int) -> str | None:
    """``<boot id>:<start ticks>`` of the live process ``pid``; None when there is none (or no /proc)."""
    fields = _stat(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{_boot_id()}:{fields[19]}"


def has_proc() -> bool:
    return Path("/proc/self/stat").exists()


def is_same_process(pid: int, started: str) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (a :func:`process_start`)."""
    return process_start(pid) == started


def looks_like_local_job(pid: int) -> bool:
    """For ledger records without a start: whether ``pid`` runs submitit's local job runner."""
    try:
        return b"submitit" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
