"""``repro selftest``: the acceptance run of a machine, at toy size on the CPU (as CI runs it), its
claims stage on the fake accelerator, and what fails a stage."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

import repro.claims.runner as runner
from repro.cli import main
from repro.model.arithmetic import restore, snapshot
from repro.model.precision import set_tf32
from repro.results import Provenance, Result
from repro.selftest import STAGE_NAMES, stages
from repro.selftest.stage import StageFailed
from tests.fake_accelerator import FakeAccelerator


def _summary(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_quick_run_on_the_cpu_passes_every_stage_it_can(tmp_path: Path, data_dir: Path, capsys) -> None:
    """What CI runs: every stage at toy size; only the cuda tests skip (no GPU), saying so."""
    out = tmp_path / "summary.json"
    code = main(["selftest", "--device", "cpu", "--quick", "--json", str(out), "--out-dir", str(tmp_path / "run"),
                 "--data-dir", str(data_dir)])
    summary = _summary(out)
    statuses = {s["name"]: s["status"] for s in summary["stages"]}
    assert code == 0 and summary["ok"], [(s["name"], s["reason"]) for s in summary["stages"]]
    assert list(statuses) == list(STAGE_NAMES)
    assert statuses.pop("cuda-tests") == "skipped" and set(statuses.values()) == {"ok"}
    by_name = {s["name"]: s for s in summary["stages"]}
    assert "no CUDA device" in by_name["cuda-tests"]["reason"]
    table2 = by_name["table2-reduced"]["figures"]
    assert table2["step_ci95"][0] <= table2["step_s"] <= table2["step_ci95"][1]
    assert table2["checkpoints_averaged"] == 5 and table2["bleu"] is not None
    assert {"startup_s", "compile_s", "evaluation_s", "checkpoint_s"} <= set(table2["step_time"])
    assert by_name["claims"]["figures"]["changed"] == {} and by_name["claims"]["figures"]["claims"] > 5
    assert all(s["seconds"] >= 0 for s in summary["stages"]) and summary["device"] == "cpu"
    readable = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "table2-reduced" in readable and "every stage ok or skipped" in readable
    assert "table2-reduced" in capsys.readouterr().out


def test_the_claims_stage_on_the_fake_gpu_keeps_the_cpus_verdicts(tmp_path: Path, data_dir: Path,
                                                                   monkeypatch) -> None:
    """With TF32 on, as a job leaves a process, the device's verdicts are the CPU's; without the
    arithmetic pin the stage sees the H200's failures and fails the run."""
    before = snapshot()
    args = ["selftest", "--device", "cuda", "--quick", "--stages", "claims", "--data-dir", str(data_dir)]
    try:
        with FakeAccelerator():
            set_tf32(True)
            assert main([*args, "--json", str(tmp_path / "pinned.json"), "--out-dir", str(tmp_path / "a")]) == 0
            monkeypatch.setattr(runner, "ieee_fp32", nullcontext)
            assert main([*args, "--json", str(tmp_path / "unpinned.json"), "--out-dir", str(tmp_path / "b")]) == 1
    finally:
        restore(before)
    pinned, unpinned = _summary(tmp_path / "pinned.json"), _summary(tmp_path / "unpinned.json")
    [stage] = pinned["stages"]
    assert stage["status"] == "ok" and pinned["device"] == "cuda:0"
    [failed] = unpinned["stages"]
    assert failed["status"] == "fail" and "verdict(s) changed on cuda:0" in failed["reason"]
    assert "sec3.eq2.feed-forward" in failed["figures"]["changed"]


def _record(claim: str, value: float, ci95: tuple[float, float] | None) -> Result:
    provenance = Provenance(commit="x", config_hash="h", hardware="cpu", dataset="wmt", date="2026-11-27",
                            scale="reduced: test")
    return Result(claim, value, provenance, ci95=ci95)


def test_a_step_time_outside_its_interval_fails_the_reduced_job() -> None:
    bleu = _record("table2.bleu.base-ende", 1.0, (0.5, 1.5))
    figures, targets = stages.stored_table2([bleu, _record("sec5.step-time.base", 0.15, (0.13, 0.16))], {})
    assert figures["step_s"] == 0.15 and all(t.met for t in targets)
    # what the H200's job stored: the run's mean (0.664 s) beside the logged steps' interval
    with pytest.raises(StageFailed, match="outside its own interval"):
        stages.stored_table2([bleu, _record("sec5.step-time.base", 0.664, (0.1324, 0.1614))], {})
    with pytest.raises(StageFailed, match="no step time"):
        stages.stored_table2([bleu], {})
    with pytest.raises(StageFailed, match="outside its own interval"):
        stages.stored_table2([bleu, _record("sec5.step-time.base", 0.2, None)], {})


def test_a_broken_stage_fails_the_run_and_the_others_still_run(tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    def broken(ctx):
        raise RuntimeError("the device fell over")

    monkeypatch.setattr(stages, "STAGES", tuple(s if s.name != "claims" else type(s)(s.name, s.what, broken)
                                                for s in stages.STAGES))
    monkeypatch.setattr("repro.selftest.STAGES", stages.STAGES)
    out = tmp_path / "s.json"
    assert main(["selftest", "--device", "cpu", "--quick", "--stages", "claims,cuda-tests", "--json", str(out),
                 "--out-dir", str(tmp_path / "run"), "--data-dir", str(data_dir)]) == 1
    summary = _summary(out)
    statuses = {s["name"]: s for s in summary["stages"]}
    assert not summary["ok"] and statuses["claims"]["status"] == "fail" and statuses["cuda-tests"]["status"] == "skipped"
    assert "RuntimeError: the device fell over" in statuses["claims"]["reason"]


@pytest.mark.parametrize("flags, message", [
    (["--stages", "claims,nope"], "unknown: nope"),
    (["--stages", ""], "comma-separated list"),
    (["--device", "tpu"], "device"),
])
def test_bad_flags_are_refused(flags: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["selftest", *flags])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_missing_data_dir_is_named(tmp_path: Path, capsys) -> None:
    assert main(["selftest", "--device", "cpu", "--quick", "--data-dir", str(tmp_path / "none"),
                 "--out-dir", str(tmp_path / "run")]) == 2
    assert f"{tmp_path / 'none'}: the data directory does not exist" in capsys.readouterr().err


def test_the_summary_is_written_after_every_stage_and_the_budget_skips_what_no_longer_fits(
        tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    """A run stopped from outside leaves what it measured: while the second stage runs, the summary on
    disk already holds the first. ``--budget`` skips a stage whose estimate no longer fits, by name."""
    out = tmp_path / "s.json"
    seen_meanwhile: list[dict] = []

    def first(ctx):
        return {"figure": 1.0}, []

    def second(ctx):
        seen_meanwhile.append(_summary(out))
        return {}, []

    replaced = {"table2-reduced": (first, 0.0), "claims": (second, 0.0), "gpu-bench": (first, 10**6)}
    monkeypatch.setattr(stages, "STAGES", tuple(
        type(s)(s.name, s.what, replaced[s.name][0], quick_s=replaced[s.name][1]) if s.name in replaced else s
        for s in stages.STAGES))
    monkeypatch.setattr("repro.selftest.STAGES", stages.STAGES)
    assert main(["selftest", "--device", "cpu", "--quick", "--stages", "gpu-bench,table2-reduced,claims",
                 "--budget", "60", "--json", str(out), "--out-dir", str(tmp_path / "run"),
                 "--data-dir", str(data_dir)]) == 0
    [during] = seen_meanwhile
    assert [s["name"] for s in during["stages"]] == ["gpu-bench", "table2-reduced"] and during["pending"] == ["claims"]
    assert not during["complete"] and out.with_suffix(".md").is_file()
    final = {s["name"]: s for s in _summary(out)["stages"]}
    assert final["gpu-bench"]["status"] == "skipped" and final["gpu-bench"]["reason"].startswith("budget")
    assert final["table2-reduced"]["status"] == final["claims"]["status"] == "ok" and _summary(out)["complete"]


def test_pytest_s_summary_line_is_read_wherever_it_stands() -> None:
    output = ("..........                                                               [100%]\n"
              "=============================== warnings summary ===============================\n"
              "10 passed, 1 skipped, 1 warning in 43.88s\n"
              "/opt/x/activation.py:1336: UserWarning: Support for mismatched key_padding_mask\n")
    assert stages.pytest_summary(output) == "10 passed, 1 skipped, 1 warning in 43.88s"
    assert stages.pytest_summary("==== 2 failed, 3 passed in 1.20s ====\nplugin: bye\n") == "2 failed, 3 passed in 1.20s"
    assert stages.pytest_summary("no summary here\n") == ""
