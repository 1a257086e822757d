"""The whole resolved recipe travels with the model: every checkpoint (and the averaged one) holds it,
and ``repro translate`` / ``repro evaluate`` decode with the checkpoint's own search unless a flag
says otherwise (a parser's checkpoint: Section 6.3's beam 21, alpha 0.3, input + 300)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main
from repro.decode.settings import DecodeSettings
from repro.decode.translate import decode_settings_of
from repro.train.checkpoint import list_checkpoints, load_checkpoint

TINY = ["--set", "vocab_size=300", "--set", "tokens_per_batch=300", "--set", "max_tokens_per_device=300",
        "--set", "warmup_steps=2", "--set", "checkpoint_every_steps=1", "--set", "average_last=2",
        "--set", 'model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}']
PARSER_SEARCH = ["--set", "beam_size=21", "--set", "alpha=0.3", "--set", "max_len_offset=300"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_multi30k) -> Path:
    root = tmp_path_factory.mktemp("travels")
    data = tiny_multi30k(root / "data", {"train": 60, "dev": 3, "test": 3})
    out = root / "run"
    assert main(["train", "--recipe", "local", "--dataset", str(data), "--out-dir", str(out), "--max-steps", "2",
                 "--device", "cpu", *TINY, *PARSER_SEARCH]) == 0
    return out


def test_every_checkpoint_and_the_average_hold_the_recipe(run: Path, tmp_path: Path, capsys) -> None:
    capsys.readouterr()
    for path in list_checkpoints(run):
        state = load_checkpoint(path)
        assert state["recipe"]["name"] == "local" and state["recipe"]["train"] == state["train_config"]
        assert decode_settings_of(state) == DecodeSettings(21, 0.3, 300)
    assert main(["average", str(run), "--last", "2", "-o", str(tmp_path / "avg.pt")]) == 0
    assert decode_settings_of(load_checkpoint(tmp_path / "avg.pt")).beam_size == 21


def test_translate_decodes_with_the_checkpoints_search_unless_a_flag_overrides(run: Path, tmp_path: Path,
                                                                               capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a dog runs .\n")
    checkpoint = str(list_checkpoints(run)[-1])
    assert main(["translate", "--checkpoint", checkpoint, "--input", str(source), "--output", str(tmp_path / "o")]) == 0
    assert "beam 21, alpha 0.3, input + 300 (the checkpoint's recipe local)" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", checkpoint, "--input", str(source), "--output", str(tmp_path / "o"),
                 "--beam", "4", "--max-len-offset", "5"]) == 0
    assert "beam 4, alpha 0.3, input + 5" in capsys.readouterr().err


def test_print_config_shows_the_decoding_and_feeds_config(tmp_path: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["train", "--recipe", "smoke", "--set", "beam_size=8", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["decode"]["beam_size"] == 8 and printed["recipe"] == "smoke"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(printed))
    assert main(["train", "--recipe", "smoke", "--config", str(config), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["decode"]["beam_size"] == 8
