"""The main job's own record names, the ci95 field, and the dirty rule of provenance commits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from repro.cli import main
from repro.errors import ResultError
from repro.results import Provenance, Result, ResultStore
from repro.results.provenance import git_commit


def prov(date: str = "2026-01-01") -> Provenance:
    return Provenance(commit="abc", config_hash="h", hardware="cpu", dataset="d", date=date, scale="local: x")


def test_named_record_is_replaced_in_place_and_others_kept(tmp_path):
    store = ResultStore(tmp_path)
    other = store.write(Result("c", 1.0, prov()))
    first = store.write(Result("c", 2.0, prov("2026-01-02")), "reproduce-local")
    second = store.write(Result("c", 3.0, prov("2026-01-03")), "reproduce-local")
    assert first == second == tmp_path / "c" / "reproduce-local.json" and other.exists()
    assert store.latest()["c"].measured == 3.0
    with pytest.raises(ResultError):
        store.write(Result("c", 1.0, prov()), "../escape")


def test_ci95_round_trips_and_is_validated(tmp_path):
    path = ResultStore(tmp_path).write(Result("c", 27.0, prov(), ci95=(26.1, 27.9)))
    data = json.loads(path.read_text())
    assert data["ci95"] == [26.1, 27.9] and ResultStore(tmp_path).latest()["c"].ci95 == (26.1, 27.9)
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
