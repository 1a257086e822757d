"""The train/average/translate/evaluate commands end to end on a tiny corpus, and bad input."""

import json

import pytest

from repro.cli import main
from repro.recipes import get_recipe
from repro.train.data import prepare_training_data

TINY_MODEL = '{"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "attention": "fused"}'
EN = ["A man rides a bike .", "Two dogs play in the snow .", "A woman reads a book .", "Children run on the beach ."]
DE = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch .", "Kinder rennen am Strand ."]


@pytest.fixture()
def tiny_data(tmp_path):
    """A data directory laid out like ../shared/data/multi30k, with a few sentences per split."""
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        (folder / f"{split}.en").write_text("".join(EN[i % 4] + "\n" for i in range(n)))
        (folder / f"{split}.de").write_text("".join(DE[i % 4] + "\n" for i in range(n)))
    return tmp_path / "data"


def train_args(data_dir, out_dir, steps=4):
    return ["train", "--recipe", "local", "--data-dir", str(data_dir), "--out-dir", str(out_dir),
            "--max-steps", str(steps), "--set", f"model_overrides={TINY_MODEL}", "--set", "vocab_size=300",
            "--set", "checkpoint_every_steps=1", "--set", "tokens_per_batch=64", "--set", "max_tokens_per_device=64",
            "--set", "warmup_steps=2"]


def test_train_average_translate_evaluate(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(train_args(tiny_data, run)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 4 and (run / "vocab.json").exists() and (run / "metrics.csv").exists()
    # the run's own records (issue 44): what it learned and counted, and its dev set's token accuracy
    record = json.loads((run / "run.json").read_text())
    assert record["vocabulary"]["size"] == summary["vocab_size"] and record["corpus"]["pairs"] == 40
    assert record["steps"] == 4 and record["sessions"][0]["devices"] == 1
    dev = json.loads((run / "evaluations" / "run.dev.json").read_text())
    assert dev["provenance"]["extra"]["test_set"]["reference"]["lines"] == 4
    assert 0 <= dev["extra"]["token_accuracy"] <= 1 and dev["provenance"]["extra"]["evaluated_checkpoint"] == \
        "step_00000004.pt"
    assert main(["check", "--run", str(run), "--only", "observed.test-set", "--only", "observed.train-steps"]) == 0
    out = capsys.readouterr().out
    assert "ran 4 of 100000 updates" in out and "holds no evaluation of the run's test split" in out
    assert main(["average", str(run), "--last", "3"]) == 0
    averaged = run / "average_last3.pt"
    assert averaged.exists()
    capsys.readouterr()
    src = tmp_path / "in.en"
    src.write_text("A man reads a book .\n\nTwo dogs run .\n")
    out = tmp_path / "out.de"
    assert main(["translate", "--checkpoint", str(averaged), "--input", str(src), "--output", str(out),
                 "--max-len-offset", "3"]) == 0
    lines = out.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == ""  # line-aligned; an empty input line stays empty
    assert main(["evaluate", "--checkpoint", str(averaged), "--data-dir", str(tiny_data), "--max-len-offset", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["perplexity"]["split"] == "dev" and report["perplexity"]["ppl"] > 1
    assert 0 <= report["perplexity"]["token_accuracy"] <= 1
    assert "signature" in report["bleu"]["sacrebleu"] and report["bleu"]["beam_size"] == 4


def test_unequal_parallel_files_name_the_file(tiny_data, tmp_path, capsys):
    (tiny_data / "multi30k" / "train.de").write_text("".join(DE[i % 4] + "\n" for i in range(39)))
    assert main(train_args(tiny_data, tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert "repro: error:" in err and "train.en:40" in err


def test_empty_line_names_file_and_line(tiny_data, tmp_path, capsys):
    path = tiny_data / "multi30k" / "train.en"
    lines = path.read_text().split("\n")
    lines[6] = ""
    path.write_text("\n".join(lines))
    assert main(train_args(tiny_data, tmp_path / "run")) == 2
    assert "train.en:7: empty line" in capsys.readouterr().err


def test_over_long_pairs_are_filtered_and_counted(tiny_data, tmp_path):
    path = tiny_data / "multi30k" / "train.en"
    lines = path.read_text().splitlines()
    lines[2] = " ".join(["word"] * 80)
    path.write_text("\n".join(lines) + "\n")
    cfg = get_recipe("local").train.replace(data_dir=str(tiny_data), out_dir=str(tmp_path / "run"), vocab_size=300, max_len=30)
    data = prepare_training_data(cfg)
    assert data.filtered == 1 and data.filtered_lines == [3] and len(data.examples) == 39


def test_bad_checkpoints_and_configs_are_named(tmp_path, capsys):
    bad = tmp_path / "step_00000001.pt"
    bad.write_bytes(b"PK\x03\x04 truncated")
    assert main(["translate", "--checkpoint", str(bad), "--input", str(bad)]) == 2
    assert "step_00000001.pt: not a readable checkpoint" in capsys.readouterr().err
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"max_steps": 10,\n "warmup_steps": }')
    assert main(["train", "--config", str(cfg)]) == 2
    assert "cfg.json:2: not valid JSON" in capsys.readouterr().err
    cfg.write_text('{"max_step": 10}')
    assert main(["train", "--config", str(cfg)]) == 2
    assert "unknown training config field(s): max_step" in capsys.readouterr().err
    cfg.write_text('{"bpe_split": "chars"}')
    assert main(["train", "--config", str(cfg)]) == 2
    assert "field 'bpe_split' must be one of bytes, words, word-level, got 'chars'" in capsys.readouterr().err


def test_profile_still_names_a_recipe_and_says_it_is_deprecated(capsys):
    from repro.cli import main

    assert main(["train", "--profile", "smoke", "--print-config"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["recipe"] == "smoke"
    assert "--profile is deprecated; use --recipe" in captured.err
