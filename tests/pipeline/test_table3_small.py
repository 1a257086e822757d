"""``repro reproduce --pipeline table3-small`` end to end at toy size: rows of the CPU subset x 2 seeds trained
and evaluated by the cluster jobs' own code, the verdicts, the report, and a second run that trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main as repro_main
from repro.cluster.experiments import Plan, plan_jobs
from repro.cluster.profiles import load_profile
from repro.pipeline.table3_small import SUBSET, SUBSET_SEEDS
from repro.results import ResultStore
from repro.scaled.verdicts import HOLDS, INCONCLUSIVE, NOT_RUN, REVERSED

#: A few updates of the small scale's models on 200 Multi30k pairs, a 6-pair dev split, short outputs.
TOY = ["vocab_size=300", "tokens_per_batch=400", "max_tokens_per_device=400", "max_steps=3", "warmup_steps=2",
       "checkpoint_every_steps=3", "max_len=60", "max_len_offset=5"]


#: Rows of the subset that decide two conclusions (too many heads; dropout), 2 seeds each: 8 jobs.
ROWS = ("base", "A-h16", "A-h32", "D-drop0.0")


def test_the_cpu_subset_is_base_rows_a_and_d_with_2_seeds(tmp_path: Path):
    assert SUBSET == ("base", "A-h1", "A-h4", "A-h16", "A-h32", "D-drop0.0", "D-drop0.2", "D-ls0.0", "D-ls0.2")
    assert SUBSET_SEEDS == 2
    jobs = plan_jobs("table3", Plan(load_profile("local"), tmp_path, scale="small", seeds=SUBSET_SEEDS, rows=SUBSET))
    assert len(jobs) == 18 and {j.scaled["seed"] for j in jobs} == {1, 2}


@pytest.mark.slow
def test_the_cpu_subset_end_to_end_and_resumed(tmp_path: Path, tiny_multi30k, capsys: pytest.CaptureFixture):
    data = tiny_multi30k(tmp_path / "tiny", {"train": 200, "dev": 6, "test": 6})
    args = ["reproduce", "--pipeline", "table3-small", "--rows", ",".join(ROWS), "--reports", str(tmp_path / "reports"),
            "--out-dir", str(tmp_path / "runs"), "--set", f"dataset={data}", *(x for s in TOY for x in ("--set", s))]
    assert repro_main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["jobs_run"] == 8 and printed["jobs_left_out"] == 0
    assert set(printed["seconds_per_row"]) == set(ROWS)
    verdicts = printed["verdicts"]
    for decided in ("sec6.2.too-many-heads", "sec6.2.dropout-helps"):
        assert verdicts[decided] in (HOLDS, REVERSED, INCONCLUSIVE)
    for undecided in ("sec6.2.single-head-gap", "sec6.2.smaller-dk-hurts", "sec6.2.learned-positions"):
        assert verdicts[undecided] == NOT_RUN   # rows they need were not run

    results = tmp_path / "reports" / "local" / "results"
    records = [r for r in ResultStore(results).read_all() if r.claim_id.startswith("table3-small.")]
    assert len(records) == len(ROWS) * 2 * 2
    for r in records:       # a named scale, never the paper's; every record with its bootstrap interval
        assert r.provenance.scale.startswith("small: Table 3 row ") and "not the paper's scale" in r.provenance.scale
        assert r.ci95 is not None and r.extra["parameters"] > 0 and r.extra["seed"] in (1, 2)
    summary = json.loads((tmp_path / "reports" / "local" / "table3_small_run.json").read_text())
    assert len(summary["jobs"]) == 8 and all(j["seconds"] > 0 for j in summary["jobs"])
    assert summary["table"]["A-h32"]["bleu"]["seeds"].keys() == {"1", "2"}

    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    rows = report["tables"]["Table 3 at other scales: the rows"]
    assert [r["row"] for r in rows] == list(ROWS)
    assert rows[2]["change (small)"] == "h=32, d_k=4, d_v=4" and rows[2]["BLEU dev (paper)"] == "25.4"
    conclusions = {r["conclusion"]: r for r in report["tables"]["Table 3 at other scales: Section 6.2's conclusions"]}
    assert conclusions["sec6.2.dropout-helps"]["verdict (small)"] == verdicts["sec6.2.dropout-helps"]
    assert "paper +1.20" in conclusions["sec6.2.dropout-helps"]["parts (small)"]
    assert any(f["name"] == "table3-small-differences" for f in report["figures"])
    assert (tmp_path / "reports" / "figures" / "table3-small-differences.png").stat().st_size > 0

    before = {p: p.stat().st_mtime_ns for p in results.glob("table3-small.*/*.json")}
    assert repro_main(args) == 0      # every job has its results: nothing is trained again
    again = json.loads(capsys.readouterr().out)
    assert again["jobs_run"] == 0 and again["jobs_left_out"] == 8 and again["verdicts"] == verdicts
    assert {p: p.stat().st_mtime_ns for p in results.glob("table3-small.*/*.json")} == before
    assert json.loads((tmp_path / "reports" / "local" / "table3_small_run.json").read_text())["jobs"] == summary["jobs"]

    # --fresh: what these runs wrote in OUT_DIR is deleted (as its manifest lists), the rows asked for train again
    kept = tmp_path / "runs" / "mine.txt"
    kept.write_text("the user's own file")
    record = next(results.glob("table3-small.bleu.base/seed-1-*.json"))
    assert repro_main([*args[:3], "--rows", "base", "--seeds", "1", *args[5:], "--fresh"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert fresh["jobs_run"] == 1 and record.stat().st_mtime_ns != before[record]
    assert kept.read_text() == "the user's own file"
    assert not list((tmp_path / "runs").glob("*/table3-small-A-h16-seed1/checkpoints/*.pt"))
