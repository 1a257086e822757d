"""A job spec run by torchrun: the task takes its place from torchrun's environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT), joins through the agent's store, and trains as a SLURM task does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repro.cluster.rendezvous import Place, find_place
from repro.errors import ConfigError
from repro.results import ResultStore


def test_a_torchrun_environment_is_a_place() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
    place = find_place(env)
    assert (place.rank, place.world_size, place.local_rank) == (3, 8, 3) and place.init_method == "env://"
    assert find_place({}) == Place()   # outside any job: one process
    with pytest.raises(ConfigError, match="LOCAL_RANK, MASTER_PORT not set"):
        find_place({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x"})
    with pytest.raises(ConfigError, match="rank 9 of world size 8"):
        find_place({**env, "RANK": "9"})


@pytest.mark.slow
def test_torchrun_runs_a_two_process_job(tmp_path: Path, repo_root: Path) -> None:
    torchrun = shutil.which("torchrun") or pytest.fail("torchrun (installed with torch) not found")
    plan = subprocess.run([sys.executable, "-m", "repro", "submit", "smoke", "--cluster", "local", "--dry-run",
                           "--json", "--state-dir", str(tmp_path / "state"), "--set", "max_steps=3",
                           "--set", f"out_dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(json.loads(plan.stdout)["jobs"][0]))
    env = {**os.environ, "PYTHONPATH": str(repo_root), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "repro.cluster.job", str(spec),
                           "--results", str(tmp_path / "results")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = sorted(json.loads(line)["rank"] for line in proc.stdout.splitlines() if line.startswith("{"))
    assert ranks == [0, 1]
    [record] = ResultStore(tmp_path / "results").read_all()
    assert record.extra["world_size"] == 2 and record.extra["steps"] == 3
