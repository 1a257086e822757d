"""Issue 39, item 2: one writer per run directory (:mod:`repro.run_lock`).

Two ``repro train`` runs started at the same instant into one ``--out-dir`` must not both train:
exactly one does, the other is refused with exit 2 naming the holder; a lock left by a process
that is gone does not refuse anything; ``reproduce`` and the cluster job hold the lock too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from repro.cli import main
from repro.run_lock import NAME, RunDirBusy, run_dir_lock

REPO = Path(__file__).resolve().parents[2]

_AT_ONCE = textwrap.dedent("""
    import os, sys, time
    from repro.cli import build_parser, main
    import repro.train.loop  # noqa: F401 - everything imported first, so that both start their work at once
    build_parser()
    ready, go = sys.argv[1], sys.argv[2]
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    sys.exit(main(sys.argv[3:]))
""")


def _together(argv: list[str], barrier: Path, n: int = 2) -> list[subprocess.CompletedProcess]:
    """``repro ARGV`` in ``n`` processes released at one instant (a file both poll), after their imports."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    barrier.mkdir()
    go = barrier / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _AT_ONCE, str(barrier / f"ready-{i}"), str(go), *argv], env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(n)]
    deadline = time.monotonic() + 240
    while not all((barrier / f"ready-{i}").exists() for i in range(n)) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_two_trains_started_together_one_is_refused(tmp_path):
    out = tmp_path / "run"
    results = _together(["train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "3"], tmp_path / "barrier")
    codes = sorted(r.returncode for r in results)
    assert codes == [0, 2], [r.stderr[-2000:] for r in results]
    loser = next(r for r in results if r.returncode == 2)
    line = [x for x in loser.stderr.splitlines() if "error:" in x]
    assert len(line) == 1 and str(out) in line[0] and "in use by pid" in line[0], loser.stderr
    rows = (out / "metrics.csv").read_text().splitlines()
    steps = [r.split(",")[0] for r in rows[1:]]
    assert len(steps) == len(set(steps)), "the metrics log holds a step twice"
    assert not (out / NAME).exists(), "the lock is released on exit"


def test_train_refused_while_another_holds_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    with run_dir_lock(out):
        rc = main(["train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "2"])
        err = capsys.readouterr().err
        assert rc == 2 and f"pid {os.getpid()}" in err and str(out) in err
        assert not (out / "checkpoints").exists()
    assert main(["train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "2"]) == 0


def test_reproduce_refused_while_another_holds_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    with run_dir_lock(out):
        try:
            rc = main(["reproduce", "--out-dir", str(out), "--reports", str(tmp_path / "reports"), "--skip-checks",
                       "--data-dir", str(tmp_path / "nodata")])
        except SystemExit as exc:
            rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and "in use by pid" in err


def test_cluster_job_holds_the_lock(tmp_path):
    from repro.cluster.job import TrainingJob

    out = tmp_path / "run"
    spec = {"name": "x", "experiment": "smoke", "train": {"dataset": "synthetic", "out_dir": str(out), "max_steps": 1,
                                                           "tokens_per_batch": 128, "max_tokens_per_device": 32}}
    with run_dir_lock(out):
        with pytest.raises(RunDirBusy, match="in use by pid"):
            TrainingJob(spec, None, 0)()


def test_stale_lock_of_a_gone_process_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": "here", "started": time.time()}))
    assert main(["train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "2"]) == 0
    assert not (out / NAME).exists()


def test_lock_left_by_a_killed_holder_is_released(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.run_lock import run_dir_lock\n"
                               f"with run_dir_lock({str(out)!r}):\n print('held', flush=True); time.sleep(60)"],
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunDirBusy, match=f"pid {holder.pid}"):
        with run_dir_lock(out):
            pass
    holder.kill()
    holder.wait()
    with run_dir_lock(out):
        pass
