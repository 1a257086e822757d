"""The main job end to end at toy size: train, average, beam search, score, store, report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.pipeline.local import BLEU_CLAIM, PPL_CLAIM, STEP_TIME, reproduce_local
from repro.results import Provenance, Result, ResultStore

OVERRIDES = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, max_steps=4, warmup_steps=2,
                 checkpoint_every_steps=2, average_last=2, log_every=1,
                 model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4})


def test_main_job_writes_results_with_provenance_and_the_report(tmp_path: Path, tiny_multi30k, registry_calls):
    data = tiny_multi30k(tmp_path / "tiny", {"train": 200, "dev": 10, "test": 10})
    overrides = dict(OVERRIDES, dataset=str(data))
    reports = tmp_path / "reports" / "local"
    committed = Result("local.ptb-sample.f1", 12.5, Provenance(commit="c0ffee", config_hash="h", hardware="cpu",
                                                               dataset="d", date="2026-01-01", scale="local: x"))
    foreign = ResultStore(reports / "results").write(committed, "reproduce-local-parsing")
    before = foreign.read_text()  # a committed record the job did not produce: it must stay untouched
    summary = reproduce_local(out_dir=tmp_path / "run", reports_dir=reports, checks=False, overrides=overrides,
                              say=lambda _: None)
    assert foreign.read_text() == before
    results = {r.claim_id: r for r in ResultStore(reports / "results").read_all()}
    assert set(results) == {BLEU_CLAIM, PPL_CLAIM, STEP_TIME, "local.ptb-sample.f1"}
    # measured by the registry (repro.measures), the claim as it names it; stored as measured
    assert [(c[0], c[1]) for c in registry_calls] == [(BLEU_CLAIM, "bleu.sacrebleu"), (PPL_CLAIM, "perplexity.wordpiece"),
                                                      (STEP_TIME, "step-time.logged-median")]
    assert all(results[claim].measured == found.value for claim, _, _, found in registry_calls)
    assert sorted(p.name for p in (reports / "results" / BLEU_CLAIM).iterdir()) == ["reproduce-local.json"]
    step = results[STEP_TIME]
    assert step.ci95[0] <= step.measured <= step.ci95[1] and step.extra["spread"]["intervals"] >= 2
    bleu = results[BLEU_CLAIM]
    assert bleu.ci95 is not None and bleu.extra["bootstrap"]["resamples"] == 1000
    assert 0 <= bleu.measured <= 100 and bleu.provenance.bleu_signature.startswith("protocol:sacrebleu")
    assert bleu.provenance.scale.startswith("local:") and bleu.provenance.extra["run_dir"] == str(tmp_path / "run")
    assert results[PPL_CLAIM].measured > 1
    assert json.loads((reports / "local_run.json").read_text())["steps"] == summary["steps"] == 4
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    [row] = [row for row in report["claims"] if row["id"] == BLEU_CLAIM]
    assert row["measured"] == bleu.measured and row["status"] == "deviates"  # a 4-step toy misses 30 BLEU
    assert PPL_CLAIM in report["unmatched_results"]
    # the run keeps its own records (issue 44), and the report sets the run against the paper
    kept = json.loads((tmp_path / "run" / "evaluations" / f"{BLEU_CLAIM}.json").read_text())
    assert kept["measured"] == bleu.measured and kept["provenance"]["config_hash"] == bleu.provenance.config_hash
    assert kept["provenance"]["extra"]["averaged_from"] == ["step_00000002.pt", "step_00000004.pt"]
    assert results[PPL_CLAIM].extra["token_accuracy"] >= 0
    [section] = [rows for title, rows in report["tables"].items() if title.startswith("This run against the paper")]
    verdicts = {r["statement"]: r["verdict"] for r in section}
    assert verdicts["observed.train-steps.base"] == "departs" and verdicts["observed.beam-size"] == "pass"
    assert verdicts["observed.train-steps.big"] == "needs another run"


def test_seeds_store_the_mean_and_each_seed(tmp_path: Path, tiny_multi30k):
    data = tiny_multi30k(tmp_path / "tiny", {"train": 100, "dev": 6, "test": 6})
    overrides = dict(OVERRIDES, dataset=str(data), max_steps=2)
    reports = tmp_path / "out" / "local"
    summary = reproduce_local(out_dir=tmp_path / "run", reports_dir=reports, checks=False, overrides=overrides,
                              say=lambda _: None, seeds=2, write_report=False)
    assert (tmp_path / "run" / "seed-1" / "metrics.csv").exists() and (tmp_path / "run" / "seed-2").is_dir()
    bleu = {r.claim_id: r for r in ResultStore(reports / "results").read_all()}[BLEU_CLAIM]
    per_seed = bleu.extra["over_seeds"]["seeds"]
    assert set(per_seed) == {"1", "2"} and summary["seeds"] == [1, 2]
    assert bleu.measured == pytest.approx(sum(per_seed.values()) / 2, abs=0.01)
    assert bleu.ci95[0] <= bleu.measured <= bleu.ci95[1]


def test_a_run_resumed_over_checkpoints_without_lineage_needs_the_flag_and_says_so(tmp_path: Path, tiny_multi30k):
    """``reproduce --allow-no-lineage`` (left alone at earlier stops: the pipeline resumed such a run only
    with ``--fresh``): refused by name without it; with it the run goes on and its summary says so."""
    import torch

    from repro.errors import CheckpointError
    from repro.train.checkpoint import list_checkpoints, save_checkpoint

    data = tiny_multi30k(tmp_path / "tiny", {"train": 100, "dev": 6, "test": 6})
    overrides = dict(OVERRIDES, dataset=str(data), max_steps=2)
    reports = tmp_path / "out" / "local"
    kwargs = dict(out_dir=tmp_path / "run", reports_dir=reports, checks=False, say=lambda _: None, write_report=False)
    reproduce_local(overrides=overrides, **kwargs)
    for path in list_checkpoints(tmp_path / "run"):   # an older repro's checkpoints: no lineage
        state = torch.load(path, weights_only=True)
        state.pop("lineage")
        save_checkpoint(path, state)
    with pytest.raises(CheckpointError, match="step_00000002.pt.*--allow-no-lineage"):
        reproduce_local(overrides=dict(overrides, max_steps=4), **kwargs)
    summary = reproduce_local(overrides=dict(overrides, max_steps=4), allow_no_lineage=True, **kwargs)
    assert summary["steps"] == 4 and summary["resumed_from"] == 2
    assert "step_00000002.pt" in summary["lineage"] and "--allow-no-lineage" in summary["lineage"]
    bleu = {r.claim_id: r for r in ResultStore(reports / "results").read_all()}[BLEU_CLAIM]
    assert bleu.provenance.extra["lineage"] == summary["lineage"]
