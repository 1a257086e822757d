"""The local parser's learning curve (issue 18): one point per training-set size, each with its
train/dev NLL probe, test F1 under both searches, and the pipeline's run as the full-size point."""

from __future__ import annotations

import json

import pytest

from repro.errors import ConfigError
from repro.pipeline.parsing_curve import CURVE_FILE, learning_curve, point_from_pipeline, subset
from tests.pipeline.test_parsing_local import TINY


def test_subset_is_a_prefix_of_the_training_split(tmp_path, tiny_parsing_data):
    out = subset(tiny_parsing_data, tmp_path / "one", 1)
    assert (out / "train.src").read_text().splitlines() == (tiny_parsing_data / "train.src").read_text().splitlines()[:1]
    assert (out / "dev.trees").read_text() == (tiny_parsing_data / "dev.trees").read_text()
    with pytest.raises(ConfigError, match="3 trees asked, the training split has 2"):
        subset(tiny_parsing_data, tmp_path / "three", 3)


def test_curve_trains_each_size_and_keeps_finished_points(tmp_path, data_dir):
    reports = tmp_path / "reports"
    said: list[str] = []
    curve = learning_curve(sizes=[5, 12], out_dir=tmp_path / "runs", reports_dir=reports, data_dir=str(data_dir),
                           overrides=TINY, say=said.append, test_limit=2)
    assert [p["trees"] for p in curve["points"]] == [5, 12]
    for p in curve["points"]:
        assert p["steps"] == 4 and p["test_sentences"] == 2 and 0.0 <= p["test_f1"] <= 100.0
        assert p["probe"][-1]["step"] == 4 and p["train_nll"] == p["probe"][-1]["train_nll"] > 0
        assert p["epochs"] > 0
    # the same sizes again: nothing is retrained, the file is rewritten with the same points
    said.clear()
    again = learning_curve(sizes=[5], out_dir=tmp_path / "runs", reports_dir=reports, data_dir=str(data_dir),
                           overrides=TINY, say=said.append, test_limit=2)
    assert said == [f"5 trees: kept from {reports / CURVE_FILE}"] and again["points"] == curve["points"]
    assert json.loads((reports / CURVE_FILE).read_text())["points"] == curve["points"]
    assert {p["precision"] for p in curve["points"]} == {"fp32"}  # `auto`, resolved (tests/conftest.py)

    # the pipeline's run of the same recipe is the full-size point, only if it ran in the same precision
    summary = {"config": curve["config"], "targets": curve["targets"], "splits": {"train": 3396}, "steps": 4,
               "f1": 20.0, "greedy": {"f1": 21.0, "leaf_count": {"exact": 3}}, "leaf_count": {"exact": 2},
               "stages_s": {"train_s": 1.0}, "curve": [], "numeric_precision": {"precision": "bf16"}}
    (reports / "local_parsing_run.json").write_text(json.dumps(summary))
    said.clear()
    mixed = learning_curve(sizes=[5], out_dir=tmp_path / "runs", reports_dir=reports, data_dir=str(data_dir),
                           overrides=TINY, say=said.append, test_limit=2)
    assert [p["trees"] for p in mixed["points"]] == [5, 12] and "ran in another precision than fp32" in said[-1]
    summary["numeric_precision"]["precision"] = "fp32"
    (reports / "local_parsing_run.json").write_text(json.dumps(summary))
    same = learning_curve(sizes=[5], out_dir=tmp_path / "runs", reports_dir=reports, data_dir=str(data_dir),
                          overrides=TINY, say=said.append, test_limit=2)
    assert [p["trees"] for p in same["points"]] == [5, 12, 3396] and same["points"][-1]["precision"] == "fp32"


def test_full_size_point_comes_from_the_pipeline_summary():
    summary = {"splits": {"train": 3396}, "steps": 1600, "epochs": 15.2, "f1": 20.0, "greedy": {
        "f1": 21.0, "leaf_count": {"exact": 30}}, "leaf_count": {"exact": 25}, "stages_s": {"train_s": 700.0},
        "curve": [{"step": 1600, "train_nll": 0.5, "dev_nll": 0.6, "dev_greedy_f1": 19.0}]}
    point = point_from_pipeline(summary)
    assert point["trees"] == 3396 and point["test_f1"] == 20.0 and point["test_greedy_f1"] == 21.0
    assert (point["train_nll"], point["dev_nll"], point["dev_greedy_f1"]) == (0.5, 0.6, 19.0)


def test_a_variant_does_not_overwrite_another_configs_curve(tmp_path, data_dir):
    from repro.pipeline.parsing_curve import main
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / CURVE_FILE).write_text(json.dumps({"config": {"max_steps": 1}, "points": []}))
    assert main(["--sizes", "5", "--reports", str(reports), "--out-dir", str(tmp_path / "runs"),
                 "--data-dir", str(data_dir), "--set", "lr_scale=0.2"]) == 2
    assert json.loads((reports / CURVE_FILE).read_text())["config"] == {"max_steps": 1}
    with pytest.raises(ConfigError, match="unknown"):
        learning_curve(sizes=[5], out_dir=tmp_path / "runs", reports_dir=tmp_path / "other", data_dir=str(data_dir),
                       overrides={"no_such_field": 1})


def test_per_word_targets_make_their_own_curve(tmp_path, data_dir):
    reports = tmp_path / "reports"
    curve = learning_curve(sizes=[5], out_dir=tmp_path / "runs", reports_dir=reports, data_dir=str(data_dir),
                           overrides=TINY, test_limit=2, targets="per-word")
    assert curve["targets"] == "per-word" and [p["trees"] for p in curve["points"]] == [5]
    first = (tmp_path / "runs" / "trees-5" / "data" / "train.tgt").read_text().splitlines()[0]
    assert first.split()[0].endswith("_XX")  # one token per word
    # the same recipe on symbols is another curve: it may not take this file's points
    with pytest.raises(ConfigError, match="another config"):
        learning_curve(sizes=[5], out_dir=tmp_path / "runs2", reports_dir=reports, data_dir=str(data_dir),
                       overrides=TINY, test_limit=2, targets="symbols")
    with pytest.raises(ConfigError, match="another config"):
        learning_curve(sizes=[5], out_dir=tmp_path / "runs2", reports_dir=reports, data_dir=str(data_dir),
                       overrides={**TINY, "targets": "symbols"}, test_limit=2)
