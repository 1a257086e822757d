"""The experiments as jobs, and `repro submit --dry-run --json` (no SLURM needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.cluster.experiments import EXPERIMENTS, Plan, plan_jobs
from repro.cluster.profiles import load_profile
from repro.model import TABLE3_ROWS
from repro.recipes import get_recipe


def dry_run(*args: str, cwd: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "repro", "submit", *args, "--dry-run", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_table3_dry_run_is_one_array_of_20_jobs(tmp_path: Path) -> None:
    began = time.monotonic()
    plan = dry_run("table3", "--cluster", "paper-p100", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert time.monotonic() - began < 60
    assert plan["array"] is True and plan["experiment"] == "table3"
    jobs = plan["jobs"]
    assert len(jobs) == 20 == len(TABLE3_ROWS)
    assert [j["config"]["preset"] for j in jobs] == list(TABLE3_ROWS)
    assert len({j["name"] for j in jobs}) == 20 and len({j["config"]["out_dir"] for j in jobs}) == 20
    for job in jobs:
        row = job["config"]["preset"]
        assert job["claims"] == [f"table3.ppl.{row}", f"table3.bleu.{row}"]
        assert job["config"]["max_steps"] == (300_000 if row == "big" else 100_000)  # Section 5.2
        assert job["config"]["average_last"] == 1                                   # Table 3: no averaging
        assert job["recipe"] == f"table3-{row}" and job["decode"] == get_recipe("base").decode.to_dict()
        res = job["resources"]
        assert (res["nodes"], res["tasks_per_node"], res["gpus_per_node"]) == (1, 8, 8)
        assert res["update"]["tokens_per_update"] >= 25000 and res["update"]["accumulation"] == 1
        assert res["submitit"]["slurm_gres"] == "gpu:p100:8"
    assert not (tmp_path / "state").exists()  # a dry run submits and records nothing


@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
@pytest.mark.parametrize("profile", ["paper-p100", "h100", "local"])
def test_every_experiment_plans_on_every_profile(tmp_path: Path, experiment: str, profile: str) -> None:
    jobs = plan_jobs(experiment, Plan(load_profile(profile), tmp_path))
    assert jobs and all(j.experiment == experiment for j in jobs)
    for job in jobs:
        assert job.train["out_dir"].startswith(str(tmp_path))
        if experiment != "smoke":
            assert job.train["tokens_per_batch"] == 25000  # Section 5.1
            assert job.train["device"] == ("cpu" if profile == "local" else "cuda")


def test_table2_jobs_follow_the_paper(tmp_path: Path) -> None:
    plan = Plan(load_profile("paper-p100"), tmp_path)
    base, = plan_jobs("table2-base-ende", plan)
    big, = plan_jobs("table2-big-ende", plan)
    enfr, = plan_jobs("table2-big-enfr", plan)
    assert (base.train["max_steps"], base.train["average_last"]) == (100_000, 5)    # Sections 5.2, 6.1
    assert (big.train["max_steps"], big.train["average_last"]) == (300_000, 20)
    assert enfr.preset == "big-enfr" and enfr.train["dataset"] == "wmt14-en-fr"
    assert base.claims == ("table2.bleu.base-ende", "sec5.step-time.base")
    assert (base.decode["beam_size"], base.decode["alpha"], base.decode["max_len_offset"]) == (4, 0.6, 50)  # 6.1


def in_process(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    from repro.cli import main

    code = main(["submit", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table4_jobs_use_the_parser_recipes(tmp_path: Path) -> None:
    plan = Plan(load_profile("paper-p100"), tmp_path)
    wsj, = plan_jobs("table4-wsj", plan)
    semi, = plan_jobs("table4-semi", plan)
    assert (wsj.preset, wsj.claims, wsj.train["vocab_size"]) == ("parser-wsj", ("table4.f1.wsj-only",), 16000)
    assert (semi.preset, semi.claims, semi.train["vocab_size"]) == ("parser-semi", ("table4.f1.semi",), 32000)
    assert wsj.train["dataset"] == "wsj-parsing" and semi.train["dataset"] == "wsj-parsing-semi"
    for job in (wsj, semi):  # Section 6.3's search, which the job's evaluation runs
        assert (job.decode["beam_size"], job.decode["alpha"], job.decode["max_len_offset"]) == (21, 0.3, 300)


def test_parser_jobs_carry_their_target_units_and_refuse_a_folder_with_others(tmp_path: Path) -> None:
    from repro.cluster.experiments import check_parser_data
    from repro.errors import ConfigError

    folder = tmp_path / "data" / "wsj-parsing"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"targets": "per-word"}))
    plan = Plan(load_profile("paper-p100"), tmp_path / "runs", data_dir=str(tmp_path / "data"))
    with pytest.raises(ConfigError, match=r"wsj-parsing/manifest.json: the folder holds 'per-word' target tokens, "
                                          r"job table4-wsj trains on 'symbols'"):
        plan_jobs("table4-wsj", plan)  # the paper's recipe: Vinyals & Kaiser et al.'s symbols
    plan.overrides = {"targets": "per-word"}  # repro submit table4-wsj --set targets=per-word
    wsj, = plan_jobs("table4-wsj", plan)
    assert wsj.targets == "per-word" and wsj.to_dict()["targets"] == "per-word"
    # the job checks again when it starts: the folder may change, or exist only on the cluster
    (folder / "manifest.json").write_text(json.dumps({"targets": "symbols"}))
    with pytest.raises(ConfigError, match="holds 'symbols' target tokens, job table4-wsj trains on 'per-word'"):
        check_parser_data(wsj.to_dict())
    # a folder not reachable at submission is left to the job; translation jobs carry no units
    plan = Plan(load_profile("paper-p100"), tmp_path / "runs", data_dir=str(tmp_path / "elsewhere"),
                overrides={"targets": "per-word"})
    assert plan_jobs("table4-wsj", plan)[0].targets == "per-word"
    base, = plan_jobs("table2-base-ende", Plan(load_profile("paper-p100"), tmp_path / "runs"))
    assert base.targets is None and "targets" not in base.to_dict()


def test_local_cpu_accumulates_to_25000_tokens(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = in_process(capsys, "table2-base-ende", "--cluster", "local", "--state-dir", str(tmp_path),
                              "--dry-run", "--json")
    assert code == 0
    plan = json.loads(out)
    update = plan["jobs"][0]["resources"]["update"]
    assert update["world_size"] == 1 and update["accumulation"] == 7 and update["tokens_per_update"] >= 25000


def test_overrides_and_bad_overrides(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = in_process(capsys, "smoke", "--cluster", "local", "--set", "max_steps=3", "--state-dir",
                              str(tmp_path), "--dry-run", "--json")
    assert code == 0 and json.loads(out)["jobs"][0]["config"]["max_steps"] == 3
    code, _, err = in_process(capsys, "smoke", "--cluster", "local", "--set", "max_stepz=3", "--dry-run")
    assert code == 2 and "job smoke" in err and "max_stepz" in err
    code, _, err = in_process(capsys, "smoke", "--cluster", "local", "--set", "max_steps=three", "--dry-run")
    assert code == 2 and "max_steps" in err and "JSON" in err  # not taken as the string "three"


def test_every_job_serves_claims_that_exist(tmp_path: Path, repo_root: Path) -> None:
    import tomllib

    known = {c["id"] for f in (repo_root / "claims").glob("*.toml")
             for c in tomllib.loads(f.read_text(encoding="utf-8")).get("claim", [])}
    plan = Plan(load_profile("paper-p100"), tmp_path)
    served = {c for e in EXPERIMENTS for job in plan_jobs(e, plan) for c in job.claims}
    assert len(served) == 4 + 40 + 2 + 2  # Table 2 BLEU, Table 3 PPL+BLEU, Table 4 F1, step times and served <= known, sorted(served - known)


def test_table3_at_a_scale_is_one_array_of_20_rows_by_3_seeds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ("table3", "--scale", "small", "--cluster", "local", "--state-dir", str(tmp_path / "state"),
            "--results-dir", str(tmp_path / "results"), "--dry-run", "--json")
    code, out, _ = in_process(capsys, *args)
    assert code == 0
    plan = json.loads(out)
    assert plan["array"] is True and plan["scale"] == "small" and plan["seeds"] == 3 and plan["finished"] == []
    jobs = plan["jobs"]
    assert len(jobs) == 60 and len({j["name"] for j in jobs}) == 60
    assert [j["scaled"]["row"] for j in jobs[::3]] == list(TABLE3_ROWS)
    for i, job in enumerate(jobs):
        row, seed = TABLE3_ROWS[i // 3], i % 3 + 1
        small = get_recipe(f"table3-small-{row}")
        assert job["scaled"] == {"scale": "small", "signature": plan["signature"], "row": row, "seed": seed,
                                 "record": f"seed-{seed}-{plan['signature']}"}
        assert job["claims"] == [f"table3-small.ppl.{row}", f"table3-small.bleu.{row}"]
        assert job["recipe"] == small.name and job["config"]["seed"] == seed
        assert job["config"]["model_overrides"] == small.train.model_overrides
        assert job["config"]["max_steps"] == (900 if row == "big" else 300) and job["config"]["device"] == "cpu"
        # the scale's folders, not the submission's: a later submission resumes the same jobs
        assert job["config"]["out_dir"] == str(tmp_path / "state" / "jobs" / f"table3-small-{plan['signature']}"
                                               / job["name"])
    code, again, _ = in_process(capsys, *args)
    assert [j["config"]["out_dir"] for j in json.loads(again)["jobs"]] == [j["config"]["out_dir"] for j in jobs]
    assert not (tmp_path / "state").exists()


def test_a_finished_job_of_a_scale_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tests.scaled.conftest import write_row

    args = ("table3", "--scale", "small", "--rows", "base,A-h1", "--seeds", "2", "--cluster", "local",
            "--results-dir", str(tmp_path / "results"), "--state-dir", str(tmp_path / "state"), "--dry-run", "--json")
    code, out, _ = in_process(capsys, *args)
    signature = json.loads(out)["signature"]
    assert code == 0 and [j["name"] for j in json.loads(out)["jobs"]] == [
        "table3-small-base-seed1", "table3-small-base-seed2", "table3-small-A-h1-seed1", "table3-small-A-h1-seed2"]
    write_row(tmp_path / "results", "A-h1", "bleu", [20.0], signature=signature)
    code, out, _ = in_process(capsys, *args)
    assert len(json.loads(out)["jobs"]) == 4          # one of its two records is not finished
    write_row(tmp_path / "results", "A-h1", "ppl", [9.0], signature=signature)
    write_row(tmp_path / "results", "base", "ppl", [9.0], signature="another")   # another experiment's record
    code, out, _ = in_process(capsys, *args)
    plan = json.loads(out)
    assert plan["finished"] == ["table3-small-A-h1-seed1"] and len(plan["jobs"]) == 3


def test_a_scales_signature_follows_what_is_trained_not_where(tmp_path: Path) -> None:
    from repro.cluster.experiments import scale_signature
    from repro.recipes import get_scale

    small = get_scale("small")
    assert scale_signature(small) == scale_signature(small, {"device": "cuda", "precision": "bf16"})
    assert scale_signature(small) != scale_signature(small, {"max_steps": 10})
    assert scale_signature(small) != scale_signature(get_scale("medium"))


def test_scale_flags_are_refused_where_they_mean_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, _, err = in_process(capsys, "smoke", "--scale", "small", "--cluster", "local", "--dry-run")
    assert code == 2 and "--scale applies to experiment table3 only" in err
    code, _, err = in_process(capsys, "table3", "--seeds", "3", "--cluster", "local", "--dry-run")
    assert code == 2 and "--seeds and --rows apply to a scaled Table 3 only" in err
    code, _, err = in_process(capsys, "table3", "--scale", "small", "--rows", "base,A-h2", "--cluster", "local",
                              "--dry-run")
    assert code == 2 and "unknown Table 3 row(s) A-h2" in err
    with pytest.raises(SystemExit) as exit_:
        in_process(capsys, "table3", "--scale", "huge", "--cluster", "local", "--dry-run")
    assert exit_.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err
