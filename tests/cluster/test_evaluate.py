"""A job's claims are measured on the trained model after training (repro.cluster.job_evaluation)."""

from __future__ import annotations


import pytest

from repro.cluster.job_evaluation import evaluate_claims, run_scale
from repro.decode.settings import TRANSLATION
from repro.results import ResultStore
from repro.train.config import TrainConfig
from repro.train.loop import train


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny_multi30k) -> tuple[dict, dict]:
    """Six steps of a tiny model on 200 Multi30k pairs, with 12-pair dev and test splits."""
    root = tmp_path_factory.mktemp("eval")
    data = tiny_multi30k(root / "tiny-multi30k", {"train": 200, "dev": 12, "test": 12})
    cfg = TrainConfig(preset="base", dataset=str(data), vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400,
                      max_steps=6, warmup_steps=2, max_len=60, checkpoint_every_steps=2, keep_checkpoints=3,
                      average_last=2, out_dir=str(root / "run"), device="cpu", log_every=2,
                      model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4})
    summary = train(cfg).to_dict()
    spec = {"name": "t", "experiment": "table2-base-ende", "preset": "base", "profile": "local",
            "claims": ["table2.bleu.base-ende", "sec5.step-time.base", "table3.ppl.base"],
            "train": cfg.to_dict(), "decode": TRANSLATION.to_dict(), "overrides": {"max_steps": 6}}
    return spec, summary


def test_every_metric_claim_gets_a_result_marked_reduced(tiny_run, tmp_path):
    spec, summary = tiny_run
    paths = evaluate_claims(spec, summary, 1, tmp_path)
    results = {r.claim_id: r for r in ResultStore(tmp_path).read_all()}
    assert len(paths) == 3 and set(results) == set(spec["claims"])
    bleu = results["table2.bleu.base-ende"]
    assert 0 <= bleu.measured <= 100 and bleu.provenance.bleu_signature.startswith("protocol:paper|")
    assert "sacrebleu" in bleu.provenance.extra
    assert bleu.provenance.extra["checkpoints_averaged"] == 2
    assert results["table3.ppl.base"].measured > 1
    assert results["sec5.step-time.base"].measured > 0 and results["sec5.step-time.base"].provenance.extra["peak_flops"] > 0
    # --set overrides: never at the paper's scale, whatever the job was called.
    assert all(r.provenance.scale.startswith("reduced:") for r in results.values())


def test_scale_is_cluster_only_for_the_unchanged_recipe_run_to_its_end():
    spec = {"train": {"max_steps": 100, "tokens_per_batch": 25000}, "preset": "base", "profile": "paper-p100"}
    assert run_scale({**spec, "overrides": {}}, {"steps": 100}, 8).startswith("cluster:")
    assert run_scale({**spec, "overrides": {}}, {"steps": 40}, 8).startswith("reduced:")
    assert run_scale({**spec, "overrides": {"max_steps": 100}}, {"steps": 100}, 8).startswith("reduced:")
