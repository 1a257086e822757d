"""Jobs on a real SLURM (the one-node cluster of slurm/local/setup.sh), each with a time bound.

These run in one xdist group (``--dist loadgroup``): the node has 2 CPUs and they queue behind
each other otherwise. Without a reachable SLURM they skip (fail under REPRO_REQUIRE_SLURM=1).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import submitit
import torch

from repro.cli import main as repro_main
from repro.cluster.executor import make_executor, submit_jobs
from repro.cluster.experiments import SMOKE_SYNTHETIC, JobSpec, Plan, plan_jobs
from repro.cluster.job import gradient_probe
from repro.cluster.profiles import ClusterProfile, ClusterProfileError
from repro.cluster.ledger import Ledger, job_states
from repro.data.synthetic import SyntheticCorpus
from repro.model import TABLE3_ROWS
from repro.recipes import get_recipe
from repro.results import ResultStore
from repro.train.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint
from repro.train.config import TrainConfig
from repro.train.loop import first_update_gradients, train

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]


def smoke_specs(tmp_path: Path, profile: ClusterProfile, n: int = 1, **overrides) -> list[JobSpec]:
    base = plan_jobs("smoke", Plan(profile, tmp_path / "jobs", overrides=overrides))[0]
    if n == 1:
        return [base]
    return [dataclasses.replace(base, name=f"smoke-{i}",
                                train={**base.train, "seed": i + 1, "out_dir": str(tmp_path / "jobs" / f"smoke-{i}")})
            for i in range(n)]


def submit(tmp_path: Path, profile: ClusterProfile, specs: list[JobSpec], job_name: str, **kw):
    return submit_jobs(specs, profile, kind="slurm", ledger=Ledger(tmp_path / "state"),
                       results_dir=tmp_path / "results", job_name=job_name, **kw)


def status_json(state_dir: Path, capsys: pytest.CaptureFixture) -> list[dict]:
    capsys.readouterr()
    assert repro_main(["status", "--state-dir", str(state_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tiny_training_job_end_to_end(tmp_path: Path, slurm: str, job_name: str, wait_for,
                                      capsys: pytest.CaptureFixture) -> None:
    """`repro submit smoke` -> SLURM runs it -> `repro status` says COMPLETED -> a result record."""
    began = time.monotonic()
    state, results = tmp_path / "state", tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "submit", "smoke", "--cluster", "local", "--executor", "slurm",
         "--state-dir", str(state), "--results-dir", str(results), "--job-name", job_name,
         "--set", "max_steps=20", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["executor"] == "slurm" and len(record["jobs"]) == 1
    ledger_record = Ledger(state).read_all()[0]
    wait_for(lambda: job_states(ledger_record)[0]["state"] not in ("PENDING", "RUNNING", "UNKNOWN"), 120,
             "the smoke job to finish")
    [sub] = status_json(state, capsys)
    assert sub["jobs"][0]["state"] == "COMPLETED"
    [result] = ResultStore(results).read_all()
    assert result.claim_id == "run.smoke" and result.extra["steps"] == 20
    assert result.measured < 0.8 * result.extra["first_loss"]  # it trained
    assert result.provenance.extra["job_id"] == record["jobs"][0]["job_id"]
    assert time.monotonic() - began < 150


def test_array_of_three_jobs(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str, wait_done,
                             wait_for, capsys: pytest.CaptureFixture) -> None:
    specs = smoke_specs(tmp_path, slurm_profile, n=3, max_steps=8)
    submitted = submit(tmp_path, slurm_profile, specs, job_name)
    ids = [j.job_id for j in submitted.jobs]
    base = ids[0].split("_")[0]
    assert ids == [f"{base}_{i}" for i in range(3)]  # one SLURM array
    for job in submitted.jobs:
        wait_done(job, 120)
        assert job.result()["steps"] == 8
    # The result file comes just before SLURM marks the task COMPLETED.
    wait_for(lambda: all(j["state"] == "COMPLETED" for j in job_states(submitted.record)), 30, "COMPLETED x3")
    [sub] = status_json(tmp_path / "state", capsys)
    assert [j["state"] for j in sub["jobs"]] == ["COMPLETED"] * 3
    records = ResultStore(tmp_path / "results").read_all()
    assert sorted(r.claim_id for r in records) == ["run.smoke-0", "run.smoke-1", "run.smoke-2"]


def preempt(job: submitit.Job, wait_for) -> None:
    """What SLURM does on preemption, as submitit's ``job._interrupt()`` sends it: SIGTERM, then USR2.
    The USR2 goes only once the job has logged the SIGTERM: sent back to back, slurmd could deliver
    the TERM late, under load, to the ``scontrol requeue`` that the USR2 handler had started (seen in CI:
    "Command '['scontrol', 'requeue', '5']' died with <Signals.SIGTERM: 15>")."""
    subprocess.check_call(["scancel", job.job_id, "--signal", "SIGTERM"])
    wait_for(lambda: "Bypassing signal SIGTERM" in (job.stderr() or ""), 60, "the job to log the SIGTERM")
    subprocess.check_call(["scancel", job.job_id, "--signal", "USR2"])


def test_preempted_job_resumes_from_its_checkpoint(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str,
                                                   wait_done, wait_for) -> None:
    """USR2 (preemption) -> checkpoint, requeue, resume -> the uninterrupted run's exact parameters."""
    steps = 40   # after the step-8 checkpoint, 32 steps of 0.3 s: the job is still running when the USR2 comes
    synthetic = {**SMOKE_SYNTHETIC, "step_sleep_s": 0.3}
    # fp32 asked for: `auto` is probed in each process, and on a CPU with native bf16 the job would
    # pick bf16 while the in-process reference (tests/conftest.py) runs fp32
    [spec] = smoke_specs(tmp_path, slurm_profile, max_steps=steps, checkpoint_every_steps=4, synthetic=synthetic,
                         precision="fp32")
    # timeout_min > 10: submitit counts every USR2 as a timeout for shorter limits.
    [job] = submit(tmp_path, slurm_profile, [spec], job_name, timeout_min=30).jobs
    out = Path(spec.train["out_dir"])
    wait_for(lambda: checkpoint_path(out, 8).exists(), 90, "the job's step-8 checkpoint")
    preempt(job, wait_for)
    wait_done(job, 150)
    summary = job.result()
    assert summary["requeues"] == 1
    assert 8 <= summary["resumed_from"] < steps
    assert "requeue 1 of at most" in job.stderr()

    torch.set_num_threads(1)
    reference = train(TrainConfig.from_dict({**spec.train, "out_dir": str(tmp_path / "straight")}),
                      synthetic=SyntheticCorpus())
    assert reference.resumed_from == 0
    got = load_checkpoint(checkpoint_path(out, steps))["model"]
    want = load_checkpoint(checkpoint_path(tmp_path / "straight", steps))["model"]
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_requeues_are_bounded(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str, wait_done,
                              wait_for) -> None:
    profile = dataclasses.replace(slurm_profile, max_requeues=0)
    synthetic = {**SMOKE_SYNTHETIC, "step_sleep_s": 0.3}
    [spec] = smoke_specs(tmp_path, profile, max_steps=200, checkpoint_every_steps=2, synthetic=synthetic)
    [job] = submit(tmp_path, profile, [spec], job_name, timeout_min=30).jobs
    wait_for(lambda: checkpoint_path(Path(spec.train["out_dir"]), 2).exists(), 90, "the first checkpoint")
    preempt(job, wait_for)
    wait_done(job, 60)
    with pytest.raises(submitit.core.utils.UncompletedJobError, match="checkpoint function returned None"):
        job.result()
    assert "requeue limit 0 reached" in job.stderr()


def test_cancelled_job_is_reported_cancelled(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str,
                                             wait_done, wait_for, capsys: pytest.CaptureFixture) -> None:
    synthetic = {**SMOKE_SYNTHETIC, "step_sleep_s": 1.0}
    [spec] = smoke_specs(tmp_path, slurm_profile, max_steps=1000, synthetic=synthetic)
    submitted = submit(tmp_path, slurm_profile, [spec], job_name)
    [job] = submitted.jobs
    wait_for(lambda: job_states(submitted.record)[0]["state"] == "RUNNING", 60, "the job to start")
    job.cancel()
    began = time.monotonic()
    wait_done(job, 60)  # needs accounting: without sacct, submitit never sees a cancelled job end
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    assert time.monotonic() - began < 60
    [sub] = status_json(tmp_path / "state", capsys)
    assert sub["jobs"][0]["state"] == "CANCELLED"


def test_two_task_gloo_job_matches_one_process(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str,
                                               wait_done) -> None:
    """Two SLURM tasks (submitit tasks_per_node=2, TorchDistributedEnvironment, gloo) = one process."""
    cfg = get_recipe("smoke").replace(seed=5, label_smoothing=0.1, precision="fp32").train  # not `auto`: see above
    profile = dataclasses.replace(slurm_profile, tasks_per_node=2)
    executor = make_executor(profile, tmp_path / "submitit", "slurm", job_name)
    job = executor.submit(gradient_probe, cfg.to_dict(), SMOKE_SYNTHETIC)
    torch.set_num_threads(1)
    single = first_update_gradients(cfg, SyntheticCorpus().examples(cfg.vocab_size, cfg.seed), cfg.vocab_size)
    wait_done(job, 120)
    results = job.results()  # one per task
    assert sorted(r["rank"] for r in results) == [0, 1]
    for got in results:
        assert (got["world_size"], got["accumulation"]) == (2, 2)
        assert got["grads"].keys() == single["grads"].keys()
        for name, grad in single["grads"].items():
            assert torch.allclose(got["grads"][name], grad, rtol=1e-5, atol=1e-7), name




@pytest.mark.parametrize("tasks", [1, 2])
def test_real_training_job(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str, data_dir: Path,
                           wait_done, tasks: int) -> None:
    """repro.train on real text (300 Multi30k pairs): 1 task x 4 passes, or 2 gloo tasks x 2 passes."""
    subset = {}
    for lang in ("en", "de"):
        lines = (data_dir / "multi30k" / f"train.{lang}").read_text(encoding="utf-8").splitlines()[:300]
        subset[lang] = tmp_path / f"train.{lang}"
        subset[lang].write_text("\n".join(lines) + "\n", encoding="utf-8")
    profile = dataclasses.replace(slurm_profile, tasks_per_node=tasks)
    [spec] = smoke_specs(tmp_path, profile, dataset="multi30k-en-de", data_dir=str(data_dir),
                         train_src=str(subset["en"]), train_tgt=str(subset["de"]), vocab_size=300,
                         tokens_per_batch=512, max_tokens_per_device=128, max_len=60, max_steps=3)
    [job] = submit(tmp_path, profile, [spec], job_name).jobs
    wait_done(job, 150)
    summaries = job.results()
    assert sorted(s["rank"] for s in summaries) == list(range(tasks))
    for summary in summaries:
        assert (summary["steps"], summary["world_size"], summary["accumulation"]) == (3, tasks, 4 // tasks)
    # the data is prepared once per job: rank 0 encodes, the other ranks map what it wrote
    assert sorted(s["data"] for s in summaries) == (["encoded"] if tasks == 1 else ["encoded", "mapped"])
    [result] = ResultStore(tmp_path / "results").read_all()
    assert result.provenance.dataset == "multi30k-en-de" and result.extra["update_plan"]["tokens_per_update"] == 512
    if tasks == 2:   # resubmitted (as a requeued job is), it reuses the encoded corpus and resumes
        longer = dataclasses.replace(spec, train={**spec.train, "max_steps": 4})
        [again] = submit(tmp_path, profile, [longer], job_name).jobs
        wait_done(again, 150)
        resumed = again.results()
        assert sorted(s["data"] for s in resumed) == ["mapped", "reused"]
        assert all((s["resumed_from"], s["steps"], s["steps_run"]) == (3, 4, 1) for s in resumed)


def test_one_ranks_divergence_stops_every_rank(tmp_path: Path, slurm_profile: ClusterProfile, job_name: str,
                                               wait_done) -> None:
    """Rank 1's loss becomes NaN at update 3: both tasks stop at update 3, naming it, at once (not after
    the 10-minute collective timeout), with no checkpoint written for it."""
    profile = dataclasses.replace(slurm_profile, tasks_per_node=2)
    [spec] = smoke_specs(tmp_path, profile, max_steps=6, checkpoint_every_steps=1,
                         synthetic={**SMOKE_SYNTHETIC, "nan_at": {"rank": 1, "step": 3}})
    began = time.monotonic()
    [job] = submit(tmp_path, profile, [spec], job_name).jobs
    wait_done(job, 150)
    assert time.monotonic() - began < 150
    with pytest.raises(submitit.core.utils.FailedJobError, match=r"step 3: the loss is nan"):
        job.results()
    logs = "".join(job.task(r).stderr() or "" for r in (0, 1))   # every rank raised, naming the step
    assert logs.count("TrainingDiverged: step 3: the loss is nan") == 2, logs[-3000:]
    assert [p.name for p in list_checkpoints(spec.train["out_dir"])] == ["step_00000001.pt", "step_00000002.pt"]


def test_impossible_request_fails_at_submission(tmp_path: Path, slurm_profile: ClusterProfile,
                                                job_name: str) -> None:
    """EnforcePartLimits=ALL: sbatch refuses at once, and the error names the profile."""
    profile = dataclasses.replace(slurm_profile, cpus_per_task=512)
    with pytest.raises(ClusterProfileError, match=r"local\.toml: slurm refused the job"):
        submit(tmp_path, profile, smoke_specs(tmp_path, profile), job_name)
    assert not Ledger(tmp_path / "state").read_all()


#: Table 3 at scale small shrunk to a few updates on 100 Multi30k pairs, 4 dev pairs, short outputs: every
#: row keeps its own change (the model sizes are the scale's), only data, batch, steps and search shrink.
TOY_SCALE = ["vocab_size=300", "tokens_per_batch=256", "max_tokens_per_device=256", "max_steps=2", "warmup_steps=1",
             "checkpoint_every_steps=2", "max_len=60", "max_len_offset=3"]


def test_table3_at_a_scale_runs_as_one_array_and_resumes(tmp_path: Path, slurm: str, job_name: str, wait_for,
                                                         tiny_multi30k, capsys: pytest.CaptureFixture) -> None:
    """`repro submit table3 --scale small`: all 20 rows x 3 seeds as one SLURM array at toy size; every row
    measured with its seeds, a verdict on every conclusion; submitted again, nothing runs; with one record
    gone, only its job runs again."""
    data = tiny_multi30k(tmp_path / "tiny", {"train": 100, "dev": 4, "test": 4})
    state, results = tmp_path / "state", tmp_path / "results"
    submit_cmd = [sys.executable, "-m", "repro", "submit", "table3", "--scale", "small", "--cluster", "local",
                  "--executor", "slurm", "--state-dir", str(state), "--results-dir", str(results), "--job-name",
                  job_name, "--precision", "fp32", "--set", f"dataset={data}",
                  *(x for s in TOY_SCALE for x in ("--set", s)), "--json"]
    proc = subprocess.run(submit_cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    ids = [j["job_id"] for j in record["jobs"]]
    base = ids[0].split("_")[0]
    assert len(ids) == 60 and ids == [f"{base}_{i}" for i in range(60)]   # one SLURM array
    [ledger] = Ledger(state).read_all()
    wait_for(lambda: all(j["state"] not in ("PENDING", "RUNNING", "UNKNOWN", "REQUEUED")
                         for j in job_states(ledger)), 2400, "the 60 jobs of the array to finish")
    assert {j["state"] for j in job_states(ledger)} == {"COMPLETED"}

    capsys.readouterr()
    assert repro_main(["table3", "--scale", "small", "--results", str(results), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert set(table["measured"]["rows"]) == set(TABLE3_ROWS)
    for row in table["measured"]["rows"].values():
        assert {len(row["bleu"]["seeds"]), len(row["ppl"]["seeds"])} == {3} and row["parameters"] > 0
    assert len(table["verdicts"]) == 8 and all(v["verdict"] in ("holds", "reversed", "inconclusive")
                                               for v in table["verdicts"])

    again = subprocess.run(submit_cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"experiment": "table3", "submitted": 0, "finished": [j["name"] for j in
                                                                                             record["jobs"]]}
    signature = json.loads(subprocess.run([*submit_cmd, "--dry-run"], capture_output=True, text=True,
                                          timeout=300).stdout)["signature"]
    (results / "table3-small.bleu.C-N2" / f"seed-2-{signature}.json").unlink()
    third = subprocess.run(submit_cmd, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr
    [rerun] = json.loads(third.stdout)["jobs"]
    assert rerun["name"] == "table3-small-C-N2-seed2"
    later = Ledger(state).read_all()[-1]
    wait_for(lambda: job_states(later)[0]["state"] not in ("PENDING", "RUNNING", "UNKNOWN"), 300, "the rerun")
    assert job_states(later)[0]["state"] == "COMPLETED"
    assert (results / "table3-small.bleu.C-N2" / f"seed-2-{signature}.json").is_file()
