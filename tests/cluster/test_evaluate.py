"""A job's claims are measured on the trained model after training (repro.cluster.job_evaluation)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.cluster.job_evaluation import evaluate_claims, run_scale
from repro.decode.settings import TRANSLATION
from repro.errors import ConfigError
from repro.measures import MEASUREMENTS
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


def test_every_metric_claim_gets_a_result_marked_reduced(tiny_run, tmp_path, registry_calls):
    spec, summary = tiny_run
    paths = evaluate_claims(spec, summary, 1, tmp_path)
    results = {r.claim_id: r for r in ResultStore(tmp_path).read_all()}
    assert len(paths) == 3 and set(results) == set(spec["claims"])
    # measured by the registry, as each claim names it; what it measured is what is stored
    assert [(c[0], c[1]) for c in registry_calls] == [
        ("table2.bleu.base-ende", "bleu.tokenized-compound-split"), ("sec5.step-time.base", "step-time.steady-state"),
        ("table3.ppl.base", "perplexity.wordpiece")]
    assert all(results[claim].measured == found.value for claim, _, _, found in registry_calls)
    assert results["table3.ppl.base"].provenance.extra["measure"] == "perplexity.wordpiece"
    assert results["table3.ppl.base"].provenance.extra["split"] == "dev"
    bleu = results["table2.bleu.base-ende"]
    assert 0 <= bleu.measured <= 100 and bleu.provenance.bleu_signature.startswith("protocol:paper|")
    assert "sacrebleu" in bleu.provenance.extra
    assert bleu.provenance.extra["checkpoints_averaged"] == 2
    assert results["table3.ppl.base"].measured > 1
    step = results["sec5.step-time.base"]
    assert step.measured > 0 and step.provenance.extra["peak_flops"] > 0
    # the steady-state step: inside its own interval, what was left out stored beside it by name
    assert step.ci95[0] <= step.measured <= step.ci95[1]
    assert {"startup_s", "warmup_s", "compile_s", "evaluation_s", "checkpoint_s"} <= set(step.extra["step_time"])
    assert step.extra["step_time"]["steady_updates"] == 5 and step.measured < summary["elapsed_s"] / 6
    # --set overrides: never at the paper's scale, whatever the job was called.
    assert all(r.provenance.scale.startswith("reduced:") for r in results.values())


def test_a_measurement_of_nan_is_stored_as_a_failure(tiny_run, tmp_path, monkeypatch):
    """A diverged model's NaN perplexity: stored, marked failed, and its claim fails (never passes)."""
    spec, summary = tiny_run
    original = MEASUREMENTS["perplexity.wordpiece"]
    monkeypatch.setitem(MEASUREMENTS, "perplexity.wordpiece",
                        lambda trained, request: dataclasses.replace(original(trained, request), value=math.nan))
    evaluate_claims({**spec, "claims": ["table3.ppl.base"]}, summary, 1, tmp_path)
    [stored] = ResultStore(tmp_path).read_all()
    assert stored.claim_id == "table3.ppl.base" and stored.status == "fail" and math.isnan(stored.measured)
    claim = next(c for c in select_claims() if c.id == "table3.ppl.base")
    assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {claim.id: stored}).status == Outcome.FAIL


def test_the_spec_says_what_to_measure_not_the_claim_id(tiny_run, tmp_path):
    """A job measures what its spec's ``measures`` name (as planned from the claims): a claim id whose
    prefix says BLEU, planned as a perplexity, is measured as a perplexity."""
    spec, summary = tiny_run
    planned = {**spec, "claims": ["table2.bleu.base-ende"],
               "measures": [{"result_id": "table2.bleu.base-ende", "measure": "perplexity.wordpiece", "split": "dev"}]}
    evaluate_claims(planned, summary, 1, tmp_path)
    [stored] = ResultStore(tmp_path).read_all()
    assert stored.unit == "PPL per wordpiece (dev)" and stored.measured > 1 and stored.provenance.bleu_signature is None
    with pytest.raises(ConfigError, match=r"job t: field 'measures\[0\]': .*unknown measurement 'bleu'"):
        evaluate_claims({**planned, "measures": [{"result_id": "table2.bleu.base-ende", "measure": "bleu"}]},
                        summary, 1, tmp_path)


def test_scale_is_cluster_only_for_the_unchanged_recipe_run_to_its_end():
    spec = {"train": {"max_steps": 100, "tokens_per_batch": 25000}, "preset": "base", "profile": "paper-p100"}
    assert run_scale({**spec, "overrides": {}}, {"steps": 100}, 8).startswith("cluster:")
    assert run_scale({**spec, "overrides": {}}, {"steps": 40}, 8).startswith("reduced:")
    assert run_scale({**spec, "overrides": {"max_steps": 100}}, {"steps": 100}, 8).startswith("reduced:")
