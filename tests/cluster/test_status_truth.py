"""Issue 39, item 4: ``repro status`` tells the truth about local jobs and the ledger.

A local job is known by its pid *and* its process's start (:mod:`repro.cluster.process_identity`):
a pid now held by an unrelated process reads LOST, not RUNNING; a ledger whose ``submissions`` is a
regular file is an error (exit 2), not "no submissions".
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from repro.cli import main
from repro.cluster.ledger import Ledger, SubmissionRecord
from repro.cluster.process_identity import process_start


def _ledger(state: Path, job: dict) -> None:
    Ledger(state).write(SubmissionRecord(id="s1", experiment="smoke", profile="local", executor="local",
                                         created="2026-01-01T00:00:00+00:00", folder=str(state / "submitit" / "s1"),
                                         results_dir=None, job_name="j", jobs=[{"name": "smoke", **job}]))


def _states(state: Path, capsys) -> list[str]:
    capsys.readouterr()
    assert main(["status", "--state-dir", str(state), "--json"]) == 0
    return [j["state"] for j in json.loads(capsys.readouterr().out)[0]["jobs"]]


def test_a_reused_pid_reads_lost(tmp_path, capsys):
    """The ledger's job started at another moment than the process now holding its pid."""
    _ledger(tmp_path, {"job_id": str(os.getpid()), "started": "another-boot:12345"})
    assert _states(tmp_path, capsys) == ["LOST"]


def test_an_old_record_whose_pid_is_an_unrelated_process_reads_lost(tmp_path, capsys):
    """A record without a start: the live process of its pid (this test) is not a submitit job runner."""
    _ledger(tmp_path, {"job_id": str(os.getpid())})
    assert _states(tmp_path, capsys) == ["LOST"]


def test_the_same_process_reads_running(tmp_path, capsys):
    _ledger(tmp_path, {"job_id": str(os.getpid()), "started": process_start(os.getpid())})
    assert _states(tmp_path, capsys) == ["RUNNING"]


def test_a_vanished_job_reads_lost(tmp_path, capsys):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _ledger(tmp_path, {"job_id": gone.stdout.strip(), "started": "x:1"})
    assert _states(tmp_path, capsys) == ["LOST"]


def test_submissions_that_is_a_file_is_an_error(tmp_path, capsys):
    (tmp_path / "submissions").write_text("not a folder\n")
    assert main(["status", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "submissions") in err and "no submissions" not in err


def _submitit_like(folder: Path) -> subprocess.Popen:
    """A live process whose command line is submitit's local job runner's, for ``folder``."""
    code = "import sys, time; print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, "-m", "submitit.local._local", str(folder)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def test_an_old_records_pid_now_another_submitit_job_reads_lost(tmp_path, capsys):
    """Issue 45: a record without a start whose pid a job runner of *another* submission now holds."""
    other = _submitit_like(tmp_path / "submitit" / "another-submission")
    try:
        _ledger(tmp_path, {"job_id": str(other.pid)})
        assert _states(tmp_path, capsys) == ["LOST"]
    finally:
        other.kill()
        other.wait()


def test_an_old_records_pid_reused_by_a_later_runner_of_its_own_folder_reads_lost(tmp_path, capsys):
    """The runner names the record's very folder but started long after the record was made (2026-01-01)."""
    later = _submitit_like(tmp_path / "submitit" / "s1")
    try:
        _ledger(tmp_path, {"job_id": str(later.pid)})
        assert _states(tmp_path, capsys) == ["LOST"]
    finally:
        later.kill()
        later.wait()


def test_an_old_records_own_runner_reads_running(tmp_path, capsys):
    runner = _submitit_like(tmp_path / "submitit" / "s1")
    try:
        Ledger(tmp_path).write(SubmissionRecord(
            id="s1", experiment="smoke", profile="local", executor="local",
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            folder=str(tmp_path / "submitit" / "s1"), results_dir=None, job_name="j",
            jobs=[{"name": "smoke", "job_id": str(runner.pid)}]))
        assert _states(tmp_path, capsys) == ["RUNNING"]
    finally:
        runner.kill()
        runner.wait()
