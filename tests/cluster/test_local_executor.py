"""submitit's local executor: the fallback where no SLURM answers (no SLURM needed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from repro.cluster.executor import resolve_executor, submit_jobs
from repro.cluster.experiments import Plan, plan_jobs
from repro.cluster.profiles import ClusterProfileError, load_profile
from repro.cluster.ledger import Ledger, expand_job_ids, job_states
from repro.errors import ConfigError
from repro.results import ResultStore


def test_auto_falls_back_to_local_without_slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo, no sbatch
    assert resolve_executor(None, load_profile("local")) == "local"
    assert resolve_executor("auto", load_profile("local")) == "local"


def test_local_executor_cannot_run_several_nodes() -> None:
    profile = dataclasses.replace(load_profile("local"), nodes=2)
    with pytest.raises(ClusterProfileError, match="'nodes' is 2"):
        resolve_executor("local", profile)


def test_smoke_job_on_the_local_executor(tmp_path: Path, wait_done) -> None:
    profile = dataclasses.replace(load_profile("local"), executor="local")
    specs = plan_jobs("smoke", Plan(profile, tmp_path / "jobs", overrides={"max_steps": 6}))
    submitted = submit_jobs(specs, profile, kind="local", ledger=Ledger(tmp_path / "state"),
                            results_dir=tmp_path / "results", job_name="repro-local-smoke")
    [job] = submitted.jobs
    wait_done(job, 180)
    assert job.result()["steps"] == 6
    [record] = Ledger(tmp_path / "state").read_all()
    assert record.executor == "local" and job_states(record)[0]["state"] == "COMPLETED"
    [result] = ResultStore(tmp_path / "results").read_all()
    assert result.claim_id == "run.smoke"


def test_expand_pending_array_ids() -> None:
    assert expand_job_ids("42_[0-2,5%2]") == ["42_0", "42_1", "42_2", "42_5"]
    assert expand_job_ids("42_3") == ["42_3"]


def test_malformed_ledger_record_is_named(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.directory.mkdir(parents=True)
    (ledger.directory / "bad.json").write_text(json.dumps({"id": "x"}))
    with pytest.raises(ConfigError, match=r"bad\.json: submission record lacks field 'experiment'"):
        ledger.read_all()


def _visible_gpus() -> str:
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")


def test_local_executor_hands_its_tasks_the_profiles_gpus(tmp_path: Path, wait_done) -> None:
    """A one-node GPU profile run with --executor local: the task sees the profile's GPUs (it was
    given none: CUDA_VISIBLE_DEVICES="" in every task), and picks the one of its local rank."""
    from repro.cluster.executor import make_executor

    profile = dataclasses.replace(load_profile("h100"), gpus_per_node=2, tasks_per_node=1, cpus_per_task=1, mem_gb=1)
    job = make_executor(profile, tmp_path / "submitit", "local", "repro-gpus").submit(_visible_gpus)
    wait_done(job, 120)
    assert job.result() == "0,1"


def test_an_array_on_the_local_executor_runs_one_job_after_another(tmp_path: Path, wait_done) -> None:
    """One machine, several jobs: one process runs them in turn (not all at once), and a second sequence
    leaves out the jobs whose results are stored (a job of Table 3 at a scale, here a smoke job marked so)."""
    profile = dataclasses.replace(load_profile("local"), executor="local")
    base = plan_jobs("smoke", Plan(profile, tmp_path / "jobs", overrides={"max_steps": 4}))[0]
    specs = [dataclasses.replace(base, name=f"smoke-{i}", train={**base.train, "seed": i + 1,
                                                                 "out_dir": str(tmp_path / "jobs" / f"smoke-{i}")},
                                 claims=(f"table3-tiny.bleu.x{i}",),
                                 scaled={"scale": "tiny", "signature": "s", "row": f"x{i}", "seed": 1,
                                         "record": "seed-1-s"})
             for i in range(3)]
    results = tmp_path / "results"
    (results / "table3-tiny.bleu.x1").mkdir(parents=True)
    (results / "table3-tiny.bleu.x1" / "seed-1-s.json").write_text("{}")   # job 1 is finished
    submitted = submit_jobs(specs, profile, kind="local", ledger=Ledger(tmp_path / "state"), results_dir=results,
                            job_name="repro-local-array")
    [record] = Ledger(tmp_path / "state").read_all()
    assert len({j["job_id"] for j in record.jobs}) == 1 and [j["lane"] for j in record.jobs] == [0, 0, 0]
    wait_done(submitted.jobs[0], 240)
    summaries = submitted.jobs[0].result()
    assert [s["name"] for s in summaries] == ["smoke-0", "smoke-1", "smoke-2"]
    assert summaries[1] == {"name": "smoke-1", "skipped": "finished"}
    assert summaries[0]["steps"] == summaries[2]["steps"] == 4
    assert sorted(p.parent.name for p in results.glob("run.smoke-*/seed-1-s.json")) == ["run.smoke-0", "run.smoke-2"]
    assert job_states(record)[0]["state"] == "COMPLETED"
