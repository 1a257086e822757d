"""``repro check --run`` on a run killed before its session ended (:mod:`repro.observed.interruption`).

A real ``repro train`` in a subprocess, killed (SIGKILL, as a SLURM time limit or an out-of-memory kill
ends it) once it has logged updates past its 2nd checkpoint: no ``run.json``, rows past the newest
checkpoint. Its records must read as interrupted (checked up to the newest checkpoint; the session's end
"needs another run", naming where it stopped and how to resume), never as contradicting each other;
resumed to its end it reads as a finished run; a real contradiction inside it still fails.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.checks.run_check import check_run
from repro.train.metrics_log import MetricsLog
from tests.cli_run import refusal, run

pytestmark = pytest.mark.xdist_group("interrupted-run")

EVERY, MAX_STEPS = 5, 20
SETTINGS = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, max_steps=MAX_STEPS, warmup_steps=4,
                checkpoint_every_steps=EVERY, keep_checkpoints=5, average_last=2, log_every=1,
                model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4})


def train(out: Path, data: Path, repo: Path) -> subprocess.Popen:
    """``repro train`` of the toy recipe into ``out``, in a subprocess (it resumes when ``out`` holds a checkpoint)."""
    sets = [a for k, v in dict(SETTINGS, dataset=str(data)).items() for a in ("--set", f"{k}={json.dumps(v)}")]
    return subprocess.Popen([sys.executable, "-m", "repro", "train", "--recipe", "local", "--out-dir", str(out),
                             "--threads", "1", "--precision", "fp32", *sets], cwd=repo,
                            env=dict(os.environ, PYTHONPATH=str(repo)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def logged(out: Path) -> int:
    lines = (out / "metrics.csv").read_text().splitlines() if (out / "metrics.csv").is_file() else []
    last = lines[-1].split(",")[0] if len(lines) > 1 else ""
    return int(last) if last.isdigit() else 0


def newest(out: Path) -> int:
    return max(int(p.stem[5:]) for p in (out / "checkpoints").glob("step_*.pt"))


@pytest.fixture(scope="module")
def killed(tmp_path_factory, tiny_multi30k, repo_root) -> Path:
    """A run killed with SIGKILL once it logged 2 updates past its 2nd checkpoint (and before its 3rd)."""
    root = tmp_path_factory.mktemp("interrupted")
    data = tiny_multi30k(root / "tiny", {"train": 200, "dev": 10, "test": 10})
    out = root / "run"
    proc = train(out, data, repo_root)
    deadline = time.monotonic() + 300
    while proc.poll() is None and logged(out) < 2 * EVERY + 2 and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err
    assert not (out / "run.json").exists() and logged(out) > newest(out) >= 2 * EVERY, "the kill came too late"
    return out


@pytest.fixture
def copy(killed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(killed, tmp_path / "run"))


def verdicts(path: Path) -> dict[str, object]:
    return {r.claim.id: r for r in check_run(path).records}


def test_a_killed_run_reads_as_interrupted_not_as_contradicting_itself(killed: Path, capsys) -> None:
    last = newest(killed)
    rc, out, _ = run(capsys, "check", "--run", str(killed), "--json", str(killed.parent / "check.json"))
    records = json.loads((killed.parent / "check.json").read_text())
    assert rc == 0 and not [r["id"] for r in records if r["verdict"] in ("fail", "error")], \
        [(r["id"], r["detail"]) for r in records if r["verdict"] in ("fail", "error")]
    by_id = {r["id"]: r for r in records}
    # what did happen, up to the newest checkpoint, is checked on the records
    for claim in ("observed.eq3.rates", "observed.warmup-steps", "observed.batch-tokens", "observed.checkpoint-interval"):
        assert by_id[claim]["verdict"] == "departs", (claim, by_id[claim]["detail"])
    assert f"updates 1-{last})" in by_id["observed.eq3.rates"]["detail"]
    # what only the session's end writes is not run, naming where the run stopped and how to resume
    for claim in ("observed.train-steps.base", "observed.hardware", "observed.corpus.ende", "sec5.step-time.base"):
        detail = by_id[claim]["detail"]
        assert by_id[claim]["verdict"] == "needs another run", (claim, detail)
        assert f"interrupted: its records stop at update {last} of its {MAX_STEPS}" in detail, (claim, detail)
        assert f"--out-dir {killed}" in detail and "resume" in detail, (claim, detail)
    assert by_id["observed.train-steps.base"]["interrupted"]["last_step"] == last
    assert f"interrupted: its records stop at update {last}" in out.splitlines()[0]


@pytest.mark.parametrize("damage, claims, named", [
    (lambda p: _drop_row(p, 3), ("observed.eq3.rates", "observed.batch-tokens"), "no row for update 3"),
    (lambda p: (p / "checkpoints" / "step_00000005.pt").rename(p / "checkpoints" / "step_00000004.pt"),
     ("observed.checkpoint-interval",), "step_00000004.pt: holds update 5"),
    (lambda p: (p / "checkpoints" / "step_00000005.pt").unlink(), ("observed.checkpoint-interval",),
     "step_00000005.pt is missing"),
])
def test_a_contradiction_inside_an_interrupted_run_still_fails(copy: Path, damage, claims, named: str) -> None:
    damage(copy)
    records = verdicts(copy)
    for claim in claims:
        assert records[claim].status.value == "fail" and named in records[claim].detail, (claim, records[claim].detail)


def test_a_row_cut_by_the_kill_is_left_out_and_named(copy: Path, capsys) -> None:
    with (copy / "metrics.csv").open("a", newline="") as fh:
        fh.write(f"{logged(copy) + 1},4.4")
    lines = len((copy / "metrics.csv").read_text().splitlines())
    rc, out, err = run(capsys, "check", "--run", str(copy))
    assert rc == 0 and "Traceback" not in err, err
    assert f"metrics.csv line {lines} was cut as it was written" in out.splitlines()[0]
    MetricsLog(copy / "metrics.csv", resume_step=newest(copy)).close()   # a resume drops it
    assert (copy / "metrics.csv").read_text().endswith("\n") and logged(copy) == newest(copy)


def test_a_run_killed_before_its_first_checkpoint_is_named_so(copy: Path, capsys) -> None:
    shutil.rmtree(copy / "checkpoints")
    rc, _, err = run(capsys, "check", "--run", str(copy))
    assert rc == 2 and "a training run interrupted before its first checkpoint" in refusal(err), err


def test_a_record_past_the_newest_checkpoint_is_no_interruption(copy: Path) -> None:
    (copy / "run.json").write_text(json.dumps({
        "format": "repro-run", "version": 1, "recipe": {"train": {}}, "steps": MAX_STEPS,
        "sessions": [{"resumed_from": 0, "ended_at": MAX_STEPS}]}))
    record = verdicts(copy)["observed.train-steps.base"]
    assert record.status.value == "fail" and f"field 'steps' is {MAX_STEPS}" in record.detail, record.detail


def test_resumed_to_its_end_it_reads_as_a_finished_run(killed: Path, copy: Path, repo_root, tmp_path, capsys) -> None:
    proc = train(copy, killed.parent / "tiny", repo_root)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    rc, out, _ = run(capsys, "check", "--run", str(copy), "--json", str(tmp_path / "check.json"))
    records = {r["id"]: r for r in json.loads((tmp_path / "check.json").read_text())}
    assert rc == 0 and "interrupted" not in out.splitlines()[0]
    assert all(r["interrupted"] is None for r in records.values())
    assert records["observed.train-steps.base"]["verdict"] == "departs"
    assert f"ran {MAX_STEPS} of 100000 updates" in records["observed.train-steps.base"]["detail"]
    assert records["observed.hardware"]["verdict"] == "departs"


def _drop_row(path: Path, step: int) -> None:
    rows = list(csv.DictReader((path / "metrics.csv").open()))
    with (path / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["step"] != str(step))
