"""The main job's own record names, the ci95 field, and the dirty rule of provenance commits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repro.cli import main
from repro.errors import ResultError
from repro.report.newest import latest
from repro.results import Provenance, Result, ResultStore
from repro.results.provenance import git_commit, source_identity


def prov(date: str = "2026-01-01") -> Provenance:
    return Provenance(commit="abc", config_hash="h", hardware="cpu", dataset="d", date=date, scale="local: x")


def test_named_record_is_replaced_in_place_and_others_kept(tmp_path):
    store = ResultStore(tmp_path)
    other = store.write(Result("c", 1.0, prov()))
    first = store.write(Result("c", 2.0, prov("2026-01-02")), "reproduce-local")
    second = store.write(Result("c", 3.0, prov("2026-01-03")), "reproduce-local")
    assert first == second == tmp_path / "c" / "reproduce-local.json" and other.exists()
    assert latest(store)["c"].measured == 3.0
    with pytest.raises(ResultError):
        store.write(Result("c", 1.0, prov()), "../escape")


def test_ci95_round_trips_and_is_validated(tmp_path):
    path = ResultStore(tmp_path).write(Result("c", 27.0, prov(), ci95=(26.1, 27.9)))
    data = json.loads(path.read_text())
    assert data["ci95"] == [26.1, 27.9] and latest(ResultStore(tmp_path))["c"].ci95 == (26.1, 27.9)
    data["ci95"] = [28, 27]
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match="ci95"):
        ResultStore(tmp_path).read_all()
    assert "ci95" not in Result("c", 1, prov()).to_dict()  # records without an interval are unchanged


def test_dirty_only_for_source_changes(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path, check=True,
                       capture_output=True)
    for rel in ("repro/x.py", "reports/local/results/c/reproduce-local.json", "runs/log.txt", "claims/a.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "init")
    (tmp_path / "reports/local/results/c/reproduce-local.json").write_text("1\n")  # the main job's own writes
    (tmp_path / "runs/log.txt").write_text("1\n")
    assert not git_commit(tmp_path).endswith("-dirty")
    (tmp_path / "claims/a.toml").write_text("1\n")
    assert git_commit(tmp_path).endswith("-dirty")


def test_reports_flag_puts_the_report_in_dir(tmp_path, monkeypatch):
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return {"sacrebleu": 1.0, "paper_protocol_bleu": 1.0, "dev_ppl": 2.0, "steps": 1, "wall_minutes_total": 0,
                "checks": {}}
    monkeypatch.setattr("repro.commands.reproduce.reproduce_local", fake)
    assert main(["reproduce", "--reports", str(tmp_path / "r"), "--skip-checks"]) == 0
    assert Path(seen["report_dir"]) == tmp_path / "r" and Path(seen["reports_dir"]) == tmp_path / "r" / "local"
    assert main(["reproduce", "--seeds", "0"]) == 2


def test_a_copy_inside_another_repository_names_no_commit(tmp_path, repo_root):
    """A virtual environment inside a user's own repository: git there answers with the user's HEAD,
    which is not repro's code. The record names the version and a hash of the package's files instead."""
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path, check=True,
                       capture_output=True)
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    shutil.copytree(repo_root / "repro", site / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "train.py").write_text("print('a user script')\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "the user's project")
    user_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    code = "from repro.results.provenance import git_commit, source_identity; print(git_commit()); print(source_identity())"
    env = {k: v for k, v in os.environ.items() if k != "REPRO_COMMIT"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(site)},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1] and out[0].startswith("no-git:repro-") and user_head.strip() not in out[0]
    assert out[0] == source_identity(repo_root)   # the same files, the same identity wherever they lie
    (site / "repro" / "model" / "attention.py").write_text("# changed\n", encoding="utf-8")
    assert source_identity(site) != out[0]


def test_the_projects_own_checkout_names_its_commit(repo_root):
    if not (repo_root / ".git").exists():
        pytest.skip("not run from a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root, capture_output=True, text=True).stdout.strip()
    assert git_commit().removesuffix("-dirty") == head
