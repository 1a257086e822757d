"""Issue 39, item 7 (bounds and unused flags of ``repro submit``): refused before any job is planned.

``--seeds 1000000`` is refused before 20 million jobs are planned; ``--parallel`` with SLURM,
``--set`` fields and ``--data-dir`` a synthetic job never reads, ``device=cuda`` on a profile
without GPUs, and a ``max_tokens_per_device`` that holds no training pair are refused (exit 2); a
data directory that does not exist is warned about in a dry run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from repro.cli import main
from tests.cli_run import refusal

REPO = Path(__file__).resolve().parents[2]


def submit(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(["submit", *argv])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_million_seeds_are_refused_before_planning(tmp_path, capsys):
    began = time.monotonic()
    rc, _, err = submit(capsys, "table3", "--scale", "small", "--seeds", "1000000", "--cluster", "local",
                        "--dry-run", "--state-dir", str(tmp_path / "s"))
    assert rc == 2 and "--seeds" in refusal(err) and time.monotonic() - began < 10


def test_parallel_with_slurm_is_refused(tmp_path, capsys):
    rc, _, err = submit(capsys, "smoke", "--cluster", "local", "--executor", "slurm", "--parallel", "2", "--dry-run",
                        "--state-dir", str(tmp_path / "s"))
    assert rc == 2 and "--parallel" in refusal(err)


@pytest.mark.parametrize("assignment, field", [("bpe_split=\"words\"", "bpe_split"), ("max_len=50", "max_len")])
def test_fields_a_synthetic_job_never_reads_are_refused(tmp_path, capsys, assignment, field):
    rc, _, err = submit(capsys, "smoke", "--cluster", "local", "--set", assignment, "--dry-run",
                        "--state-dir", str(tmp_path / "s"))
    assert rc == 2 and field in refusal(err)


def test_data_dir_on_a_synthetic_job_is_refused(tmp_path, capsys):
    rc, _, err = submit(capsys, "smoke", "--cluster", "local", "--data-dir", str(tmp_path), "--dry-run",
                        "--state-dir", str(tmp_path / "s"))
    assert rc == 2 and "--data-dir" in refusal(err)


def test_cuda_on_a_profile_without_gpus_is_refused(tmp_path, capsys):
    rc, _, err = submit(capsys, "smoke", "--cluster", "local", "--set", "device=\"cuda\"", "--dry-run",
                        "--state-dir", str(tmp_path / "s"))
    line = refusal(err)
    assert rc == 2 and "cuda" in line and "gpus_per_node" in line


@pytest.mark.parametrize("experiment", ["smoke", "table2-base-ende"])
def test_a_profile_whose_passes_hold_no_pair_is_refused(tmp_path, capsys, experiment):
    text = (REPO / "slurm" / "local.toml").read_text()
    profile = tmp_path / "tiny.toml"
    profile.write_text("\n".join("max_tokens_per_device = 1" if line.startswith("max_tokens_per_device") else line
                                 for line in text.splitlines()) + "\n")
    data = [] if experiment == "smoke" else ["--data-dir", str(tmp_path)]
    rc, _, err = submit(capsys, experiment, "--cluster", str(profile), "--dry-run", "--state-dir", str(tmp_path / "s"),
                        *data)
    assert rc == 2 and "max_tokens_per_device = 1" in refusal(err)


def test_a_dry_run_warns_of_a_data_directory_that_does_not_exist(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "nowhere"))
    rc, out, err = submit(capsys, "table2-base-ende", "--cluster", "local", "--dry-run", "--json",
                          "--state-dir", str(tmp_path / "s"))
    assert rc == 0 and json.loads(out)["jobs"]
    assert "WARNING" in err and str(tmp_path / "nowhere") in err
