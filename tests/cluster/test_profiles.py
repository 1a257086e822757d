"""Cluster profiles: the shipped ones, and clear errors for bad or missing fields."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repro.cluster.profiles import ClusterProfileError, available_profiles, load_profile

GOOD = """
executor = "slurm"
partition = "gpu"
nodes = 1
gpus_per_node = 8
cpus_per_task = 4
mem_gb = 64
time_limit_min = 60
max_tokens_per_device = 3125
"""


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_profiles() -> None:
    assert {"paper-p100", "h100", "local"} <= set(available_profiles())
    paper = load_profile("paper-p100")
    # Section 5.2: one machine with 8 NVIDIA P100 GPUs.
    assert (paper.nodes, paper.gpus_per_node, paper.gpu_type, paper.world_size) == (1, 8, "p100", 8)
    h100 = load_profile("h100")
    assert (h100.nodes, h100.gpus_per_node, h100.gpu_type) == (1, 8, "h100")
    local = load_profile("local")
    assert (local.gpus_per_node, local.tasks_per_node, local.executor) == (0, 1, "auto")


def test_good_profile_defaults(tmp_path: Path) -> None:
    profile = load_profile(str(write(tmp_path, GOOD)))
    assert profile.tasks_per_node == 8  # one process per GPU
    assert profile.account == "" and profile.max_requeues == 10


@pytest.mark.parametrize("change, field, why", [
    (("nodes = 1", ""), "nodes", "is missing"),
    (("mem_gb = 64", ""), "mem_gb", "is missing"),
    (("nodes = 1", "nodes = 0"), "nodes", "must be positive"),
    (("nodes = 1", 'nodes = "one"'), "nodes", "must be an integer"),
    (("nodes = 1", "nodes = true"), "nodes", "must be an integer"),
    (('partition = "gpu"', "partition = 3"), "partition", "must be a string"),
    (('executor = "slurm"', 'executor = "pbs"'), "executor", "must be one of"),
    (("gpus_per_node = 8", "gpus_per_node = 8\ntasks_per_node = 4"), "tasks_per_node", "one process per GPU"),
    (("gpus_per_node = 8", "gpus_per_node = -1"), "gpus_per_node", ">= 0"),
    (("time_limit_min = 60", "time_limit_min = 60\ntime_limit = 5"), "time_limit", "is not a profile field"),
    (("gpus_per_node = 8", 'gpus_per_node = 0\ngpu_type = "p100"'), "gpu_type", "gpus_per_node is 0"),
])
def test_bad_field_names_file_and_field(tmp_path: Path, change: tuple[str, str], field: str, why: str) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ClusterProfileError) as err:
        load_profile(str(path))
    message = str(err.value)
    assert str(path) in message and f"'{field}'" in message and why in message


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "nodes = = 2\n")
    with pytest.raises(ClusterProfileError, match=r"p\.toml: not valid TOML .*line 10"):
        load_profile(str(path))


def test_unknown_profile_lists_known() -> None:
    with pytest.raises(ClusterProfileError, match="unknown cluster profile 'nope'.*paper-p100"):
        load_profile("nope")


def test_bad_profile_fails_before_submitting(tmp_path: Path) -> None:
    """`repro submit` with a broken profile exits 2 naming file and field, and submits nothing."""
    path = write(tmp_path, GOOD.replace("mem_gb = 64", "mem_gb = -4"))
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "submit", "smoke", "--cluster", str(path), "--state-dir", str(state)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert f"{path}: field 'mem_gb' must be positive" in proc.stderr
    assert not state.exists()
