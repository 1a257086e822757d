"""Issue 39, item 1: artifacts that prove what they are.

The encoded corpus is reused only when its sources and arrays hold what its manifest records (by
SHA-256), and says why when it is not; checkpoints carry the SHA-256 of their run's vocabulary and
data, and translate, evaluate, average and resume refuse another run's, naming both files; NaN
weights are refused where a checkpoint is loaded; a resume with another vocab_size is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from repro.cli import main
from repro.train.checkpoint import load_checkpoint, save_checkpoint
from tests.cli_run import refusal, run

TINY_MODEL = '{"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "attention": "fused"}'
EN = ["A man rides a bike .", "Two dogs play in the snow .", "A woman reads a book .", "Children run on the beach ."]
DE = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch .", "Kinder rennen am Strand ."]


def train_args(data_dir: Path, out_dir: Path, steps: int = 2, *extra: str) -> list[str]:
    return ["train", "--recipe", "local", "--data-dir", str(data_dir), "--out-dir", str(out_dir),
            "--max-steps", str(steps), "--set", f"model_overrides={TINY_MODEL}", "--set", "vocab_size=300",
            "--set", "checkpoint_every_steps=1", "--set", "tokens_per_batch=64", "--set", "max_tokens_per_device=64",
            "--set", "warmup_steps=2", *extra]


def swapped_vocab(vocab: Path, out: Path) -> Path:
    """A vocabulary of the same size as ``vocab`` that maps two tokens the other way round."""
    data = json.loads(vocab.read_text(encoding="utf-8"))
    table = data["model"]["vocab"]
    a, b = sorted(table, key=table.get)[-2:]
    table[a], table[b] = table[b], table[a]
    out.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lineage")
    data = root / "data"
    folder = data / "multi30k"
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        (folder / f"{split}.en").write_text("".join(EN[i % 4] + "\n" for i in range(n)))
        (folder / f"{split}.de").write_text("".join(DE[i % 4] + "\n" for i in range(n)))
    assert main(train_args(data, root / "a")) == 0
    assert main(train_args(data, root / "b", 2, "--set", "seed=7")) == 0
    source = root / "in.en"
    source.write_text("A man reads a book .\n")
    return {"data": data, "a": root / "a", "b": root / "b", "input": source, "root": root}


def copy_run(runs, tmp_path: Path, name: str = "a") -> Path:
    target = tmp_path / name
    shutil.copytree(runs[name], target)
    return target


# -- checkpoints carry their lineage ---------------------------------------------------------------

def test_checkpoint_records_the_sha256_of_its_vocabulary_and_data(runs):
    state = load_checkpoint(runs["a"] / "checkpoints" / "step_00000002.pt")
    lineage = state["lineage"]
    assert len(lineage["vocab_sha256"]) == 64 and len(lineage["data_sha256"]) == 64


def test_translate_refuses_another_runs_vocabulary_of_the_same_size(runs, tmp_path, capsys):
    other = swapped_vocab(runs["a"] / "vocab.json", tmp_path / "vocab.json")
    ckpt = runs["a"] / "checkpoints" / "step_00000002.pt"
    rc, _, err = run(capsys, "translate", "--checkpoint", str(ckpt), "--vocab", str(other), "--input",
                     str(runs["input"]), "--max-len-offset", "2", "--greedy")
    line = refusal(err)
    assert rc == 2 and str(other) in line and str(ckpt) in line


def test_evaluate_refuses_another_runs_vocabulary(runs, tmp_path, capsys):
    other = swapped_vocab(runs["a"] / "vocab.json", tmp_path / "vocab.json")
    ckpt = runs["a"] / "checkpoints" / "step_00000002.pt"
    rc, _, err = run(capsys, "evaluate", "--checkpoint", str(ckpt), "--vocab", str(other), "--data-dir",
                     str(runs["data"]), "--max-len-offset", "2", "--greedy")
    assert rc == 2 and str(other) in refusal(err)


def test_average_refuses_checkpoints_of_two_runs(runs, tmp_path, capsys):
    a, b = runs["a"] / "checkpoints" / "step_00000002.pt", runs["b"] / "checkpoints" / "step_00000002.pt"
    out = tmp_path / "avg.pt"
    rc, _, err = run(capsys, "average", "--checkpoints", str(a), str(b), "--output", str(out))
    line = refusal(err)
    assert rc == 2 and str(a) in line and str(b) in line and not out.exists()


def test_average_of_one_run_carries_its_lineage(runs, tmp_path, capsys):
    out = tmp_path / "avg.pt"
    rc, _, err = run(capsys, "average", "--checkpoints", *(str(p) for p in sorted((runs["a"] / "checkpoints").iterdir())),
                     "--output", str(out))
    assert rc == 0, err
    assert load_checkpoint(out)["lineage"] == load_checkpoint(runs["a"] / "checkpoints" / "step_00000002.pt")["lineage"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nonfinite_weights_are_refused_where_a_checkpoint_is_loaded(runs, tmp_path, capsys, value):
    state = load_checkpoint(runs["a"] / "checkpoints" / "step_00000002.pt")
    name = next(iter(k for k, v in state["model"].items() if v.is_floating_point()))
    state["model"][name][0] = value
    state.pop("format"), state.pop("version")
    bad = save_checkpoint(tmp_path / "checkpoints" / "step_00000002.pt", state)
    shutil.copy(runs["a"] / "vocab.json", tmp_path / "vocab.json")
    rc, out, err = run(capsys, "translate", "--checkpoint", str(bad), "--input", str(runs["input"]),
                       "--max-len-offset", "2", "--greedy")
    line = refusal(err)
    assert rc == 2 and str(bad) in line and name in line and out == ""


def test_resume_with_another_vocab_size_is_refused(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    args = train_args(runs["data"], target, 3)
    args[args.index("vocab_size=300")] = "vocab_size=280"
    rc, _, err = run(capsys, *args)
    line = refusal(err)
    assert rc == 2 and "vocab_size" in line and "280" in line
    assert not (target / "checkpoints" / "step_00000003.pt").exists()


def test_resume_over_a_replaced_vocabulary_is_refused_naming_both(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    swapped_vocab(target / "vocab.json", target / "vocab.json")
    rc, _, err = run(capsys, *train_args(runs["data"], target, 3))
    line = refusal(err)
    assert rc == 2 and str(target / "vocab.json") in line and "step_00000002.pt" in line
    assert not (target / "checkpoints" / "step_00000003.pt").exists()


# -- the encoded corpus is reused only when it holds what it says --------------------------------

def _reused(err: str) -> bool:
    return "not reusing" not in err


def test_unchanged_cache_is_reused(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    rc, out, err = run(capsys, *train_args(runs["data"], target, 3))
    assert rc == 0 and _reused(err) and json.loads(out)["data"] == "reused"


def test_corpus_edited_in_place_with_same_size_and_mtime_is_encoded_again(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    data = tmp_path / "data"
    shutil.copytree(runs["data"], data)
    # the manifest names the corpus by path: point the copy's manifest at the copied data
    manifest = target / "encoded" / "manifest.json"
    text = manifest.read_text().replace(str(runs["data"].resolve()), str(data.resolve()))
    manifest.write_text(text)
    train_en = data / "multi30k" / "train.en"
    stat = train_en.stat()
    body = train_en.read_text()
    train_en.write_text(body.replace("A man rides a bike .", "A man rides a kite ."))
    os.utime(train_en, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert train_en.stat().st_size == stat.st_size and train_en.stat().st_mtime_ns == stat.st_mtime_ns
    rc, out, err = run(capsys, *train_args(data, target, 2))
    assert "not reusing" in err and str(train_en.resolve()) in err
    # the data changed under the checkpoints: resuming is refused (the cache was encoded again first)
    assert rc == 2 and "training data changed" in refusal(err)


def test_array_replaced_by_other_valid_ids_is_encoded_again(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    src = target / "encoded" / "src.npy"
    ids = np.load(src)
    np.save(src, ids[::-1].copy())
    rc, out, err = run(capsys, *train_args(runs["data"], target, 3))
    assert rc == 0 and str(src) in err and "SHA-256" in err and json.loads(out)["data"] == "encoded"
    assert np.array_equal(np.load(src), ids)


def test_ids_beyond_the_vocabulary_are_refused_naming_the_file(runs, tmp_path, capsys):
    from repro.content_hash import array_sha256

    target = copy_run(runs, tmp_path)
    src = target / "encoded" / "src.npy"
    ids = np.load(src)
    ids[0] = 10_000
    np.save(src, ids)
    manifest = target / "encoded" / "manifest.json"
    saved = json.loads(manifest.read_text())
    saved["arrays"]["src"] = array_sha256(ids)   # a manifest that agrees with the bad array
    manifest.write_text(json.dumps(saved))
    rc, _, err = run(capsys, *train_args(runs["data"], target, 3))
    line = refusal(err)
    assert rc == 2 and str(src) in line and "10000" in line


# -- translate reads its input as the reference tools do (issue 39, item 6) -----------------------

def test_translate_refuses_an_empty_input_naming_it(runs, tmp_path, capsys):
    empty = tmp_path / "empty.en"
    empty.write_text("")
    rc, out, err = run(capsys, "translate", "--checkpoint", str(runs["a"] / "checkpoints" / "step_00000002.pt"),
                       "--input", str(empty), "--max-len-offset", "2", "--greedy")
    assert rc == 2 and str(empty) in refusal(err) and out == ""


def test_translate_keeps_one_output_line_per_input_line(runs, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text("\ufeffA man\u0085reads a book .\nTwo dogs\u2028run .\n", encoding="utf-8")
    rc, out, err = run(capsys, "translate", "--checkpoint", str(runs["a"] / "checkpoints" / "step_00000002.pt"),
                       "--input", str(source), "--max-len-offset", "2", "--greedy")
    assert rc == 0, err
    assert out.count("\n") == 2


# -- issue 45, item 4: lineage is required; optimizer state is finite --------------------------------

LINEAGE_DAMAGE = {
    "removed": lambda lineage: None,
    "a string": lambda lineage: "vocab.json of run a",
    "a field missing": lambda lineage: {k: v for k, v in lineage.items() if k != "vocab_sha256"},
    "a number for a hash": lambda lineage: {**lineage, "data_sha256": 12},
}


def _without_lineage(runs, tmp_path: Path, damage: str) -> Path:
    """A copy of run a whose newest checkpoint's lineage is damaged (removed when ``None``)."""
    target = copy_run(runs, tmp_path)
    path = target / "checkpoints" / "step_00000002.pt"
    state = load_checkpoint(path)
    state.pop("format"), state.pop("version")
    changed = LINEAGE_DAMAGE[damage](state.pop("lineage"))
    save_checkpoint(path, state if changed is None else {**state, "lineage": changed})
    return target


def _verb(verb: str, runs, target: Path, out: Path) -> list[str]:
    ckpt = str(target / "checkpoints" / "step_00000002.pt")
    return {"translate": ["translate", "--checkpoint", ckpt, "--input", str(runs["input"]), "--max-len-offset", "2",
                          "--greedy"],
            "evaluate": ["evaluate", "--checkpoint", ckpt, "--data-dir", str(runs["data"]), "--max-len-offset", "2",
                         "--greedy", "--ppl-split", "none"],
            "average": ["average", "--checkpoints", ckpt, "--output", str(out)],
            "resume": train_args(runs["data"], target, 3)}[verb]


@pytest.mark.parametrize("damage", list(LINEAGE_DAMAGE))
@pytest.mark.parametrize("verb", ["translate", "evaluate", "average", "resume"])
def test_a_checkpoint_without_a_readable_lineage_is_refused(runs, tmp_path, capsys, verb, damage):
    target = _without_lineage(runs, tmp_path, damage)
    out = tmp_path / "avg.pt"
    rc, stdout, err = run(capsys, *_verb(verb, runs, target, out))
    line = refusal(err)
    assert rc == 2 and stdout == "" and "step_00000002.pt" in line and "lineage" in line and "--allow-no-lineage" in line
    assert not out.exists() and not (target / "checkpoints" / "step_00000003.pt").exists()


@pytest.mark.parametrize("verb", ["translate", "evaluate", "average", "resume"])
def test_allow_no_lineage_uses_it_and_the_output_says_so(runs, tmp_path, capsys, verb):
    target = _without_lineage(runs, tmp_path, "removed")
    out = tmp_path / "avg.pt"
    rc, stdout, err = run(capsys, *_verb(verb, runs, target, out), "--allow-no-lineage")
    assert rc == 0, err
    assert "WARNING" in err and "step_00000002.pt" in err and "--allow-no-lineage" in err
    if verb == "evaluate":
        assert "--allow-no-lineage" in json.loads(stdout)["lineage"]
    elif verb == "average":
        state = load_checkpoint(out)
        assert "lineage" not in state and state["lineage_unchecked"] == [str(target / "checkpoints" /
                                                                            "step_00000002.pt")]
    elif verb == "resume":
        assert "without a readable lineage" in json.loads(stdout)["lineage"]
        lineage = load_checkpoint(target / "checkpoints" / "step_00000003.pt")["lineage"]
        assert lineage["unchecked_from"].endswith("step_00000002.pt") and len(lineage["vocab_sha256"]) == 64


def test_nonfinite_optimizer_state_is_refused_like_nonfinite_weights(runs, tmp_path, capsys):
    target = copy_run(runs, tmp_path)
    path = target / "checkpoints" / "step_00000002.pt"
    state = load_checkpoint(path)
    state.pop("format"), state.pop("version")
    moments = next(iter(state["optimizer"]["state"].values()))
    assert all(bool(torch.isfinite(v).all()) for v in state["model"].values() if v.is_floating_point())
    moments["exp_avg_sq"].view(-1)[0] = float("nan")   # the weights stay finite
    save_checkpoint(path, state)
    rc, _, err = run(capsys, *train_args(runs["data"], target, 3))
    line = refusal(err)
    assert rc == 2 and str(path) in line and "optimizer" in line and "exp_avg_sq" in line and "NaN" in line
    assert not (target / "checkpoints" / "step_00000003.pt").exists()


@pytest.mark.parametrize("verb", ["translate", "average", "evaluate"])
def test_an_output_that_is_one_of_the_inputs_is_refused(runs, tmp_path, capsys, verb):
    target = copy_run(runs, tmp_path)
    ckpt = target / "checkpoints" / "step_00000002.pt"
    source = tmp_path / "in.en"
    source.write_text("A man reads a book .\n")
    reference = runs["data"] / "multi30k" / "test_2016_flickr.de"
    before = {p: p.read_bytes() for p in (ckpt, source, reference)}
    argv = {"translate": ["translate", "--checkpoint", str(ckpt), "--input", str(source), "--output", str(source),
                          "--greedy", "--max-len-offset", "2"],
            "average": ["average", "--checkpoints", str(ckpt), "--output", str(ckpt)],
            "evaluate": ["evaluate", "--checkpoint", str(ckpt), "--data-dir", str(runs["data"]), "--hypotheses",
                         str(reference), "--greedy", "--max-len-offset", "2"]}[verb]
    rc, _, err = run(capsys, *argv)
    # average's checkpoint lies in its run's checkpoints/, which an output flag never names (refused first)
    assert rc == 2 and ("a file of the run in" if verb == "average" else "one of this command's inputs") in refusal(err)
    assert {p: p.read_bytes() for p in before} == before
