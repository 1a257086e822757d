"""Which process a local job is: its pid and the moment it started, as the kernel counts it.

A local job (submitit's local executor) is known by its process id, and process ids are reused:
a job that ended long ago may share its pid with an unrelated process running now. So the ledger
also records the process's start (``<boot id>:<start time in clock ticks since boot>``, field 22 of
``/proc/<pid>/stat``), and ``repro status`` reads a job as running only when the process with its
pid started at that very moment (and is not a zombie). A record of an older repro, without the
start, is read as running only while its pid runs submitit's job runner for the record's own
folder and started no later than shortly after the record was made.
"""

from __future__ import annotations

import os

from repro.errors import ReproError
from repro.files.reader import read_bytes, read_text

_KERNEL_FILE = 1 << 16


def _kernel_text(path: str) -> str | None:
    try:
        return read_text(path, "kernel file", limit=_KERNEL_FILE, undecodable="keep")
    except ReproError:
        return None


def _boot_id() -> str:
    return (_kernel_text("/proc/sys/kernel/random/boot_id") or "?").strip()


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3, the state, first)."""
    text = _kernel_text(f"/proc/{pid}/stat")
    return None if text is None else text[text.rfind(")") + 2:].split()


def process_start(pid: int) -> str | None:
    """``<boot id>:<start ticks>`` of the live process ``pid``; None when there is none (or no /proc)."""
    fields = _stat(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{_boot_id()}:{fields[19]}"


def started_at(pid: int) -> float | None:
    """When the live process ``pid`` started, in seconds since the epoch (the boot time of
    ``/proc/stat`` plus its start ticks); None when there is none."""
    fields, boot = _stat(pid), _kernel_text("/proc/stat")
    btime = next((line.split()[1] for line in (boot or "").splitlines() if line.startswith("btime ")), None)
    if fields is None or len(fields) < 20 or not fields[19].isdigit() or btime is None or not btime.isdigit():
        return None
    return int(btime) + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def has_proc() -> bool:
    return os.path.exists("/proc/self/stat")


def is_same_process(pid: int, started: str) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (a :func:`process_start`)."""
    return process_start(pid) == started


def _command_line(pid: int) -> list[bytes]:
    try:
        return read_bytes(f"/proc/{pid}/cmdline", "kernel file", limit=_KERNEL_FILE).split(b"\0")
    except ReproError:
        return []


def runs_local_job_of(pid: int, folder: str) -> bool:
    """For ledger records without a start: whether ``pid`` runs submitit's local job runner for the
    submission's own ``folder`` (``python -m submitit.local._local FOLDER``): another submission's
    job that took over the pid is not this one."""
    args = _command_line(pid)
    if b"submitit.local._local" not in args:
        return False
    wanted = os.path.realpath(folder)
    return any(os.path.realpath(os.fsdecode(arg)) == wanted for arg in args[args.index(b"submitit.local._local") + 1:]
               if arg)
