"""``--device`` on every verb that computes: train, evaluate, translate, average and reproduce run where
they are told (the CPU, the fake accelerator, a real GPU), in this process through ``repro.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main
from repro.pipeline.local import reproduce_local
from repro.results import ResultStore
from repro.train.checkpoint import list_checkpoints
from tests.pipeline.test_local import OVERRIDES

TINY = ["--set", "vocab_size=300", "--set", "tokens_per_batch=400", "--set", "max_tokens_per_device=400",
        "--set", "warmup_steps=2", "--set", "checkpoint_every_steps=2", "--set", "average_last=2",
        "--set", "log_every=1", "--set", 'model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}',
        "--compile", "off"]   # dynamo cannot trace the fake device; compile is tested on the CPU (tests/train/test_compiled.py)


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_multi30k) -> Path:
    return tiny_multi30k(tmp_path_factory.mktemp("cli-data") / "tiny", {"train": 120, "dev": 6, "test": 6})


def test_train_evaluate_translate_average_on_the_device(device, data: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(["train", "--recipe", "local", "--dataset", str(data), "--out-dir", str(run), "--max-steps", "4",
                 "--device", device.name, *TINY]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["device"] == ("cpu" if device.name == "cpu" else "cuda:0")
    checkpoint = list_checkpoints(run)[-1]

    assert main(["evaluate", "--checkpoint", str(checkpoint), "--dataset", str(data), "--device", device.name,
                 "--max-len-offset", "5"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["device"] == trained["device"] and evaluated["perplexity"]["ppl"] > 1
    assert 0 <= evaluated["bleu"]["sacrebleu"]["score"] <= 100

    source = tmp_path / "in.en"
    source.write_text("a man is walking .\n\ntwo dogs play in the snow .\n")
    out = tmp_path / "out.de"
    assert main(["translate", "--checkpoint", str(checkpoint), "--input", str(source), "--output", str(out),
                 "--device", device.name, "--max-len-offset", "5"]) == 0
    assert len(out.read_text().splitlines()) == 3   # line-aligned: the empty line stays empty

    averaged = tmp_path / "avg.pt"
    assert main(["average", str(run), "--last", "2", "-o", str(averaged), "--device", device.name]) == 0
    assert averaged.is_file()


def test_reproduce_takes_the_device(device, data: Path, tmp_path: Path) -> None:
    summary = reproduce_local(out_dir=tmp_path / "run", reports_dir=tmp_path / "reports" / "local", checks=False,
                              overrides=dict(OVERRIDES, dataset=str(data), max_steps=2, device=device.name,
                                             compile="off"),
                              say=lambda _: None, write_report=False)
    assert summary["device"] == ("cpu" if device.name == "cpu" else "cuda:0")
    bleu = {r.claim_id: r for r in ResultStore(tmp_path / "reports" / "local" / "results").read_all()}
    assert all(r.provenance.extra["device"] == summary["device"] for r in bleu.values())


def test_a_bad_device_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["translate", "--checkpoint", __file__, "--device", "gpu0"])
    assert exit_.value.code == 2 and "--device" in capsys.readouterr().err


def test_cuda_without_a_gpu_is_refused_by_name(tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["train", "--recipe", "smoke", "--out-dir", str(tmp_path), "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
