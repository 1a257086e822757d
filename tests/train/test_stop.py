"""SIGINT/SIGTERM stop a run between updates with a checkpoint of the update in flight (repro.train.stop)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.loop import run
from repro.train.stop import StopSignals
from tests.train.test_loop import VOCAB, quiet, tiny_config, toy_examples


def _signal_at(step_wanted: int, signum: int = signal.SIGTERM):
    def on_step(step: int) -> None:
        if step == step_wanted:
            os.kill(os.getpid(), signum)
    return on_step


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_checkpoints_the_next_update_and_the_resume_equals_the_uninterrupted_run(tmp_path: Path,
                                                                                          signum: int) -> None:
    examples = toy_examples()
    full = run(tiny_config(tmp_path / "full", checkpoint_every_steps=5), examples, VOCAB, log=quiet)
    cfg = tiny_config(tmp_path / "cut", checkpoint_every_steps=5)
    evaluated: list[int] = []
    said: list[str] = []
    stop = StopSignals(say=said.append)
    before = signal.getsignal(signum)
    cut = run(cfg, examples, VOCAB, log=said.append, on_step=_signal_at(2, signum), stop=stop,
              evaluate=lambda model, step: evaluated.append(step) or {})
    assert signal.getsignal(signum) is before   # the handlers are the loop's only while it runs
    assert cut.steps == 3 and cut.extra["stopped_by"] == signal.Signals(signum).name
    assert stop.exit_code == 128 + signum
    assert [p.name for p in list_checkpoints(tmp_path / "cut")] == ["step_00000003.pt"]
    assert evaluated == []   # a stop does not wait for a dev evaluation
    assert any("stopped by" in line and "step_00000003.pt" in line for line in said), said
    resumed = run(cfg, examples, VOCAB, log=quiet)
    assert resumed.resumed_from == 3 and resumed.steps == full.steps == 6 and "stopped_by" not in resumed.extra
    a = load_checkpoint(list_checkpoints(tmp_path / "full")[-1])
    b = load_checkpoint(list_checkpoints(tmp_path / "cut")[-1])
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key


def test_a_second_signal_stops_at_once(tmp_path: Path) -> None:
    def twice(step: int) -> None:
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        run(tiny_config(tmp_path, checkpoint_every_steps=5), toy_examples(), VOCAB, log=quiet, on_step=twice,
            stop=StopSignals(say=quiet))
    assert list_checkpoints(tmp_path) == []   # nothing written for the stop


def test_a_signal_in_the_last_update_ends_the_run_as_usual(tmp_path: Path) -> None:
    summary = run(tiny_config(tmp_path), toy_examples(), VOCAB, log=quiet, on_step=_signal_at(6),
                  stop=StopSignals(say=quiet))
    assert summary.steps == 6 and "stopped_by" not in summary.extra


def test_repro_train_stopped_by_sigterm_exits_143_with_a_checkpoint_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "repro", "train", "--recipe", "smoke", "--out-dir", str(out),
               "--max-steps", "100000", "--set", "log_every=1", "--threads", "1"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    metrics = out / "metrics.csv"
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    summary = json.loads(stdout)
    last = list_checkpoints(out)[-1]
    assert summary["stopped_by"] == "SIGTERM" and summary["steps"] == load_checkpoint(last)["step"]
    record = json.loads((out / "run.json").read_text())
    assert record["sessions"][-1]["stopped_by"] == "SIGTERM"
    assert not list(out.rglob("*.tmp*"))   # nothing half-written
