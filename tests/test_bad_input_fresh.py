"""Issue 45 ("bad inputs"): hostile inputs written fresh against the code, one class each, through the
CLI in-process as a user would give them. Each was a traceback, a wrong exit code, a half-truth or a
user's file replaced before the mechanism below it was fixed:

- a training checkpoint whose *resume state* (Adam's moments, the RNG states, the batcher position)
  does not fit the model: the resume (:mod:`repro.train.resume`);
- JSON numbers no float holds (``1e400``, an integer of 400 digits): the strict JSON reader;
- a checkpoint tensor declaring more elements than the file holds (a stride-0 view): the checkpoint
  reader; weights of another shape are named by the fault, not torch's heading;
- a sentence longer than the model (``report --attention-sentence``): the one builder of a model from
  a checkpoint (:func:`repro.decode.translate.model_of`);
- an output flag naming one of a run's own files (its vocabulary, record, metrics log, a checkpoint),
  or ``-`` where standard output is not an output: the output argument type;
- a selftest folder inside another run's folder;
- a metrics log with text where numbers go, or rows wider than its header, and a run's configuration
  (``config.json``, a checkpoint's ``train_config``/``model_config``) of the wrong types (``report --runs``);
- a run record whose recipe no run takes (``check --run``: it read as a departure from the paper, exit 1);
- a reader refusal raised as an error class that is also a ValueError (it was reworded as "a NUL
  character");
- a newline in a file name (the refusal stays one line);
- a ``metrics.csv`` or ``run.json`` in ``train --out-dir`` that no run of repro wrote (training replaced
  it); a data set's split file that is there but is no file (a link to ``/dev/zero``: the run's dev
  evaluation was skipped as "not found", after training).

Every refusal: exit 2, one line naming the file, line, field or flag, nothing written or changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from repro.data.vocab import SharedVocab
from repro.errors import ConfigError, UsageError
from repro.files import strict_json
from repro.files.reader import inspect
from repro.model import Transformer, TransformerConfig
from repro.train.checkpoint import load_checkpoint, save_checkpoint
from repro.train.lineage import FIELDS
from tests.cli_run import refusal, run
from tests.test_hostile_input import claims_dir, record  # noqa: F401  (claims_dir: a fixture)

EN = ["A man rides a bike .", "Two dogs play in the snow .", "A woman reads a book .", "Children run on the beach ."]
DE = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch .",
      "Kinder rennen am Strand ."]
TINY = '{"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "attention": "fused"}'
HEADER = "step,loss,nll,lr,tokens_per_s,src_tokens,tgt_tokens,elapsed_s,epoch,dev_ppl,padding,dev_accuracy\n"


def write_multi30k(root: Path) -> Path:
    folder = root / "multi30k"
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        (folder / f"{split}.en").write_text("".join(EN[i % 4] + "\n" for i in range(n)))
        (folder / f"{split}.de").write_text("".join(DE[i % 4] + "\n" for i in range(n)))
    return root


def train_argv(data: Path, out: Path, steps: int = 2) -> list[str]:
    return ["train", "--recipe", "local", "--data-dir", str(data), "--out-dir", str(out), "--max-steps", str(steps),
            "--set", f"model_overrides={TINY}", "--set", "vocab_size=300", "--set", "tokens_per_batch=64",
            "--set", "max_tokens_per_device=64"]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A run of `repro train` (two steps of a tiny model on four sentences): its data and its folder."""
    from repro.cli import main

    root = tmp_path_factory.mktemp("fresh-run")
    data = write_multi30k(root / "data")
    assert main(train_argv(data, root / "run")) == 0
    return {"data": data, "run": root / "run"}


@pytest.fixture()
def run_copy(trained, tmp_path) -> Path:
    shutil.copytree(trained["run"], tmp_path / "run")
    return tmp_path / "run"


def _newest(run_dir: Path) -> Path:
    return sorted((run_dir / "checkpoints").glob("step_*.pt"))[-1]


# -- a resume whose saved training state does not fit ---------------------------------------------------

def _moments_of_another_shape(state):
    moments = next(iter(state["optimizer"]["state"].values()))
    moments["exp_avg"] = torch.zeros(7)


@pytest.mark.parametrize("damage, named", [
    (_moments_of_another_shape, "optimizer state 'exp_avg'"),
    (lambda s: s["rng"].update(torch=torch.zeros(5)), "field 'rng'"),
    (lambda s: s["rng"].update(python=[1, 2, 3]), "field 'rng'"),
    (lambda s: s.update(data={"epoch": -5, "offset": 0}), "field 'data'"),
])
def test_a_resume_state_that_does_not_fit_is_refused_naming_the_checkpoint(capsys, trained, run_copy, damage, named):
    newest = _newest(run_copy)
    state = load_checkpoint(newest)
    damage(state)
    torch.save(state, newest)
    before = tree(run_copy)
    rc, _, err = run(capsys, *train_argv(trained["data"], run_copy, steps=3))
    line = refusal(err)
    assert rc == 2 and str(newest) in line and named in line
    assert tree(run_copy) == before


# -- numbers no float holds ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ['{"measured": 1e400}', '{"steps": ' + "9" * 400 + "}", '[\n1,\n-1' + "0" * 320 + "]"])
def test_json_numbers_no_float_holds_are_refused_naming_the_source(text):
    with pytest.raises(UsageError, match=r"^f(:\d+)?: .* beyond the largest number a float holds"):
        strict_json.loads(text, "f")


def test_a_record_measuring_a_number_no_float_holds_is_one_line(tmp_path, capsys, claims_dir):
    path = tmp_path / "results" / "x.bleu" / "r.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record(measured=1)).replace('"measured": 1', '"measured": ' + "9" * 400))
    rc, _, err = run(capsys, "report", "--claims-dir", str(claims_dir), "--results", str(tmp_path / "results"),
                     "--out", str(tmp_path / "rep"), "--no-attention")
    assert rc == 2 and str(path) in refusal(err) and not (tmp_path / "rep").exists()


# -- checkpoints: crafted tensors, weights of another shape ------------------------------------------------

@pytest.fixture()
def checkpoint_dir(tmp_path: Path) -> Path:
    """A tiny model's checkpoint beside its vocabulary (no run around it) and a sentence to translate."""
    vocab = SharedVocab.train(EN + DE, 300)
    vocab.save(tmp_path / "vocab.json")
    cfg = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), n_layers=1, d_model=16, d_ff=32,
                            n_heads=2, max_positions=64)
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "model.pt", {"step": 1, "model": Transformer(cfg).state_dict(),
                                            "model_config": cfg.to_dict(), "lineage": dict.fromkeys(FIELDS)})
    (tmp_path / "in.en").write_text("A man reads a book .\n")
    return tmp_path


@pytest.mark.parametrize("change, named", [
    (lambda t: t.as_strided((10**6, 10**6), (0, 0)), "declares shape (1000000, 1000000)"),
    (lambda t: torch.zeros(3, 3), "size mismatch for src_embed.lut.weight"),
])
def test_weights_crafted_or_of_another_shape_are_named(capsys, checkpoint_dir, change, named):
    state = torch.load(checkpoint_dir / "model.pt", weights_only=True)
    state["model"]["src_embed.lut.weight"] = change(state["model"]["src_embed.lut.weight"])
    torch.save(state, checkpoint_dir / "model.pt")
    rc, _, err = run(capsys, "translate", "--checkpoint", str(checkpoint_dir / "model.pt"), "--greedy",
                     "--input", str(checkpoint_dir / "in.en"), "--output", str(checkpoint_dir / "out.de"))
    line = refusal(err)
    assert rc == 2 and str(checkpoint_dir / "model.pt") in line and named in line
    assert not (checkpoint_dir / "out.de").exists()


def test_translate_never_writes_over_the_vocabulary_it_finds_beside_the_checkpoint(capsys, checkpoint_dir):
    vocab = (checkpoint_dir / "vocab.json").read_bytes()
    rc, _, err = run(capsys, "translate", "--checkpoint", str(checkpoint_dir / "model.pt"), "--greedy",
                     "--input", str(checkpoint_dir / "in.en"), "--output", str(checkpoint_dir / "vocab.json"))
    assert rc == 2 and "one of this command's inputs" in refusal(err)
    assert (checkpoint_dir / "vocab.json").read_bytes() == vocab


# -- report: an attention sentence longer than the model; a metrics log that is not numbers ----------------

def _report(capsys, tmp_path, claims_dir, run_dir, *extra):
    results = tmp_path / "results" / "x.bleu"
    results.mkdir(parents=True, exist_ok=True)
    (results / "r.json").write_text(json.dumps(record()))
    return run(capsys, "report", "--claims-dir", str(claims_dir), "--results", str(tmp_path / "results"),
               "--out", str(tmp_path / "rep"), "--runs", str(run_dir), *extra)


def test_an_attention_sentence_longer_than_the_model_is_a_bad_flag(tmp_path, capsys, claims_dir, run_copy):
    rc, _, err = _report(capsys, tmp_path, claims_dir, run_copy, "--attention-sentence", "word " * 3000)
    line = refusal(err)
    assert rc == 2 and "--attention-sentence" in line and "positions" in line
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("rows, named", [
    ("2,abc,1,1e-4,1,1,1,1,0,,0,\n", ":2: field 'loss' is not a number"),
    ("1,2,3,4,5,6,7,8,9,10,11,12,13,14\n", ":2: 14 fields, but the header names 12"),
    ("2,inf,1,1e-4,1,1,1,1,0,,0,\n", ":2: field 'loss' is infinite"),
    ("-inf,2.5,1,1e-4,1,1,1,1,0,,0,\n", ":2: field 'step' is infinite"),
])
def test_a_metrics_log_that_is_not_numbers_is_refused_naming_its_line(tmp_path, capsys, claims_dir, run_copy,
                                                                      rows, named):
    (run_copy / "metrics.csv").write_text(HEADER + rows)
    rc, _, err = _report(capsys, tmp_path, claims_dir, run_copy, "--no-attention")
    line = refusal(err)
    assert rc == 2 and str(run_copy / "metrics.csv") in line and named in line
    assert not (tmp_path / "rep").exists()


def _checkpoint_field(field, key, value):
    def change(run_dir):
        newest = _newest(run_dir)
        state = load_checkpoint(newest)
        state[field][key] = value
        torch.save(state, newest)
    return change


@pytest.mark.parametrize("change, named", [
    (lambda r: (r / "config.json").write_text("[1, 2]"), "config.json: a training config must be a JSON object"),
    (lambda r: (r / "config.json").write_text('{"preset": 5}'), "config.json: training config field 'preset'"),
    (_checkpoint_field("train_config", "warmup_steps", "soon"), "field 'train_config': training config field 'warmup_steps'"),
    (_checkpoint_field("model_config", "d_model", "wide"), "field 'model_config': config field 'd_model'"),
])
def test_a_runs_configuration_the_report_draws_from_is_checked(tmp_path, capsys, claims_dir, run_copy, change, named):
    change(run_copy)
    rc, _, err = _report(capsys, tmp_path, claims_dir, run_copy, "--no-attention")
    assert rc == 2 and named in refusal(err)
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("part, key, value, named", [
    ("train", "warmup_steps", "soon", "run.json: field 'recipe'.train: training config field 'warmup_steps'"),
    ("train", "bogus", 1, "run.json: field 'recipe'.train: unknown training config field(s): bogus"),
    ("decode", "beam_size", -3, "run.json: field 'recipe'.decode: decoding setting 'beam_size'"),
])
def test_check_run_refuses_a_run_record_whose_recipe_no_run_takes(capsys, run_copy, part, key, value, named):
    record = json.loads((run_copy / "run.json").read_text())
    record["recipe"].setdefault(part, {})[key] = value
    (run_copy / "run.json").write_text(json.dumps(record))
    rc, _, err = run(capsys, "check", "--run", str(run_copy))
    assert rc == 2 and named in refusal(err)


# -- outputs: a run's own files, '-', a selftest inside a run ---------------------------------------------

@pytest.mark.parametrize("argv", [
    ["translate", "--checkpoint", "{ckpt}", "--input", "{run}/in.en", "--output", "{run}/vocab.json"],
    ["average", "{run}", "--last", "1", "-o", "{run}/run.json"],
    ["average", "{run}", "--last", "1", "-o", "{ckpt}"],
    ["check", "--only", "sec3.pe.layout", "--json", "{run}/metrics.csv"],
    ["evaluate", "--checkpoint", "{ckpt}", "--hypotheses", "{run}/evaluations/x.json"],
])
def test_an_output_flag_never_names_a_file_of_a_run(capsys, run_copy, argv):
    (run_copy / "in.en").write_text("A man .\n")
    before = tree(run_copy)
    argv = [a.format(run=run_copy, ckpt=_newest(run_copy)) for a in argv]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and "a file of the run in" in refusal(err)
    assert tree(run_copy) == before


@pytest.mark.parametrize("argv", [
    ["check", "--only", "sec3.pe.layout", "--json", "-"],
    ["average", ".", "--last", "1", "-o", "-"],
    ["report", "--out", "-"],
])
def test_dash_is_refused_where_standard_output_is_not_an_output(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and "'-'" in refusal(err)
    assert list(tmp_path.iterdir()) == []


def test_selftest_refuses_a_folder_inside_another_run(capsys, run_copy):
    before = tree(run_copy)
    rc, _, err = run(capsys, "selftest", "--out-dir", str(run_copy / "checkpoints" / "st"), "--stages", "claims",
                     "--quick")
    assert rc == 2 and "another run's folder" in refusal(err)
    assert tree(run_copy) == before


# -- train: a user's files in the run folder, a split file that is no file --------------------------------

@pytest.mark.parametrize("name, content", [
    ("metrics.csv", "my,own,spreadsheet\n1,2,3\n"),
    ("run.json", '{"my": "notes"}'),
    ("run.json", "notes, not JSON"),
])
def test_train_never_replaces_a_users_file_of_a_runs_name(tmp_path, capsys, trained, name, content):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text(content)
    rc, _, err = run(capsys, *train_argv(trained["data"], out))
    line = refusal(err)
    assert rc == 2 and str(out / name) in line and "not a" in line
    assert tree(out) == {name: content.encode()}


def test_a_split_file_that_is_no_file_is_refused_before_training(tmp_path, capsys, trained):
    data = tmp_path / "data"
    shutil.copytree(trained["data"], data)
    (data / "multi30k" / "val.de").unlink()
    (data / "multi30k" / "val.de").symlink_to("/dev/zero")
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "out"))
    line = refusal(err)
    assert rc == 2 and str(data / "multi30k" / "val.de") in line and "character device" in line
    assert not (tmp_path / "out" / "checkpoints").exists()
    rc, _, err = run(capsys, "data", "--data-dir", str(data), "show", "multi30k-en-de")
    assert rc == 2 and "character device" in refusal(err)


# -- the reader and the one line ---------------------------------------------------------------------------

def test_a_refusal_raised_as_a_value_error_class_keeps_its_reason(tmp_path, capsys):
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        inspect(tmp_path, "parameter file", error=ConfigError)
    (tmp_path / "g").write_text("(S (X a))\n")
    rc, _, err = run(capsys, "evalb", "-p", str(tmp_path), str(tmp_path / "g"), str(tmp_path / "g"))
    assert rc == 2 and "is a directory" in refusal(err)


def test_a_newline_in_a_name_keeps_the_refusal_on_one_line(tmp_path, capsys):
    (tmp_path / "ref").write_text("a b\n")
    rc, _, err = run(capsys, "bleu", str(tmp_path / "h\nx"), str(tmp_path / "ref"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "h\\nx" in err
