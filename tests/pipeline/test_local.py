"""The main job end to end at toy size: train, average, beam search, score, store, report."""

from __future__ import annotations

import json
from pathlib import Path

from repro.pipeline.local import BLEU_CLAIM, PPL_CLAIM, reproduce_local
from repro.results import ResultStore


def test_main_job_writes_results_with_provenance_and_the_report(tmp_path: Path, tiny_multi30k):
    data = tiny_multi30k(tmp_path / "tiny", {"train": 200, "dev": 10, "test": 10})
    overrides = dict(dataset=str(data), vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, max_steps=4,
                     warmup_steps=2, checkpoint_every_steps=2, average_last=2,
                     model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4})
    reports = tmp_path / "reports" / "local"
    summary = reproduce_local(out_dir=tmp_path / "run", reports_dir=reports, checks=False, overrides=overrides,
                              say=lambda _: None)
    results = {r.claim_id: r for r in ResultStore(reports / "results").read_all()}
    assert set(results) == {BLEU_CLAIM, PPL_CLAIM}
    bleu = results[BLEU_CLAIM]
    assert 0 <= bleu.measured <= 100 and bleu.provenance.bleu_signature.startswith("protocol:sacrebleu")
    assert bleu.provenance.scale.startswith("local:") and bleu.provenance.extra["run_dir"] == str(tmp_path / "run")
    assert results[PPL_CLAIM].measured > 1
    assert json.loads((reports / "local_run.json").read_text())["steps"] == summary["steps"] == 4
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    [row] = [row for row in report["claims"] if row["id"] == BLEU_CLAIM]
    assert row["measured"] == bleu.measured and row["status"] == "deviates"  # a 4-step toy misses 30 BLEU
    assert PPL_CLAIM in report["unmatched_results"]
