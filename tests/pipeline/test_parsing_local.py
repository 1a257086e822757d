"""``repro reproduce --pipeline local-parsing`` end to end on a tiny model: the result and the summary
are written, with provenance, and rerunning replaces the earlier record instead of adding one."""

from __future__ import annotations

import json

import pytest

from repro.cli import main as cli_main
from repro.errors import ConfigError
from repro.pipeline.parsing import RESULT_ID, reproduce_parsing_local
from repro.results import ResultStore

TINY = {"max_steps": 4, "tokens_per_batch": 600, "max_tokens_per_device": 600, "warmup_steps": 2,
        "vocab_size": 300, "model_overrides": {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2}}


def _results(reports):
    return sorted((reports / "results" / RESULT_ID).glob("*.json"))


def test_local_parsing_profile_writes_result_with_provenance(tmp_path, data_dir, registry_calls):
    reports = tmp_path / "reports"
    report = reproduce_parsing_local(out_dir=tmp_path / "run", reports_dir=reports, data_dir=str(data_dir),
                                     overrides=TINY, test_limit=3)
    [path] = _results(reports)
    [result] = [r for r in ResultStore(reports / "results").read_all() if r.claim_id == RESULT_ID]
    assert 0.0 <= result.measured <= 100.0 and result.unit == "F1 (EVALB, COLLINS.prm)"
    # the F1 is the registry's measurement (repro.measures), the one the cluster's Table 4 jobs take
    [(result_id, measure, _, found)] = registry_calls
    assert (result_id, measure, found.value) == (RESULT_ID, "f1.evalb", result.measured)
    assert result.extra["bootstrap"]["resamples"] > 0 and result.ci95[0] <= result.measured <= result.ci95[1]
    prov = result.provenance
    assert prov.scale.startswith("local: ") and "3396 training trees" in prov.scale
    assert "first 3 of 245" in prov.scale and "first 3 of 245" in prov.dataset
    assert prov.extra["steps"] == 4 and prov.extra["run_dir"] == str(tmp_path / "run")
    assert result.extra["decode"]["beam_size"] == 21 and 0 <= result.extra["repaired"] <= 3
    greedy = result.extra["greedy"]  # greedy search on the same checkpoint, beside the paper's beam
    assert 0.0 <= greedy["f1"] <= 100.0 and 0 <= greedy["repaired"] <= 3 and "Greedy search" in result.detail
    for counts in (result.extra["leaf_count"], greedy["leaf_count"]):
        assert set(counts) == {"exact", "too_few", "too_many"} and sum(counts.values()) == 3
    assert len((tmp_path / "run" / "test.greedy.out").read_text().splitlines()) == 3
    summary = json.loads((reports / "local_parsing_run.json").read_text())
    assert summary["f1"] == result.measured and summary["test_sentences"] == 3
    assert set(summary["stages_s"]) == {"prepare_s", "overfit_s", "train_s", "decode_s", "greedy_decode_s", "score_s"}
    assert set(summary["overfit"]) >= {"trees", "epochs", "f1"} and summary["overfit"]["trees"] == 10
    # the checkpoint probe: train vs dev NLL and greedy dev F1 at every checkpoint (here only the last)
    [point] = summary["curve"]
    assert point["step"] == 4 and point["dev_sentences"] == 273 and point["train_nll"] > 0 and point["dev_nll"] > 0
    assert 0.0 <= point["dev_greedy_f1"] <= 100.0
    # per-word targets (the recipe's): every opener rides in a word's token, so no kind "open"
    assert summary["targets"] == "per-word" and set(point["dev_symbol_accuracy"]) == {"leaf", "close", "eos"}
    assert set(point["dev_leaf_attention"]) == {"layer_1", "chance"}  # TINY has one decoder layer
    assert set(summary["leaf_count_by_length"]) <= {"1-10", "11-20", "21-30", "31-40", "41+"}

    # a rerun (resuming the finished run) replaces the record rather than adding a second one
    reproduce_parsing_local(out_dir=tmp_path / "run", reports_dir=reports, data_dir=str(data_dir),
                            overrides=TINY, test_limit=2)
    assert len(_results(reports)) == 1
    assert json.loads((reports / "local_parsing_run.json").read_text())["test_sentences"] == 2


def test_cli_rejects_bad_test_limit(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="--test-limit must be positive"):
        reproduce_parsing_local(out_dir=tmp_path / "run", reports_dir=tmp_path / "r", data_dir=str(data_dir),
                                test_limit=0)
    assert cli_main(["reproduce", "--pipeline", "local", "--test-limit", "3"]) == 2
