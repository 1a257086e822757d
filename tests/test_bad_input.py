"""Bad input is refused before work starts: exit 2, one line naming the file, line or field, nothing
written (issue 16's ten cases, each through the CLI in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main
from tests.metric_claim import METRIC_CLAIM

CLAIM = """part = "x"
[[claim]]
id = "x.one"
source = "test"
statement = "a claim"
kind = "invariant"
scale = "local"
checker = "{checker}"
"""


TREE = "(S (NP (DT a) (NN b)) (VP (VB c)))\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("repro: error: ")]
    assert len(lines) == 1, err
    return lines[0]


# -- --set and --print-config --------------------------------------------------------------------

def test_set_value_that_is_not_json_is_refused(capsys):
    rc, out, err = run(capsys, "train", "--recipe", "smoke", "--set", "model_overrides={n_layers:2", "--print-config")
    assert rc == 2 and out == ""
    assert "'model_overrides' must be JSON" in one_error_line(err)


def test_print_config_validates_model_overrides(capsys):
    rc, out, err = run(capsys, "train", "--recipe", "smoke", "--set", 'model_overrides={"dropout": 1.5}',
                       "--print-config")
    assert rc == 2 and out == ""
    assert "'dropout' must lie in [0, 1)" in one_error_line(err)


def test_print_config_refuses_d_model_that_h_does_not_divide(capsys):
    rc, out, err = run(capsys, "train", "--recipe", "smoke", "--set", "d_model=33", "--print-config")
    assert rc == 2 and out == ""
    assert "'d_model' (33) must be divisible by 'n_heads' (2)" in one_error_line(err)


def test_print_config_validates_a_config_file(tmp_path, capsys):
    cfg = tmp_path / "train.json"
    cfg.write_text(json.dumps({"preset": "base", "model_overrides": {"dropout": 1.5}}))
    rc, out, err = run(capsys, "train", "--config", str(cfg), "--print-config")
    assert rc == 2 and out == ""
    line = one_error_line(err)
    assert str(cfg) in line and "'dropout'" in line


@pytest.mark.parametrize("assignment, field", [
    ("seed=-1", "seed"), ('lr_scale="fast"', "lr_scale"), ("threads=-2", "threads"), ("adam_beta2=1.0", "adam_beta2"),
    ("adam_eps=0", "adam_eps"), ("max_steps=2.5", "max_steps"), ('model_overrides="abc"', "model_overrides"),
    ("tensorboard=1", "tensorboard"), ("log_every=true", "log_every"), ("out_dir=\"\"", "out_dir"),
])
def test_set_value_of_the_wrong_type_or_range_is_refused(capsys, assignment, field):
    rc, out, err = run(capsys, "train", "--recipe", "smoke", "--set", assignment, "--print-config")
    assert rc == 2 and out == ""
    assert f"'{field}'" in one_error_line(err)


def test_a_valid_set_still_prints(capsys):
    rc, out, _ = run(capsys, "train", "--recipe", "smoke", "--set", "seed=0", "--set", "lr_scale=1",
                     "--set", "data_dir=some/where", "--print-config")
    assert rc == 0
    printed = json.loads(out)
    # a relative data folder is recorded from where the command ran, so a later command elsewhere finds it
    assert printed["seed"] == 0 and printed["lr_scale"] == 1 and printed["data_dir"] == str(Path("some/where").absolute())


# -- data directories and corpora ------------------------------------------------------------------

@pytest.mark.parametrize("action", [["show", "multi30k-en-de"], ["list"]])
def test_data_command_refuses_a_missing_data_dir(tmp_path, capsys, action):
    missing = tmp_path / "no-such-dir"
    rc, out, err = run(capsys, "data", "--data-dir", str(missing), *action)
    assert rc == 2 and out == ""
    assert f"{missing}: data directory" in one_error_line(err)


def test_empty_training_corpus_names_both_files_and_writes_nothing(tmp_path, capsys):
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_text("")
    tgt.write_text("")
    (tmp_path / "dev.en").write_text("a b\n")
    (tmp_path / "dev.de").write_text("c d\n")
    out_dir = tmp_path / "run"
    rc, _, err = run(capsys, "train", "--recipe", "local", "--data-dir", str(tmp_path), "--out-dir", str(out_dir),
                     "--set", f"train_src={src}", "--set", f"train_tgt={tgt}", "--set", f"dev_src={tmp_path / 'dev.en'}",
                     "--set", f"dev_tgt={tmp_path / 'dev.de'}", "--max-steps", "1")
    assert rc == 2
    line = one_error_line(err)
    assert str(src) in line and str(tgt) in line and "empty" in line
    assert not out_dir.exists()


# -- claims -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["check"], ["claims", "list"], ["report", "--no-attention"]])
def test_unknown_checker_is_refused_naming_file_and_checker(tmp_path, capsys, argv):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "x.toml").write_text(CLAIM.format(checker="no.such_checker"))
    results = tmp_path / "results"
    results.mkdir()
    extra = {"check": ["--claims-dir", str(claims)], "list": [],
             "report": ["--claims-dir", str(claims), "--results", str(results), "--out", str(tmp_path / "out")]}
    argv = (["claims", "--claims-dir", str(claims), "list"] if argv[0] == "claims" else [*argv, *extra[argv[0]]])
    rc, _, err = run(capsys, *argv)
    assert rc == 2
    line = one_error_line(err)
    assert str(claims / "x.toml") in line and "no checker named 'no.such_checker'" in line
    assert not (tmp_path / "out").exists()


# -- result stores -----------------------------------------------------------------------------------

def _store_with_bad_records(tmp_path: Path) -> tuple[Path, list[Path]]:
    results = tmp_path / "results"
    (results / "x.bleu").mkdir(parents=True)
    bad = [results / "x.bleu" / "1-bad.json", results / "x.bleu" / "2-bad.json"]
    bad[0].write_text("{not json")
    bad[1].write_text("[1, 2]")
    return results, bad


def _report_over_bad_store(tmp_path, capsys, *flags):
    """``repro report`` over a store holding two bad records; returns (rc, stderr, out dir, bad records)."""
    results, bad = _store_with_bad_records(tmp_path)
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "x.toml").write_text(METRIC_CLAIM)
    out = tmp_path / "out"
    rc, _, err = run(capsys, "report", "--results", str(results), "--claims-dir", str(claims), "--out", str(out),
                     "--no-attention", *flags)
    return rc, err, out, bad


def test_report_refuses_a_store_with_an_invalid_record(tmp_path, capsys):
    rc, err, out, bad = _report_over_bad_store(tmp_path, capsys)
    assert rc == 2
    line = one_error_line(err)
    assert str(bad[0]) in line and "--skip-invalid" in line and "1 more" in line
    assert not out.exists()


def test_report_skip_invalid_warns_listing_every_skipped_record(tmp_path, capsys):
    rc, err, out, bad = _report_over_bad_store(tmp_path, capsys, "--skip-invalid")
    assert rc == 0 and (out / "report.md").exists()
    warnings = [line for line in err.splitlines() if "WARNING" in line]
    for path in bad:
        assert any(str(path) in w for w in warnings), err
    assert "2 invalid result record(s) were left out" in err


def test_report_refuses_a_missing_results_dir(tmp_path, capsys):
    rc, _, err = run(capsys, "report", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert rc == 2 and str(tmp_path / "nope") in one_error_line(err)


# -- EVALB ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gold_text, test_text", [(TREE * 2, TREE), (TREE, TREE * 2), ("", TREE), ("", "")])
def test_evalb_incomplete_input_exits_2_with_evalb_report_unchanged(tmp_path, capsys, gold_text, test_text):
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(gold_text)
    test.write_text(test_text)
    rc, out, err = run(capsys, "evalb", str(gold), str(test))
    assert rc == 2
    assert str(gold) in one_error_line(err)
    rc_allowed, out_allowed, err_allowed = run(capsys, "evalb", str(gold), str(test), "--allow-mismatch")
    assert rc_allowed == 0 and out_allowed == out and "repro: error" not in err_allowed
    for flags in (["--json"], ["--json", "--allow-mismatch"]):
        rc_json, out_json, _ = run(capsys, "evalb", str(gold), str(test), *flags)
        assert rc_json == (0 if "--allow-mismatch" in flags else 2)
        json.loads(out_json)  # strict JSON: no NaN for the F1 of zero brackets
        assert "NaN" not in out_json


def test_evalb_matched_files_exit_0(tmp_path, capsys):
    gold = tmp_path / "gold"
    gold.write_text(TREE * 2)
    rc, out, err = run(capsys, "evalb", str(gold), str(gold))
    assert rc == 0 and "Bracketing FMeasure       = 100.00" in out and "error" not in err
