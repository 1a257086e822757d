"""Bad inputs, round 6: fresh hostile inputs through the CLI in-process, one class each. Each was a
traceback, exit 0 on bad input, a half-truth ("not found") or work done and left behind before the
mechanism below it was fixed:

- checkpoint tensors repro never writes (integer, boolean or complex weights, a sparse or a ``meta``
  tensor): cast into the model without a word, or a traceback; and bytes of a checkpoint that fail the
  CRC-32 its archive records (torch does not check them: a flipped byte loaded as a wrong weight):
  the checkpoint reader and the one reader (:func:`repro.files.reader.load_torch`);
- a folder (or a loop of links) where a run's file goes (``metrics.csv``, ``vocab.json``, ``run.json``,
  ``config.json``): read as "not found" by ``check --run`` and ``report --runs`` (exit 0; its attention
  maps "not drawn"), beside a checkpoint by ``translate``, and by ``train`` only after training:
  :func:`repro.files.reader.present`;
- ``report --attention-sentence`` without words (an empty one skipped the figure, exit 0; a blank one
  drew the map of a lone end-of-sentence);
- a metrics log naming a column twice (one of the two read without a word);
- an EVALB parameter file whose integers Python reads and evalb.c's ``atoi`` does not (``1_0``, other
  scripts' digits), beyond a C int, or a negative count (``--max-error -1`` is refused);
- an adapter module or factory of ``repro audit`` that raises KeyboardInterrupt (exit 130 as if the
  user had pressed Ctrl-C; SystemExit was already the target's error);
- a dev split whose files are unaligned (met after training, exit 2 with the run written), and a
  corpus none of whose pairs fits ``max_len`` (refused after its folder and vocabulary were written);
- a resume from a checkpoint whose ``step`` is not the update its file is named for (it went on from
  update 999, exit 0), and a session that runs no update (``"final_loss": NaN`` in its JSON summary);
- ``MASTER_PORT`` above 65535; a cluster profile's counts beyond SLURM's 32 bits (``nodes = 10**20``
  passed a dry run);
- a folder inside a claim's folder of a results store (one named like a record, passed over).

Every refusal: exit 2, one line naming the file, line, field, tensor or variable; nothing written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from repro.claims.loader import default_claims_dir
from repro.cluster.rendezvous import find_place
from repro.errors import ConfigError, UsageError
from repro.eval.evalb_params import parse_prm_text
from tests.cli_run import refusal, run
from tests.test_bad_input_fresh import (checkpoint_dir, run_copy, trained, train_argv,  # noqa: F401  (fixtures)
                                        write_multi30k)
from tests.test_bad_input_round5 import tree


# -- checkpoint tensors repro never writes; bytes that fail their CRC-32 -----------------------------------

@pytest.mark.parametrize("change, named", [
    (lambda w: w.to(torch.int64), "of dtype int64, not floating point"),
    (lambda w: w.to(torch.bool), "of dtype bool, not floating point"),
    (lambda w: w.to(torch.complex64) * complex("nan"), "of dtype complex64, not of real numbers"),
    (lambda w: w.to_sparse(), "a sparse_coo tensor, not a dense one"),
    (lambda w: w.to("meta"), "a meta tensor"),
])
def test_a_checkpoint_tensor_of_a_kind_repro_never_writes_is_named(capsys, checkpoint_dir, change, named):
    state = torch.load(checkpoint_dir / "model.pt", weights_only=True)
    state["model"]["src_embed.lut.weight"] = change(state["model"]["src_embed.lut.weight"])
    torch.save(state, checkpoint_dir / "model.pt")
    rc, _, err = run(capsys, "translate", "--checkpoint", str(checkpoint_dir / "model.pt"), "--greedy",
                     "--input", str(checkpoint_dir / "in.en"), "--output", str(checkpoint_dir / "out.de"))
    line = refusal(err)
    assert rc == 2 and str(checkpoint_dir / "model.pt") in line and "'model.src_embed.lut.weight'" in line
    assert named in line and not (checkpoint_dir / "out.de").exists()


def test_a_checkpoint_whose_bytes_fail_their_crc_is_refused(capsys, checkpoint_dir):
    path = checkpoint_dir / "model.pt"
    data = bytearray(path.read_bytes())
    weight = torch.load(path, weights_only=True)["model"]["src_embed.lut.weight"]
    at = bytes(data).find(weight.numpy().tobytes()[:64])   # inside the stored weight: torch would load it
    assert at > 0
    data[at + 8] ^= 0x40
    path.write_bytes(bytes(data))
    rc, _, err = run(capsys, "translate", "--checkpoint", str(path), "--greedy",
                     "--input", str(checkpoint_dir / "in.en"), "--output", str(checkpoint_dir / "out.de"))
    line = refusal(err)
    assert rc == 2 and str(path) in line and "corrupt" in line and "CRC-32" in line
    assert not (checkpoint_dir / "out.de").exists()


# -- a folder where a run's file goes ----------------------------------------------------------------------

def _folder_for(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("name", ["metrics.csv", "vocab.json", "run.json"])
def test_check_run_names_a_folder_where_a_runs_file_goes(capsys, run_copy, name):
    _folder_for(run_copy / name)
    rc, out, err = run(capsys, "check", "--run", str(run_copy))
    line = refusal(err)
    assert rc == 2 and f"{run_copy / name}:" in line and "is a directory, not a file" in line and out == ""


@pytest.mark.parametrize("field, value", [("version", 1.0), ("steps", 6.0)])
def test_a_run_record_count_written_as_a_float_is_named(capsys, run_copy, field, value):
    """JSON Schema's "integer" takes 1.0; a format version or a count written as a float is not one of
    repro's records (left alone at an earlier stop: ``"version": 1.0`` passed)."""
    record = json.loads((run_copy / "run.json").read_text())
    record[field] = value
    (run_copy / "run.json").write_text(json.dumps(record))
    rc, out, err = run(capsys, "check", "--run", str(run_copy))
    line = refusal(err)
    assert rc == 2 and str(run_copy / "run.json") in line and f"'{field}'" in line and "integer" in line, line


@pytest.mark.parametrize("name", ["metrics.csv", "config.json"])
def test_report_runs_names_a_folder_where_a_runs_file_goes(tmp_path, capsys, run_copy, name):
    (run_copy / name).unlink(missing_ok=True)
    (run_copy / name).mkdir()
    (tmp_path / "results").mkdir()
    rc, _, err = run(capsys, "report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "rep"),
                     "--runs", str(run_copy), "--no-attention")
    assert rc == 2 and f"{run_copy / name}: " in refusal(err) and not (tmp_path / "rep").exists()


def test_report_names_a_folder_where_the_attention_maps_vocabulary_goes(tmp_path, capsys, run_copy):
    _folder_for(run_copy / "vocab.json")
    (tmp_path / "results").mkdir()
    rc, _, err = run(capsys, "report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "rep"),
                     "--runs", str(run_copy))
    assert rc == 2 and f"{run_copy / 'vocab.json'}: vocabulary is a directory" in refusal(err)
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("text", ["", "  \t "])
def test_an_attention_sentence_without_words_is_a_bad_flag(tmp_path, capsys, text):
    (tmp_path / "results").mkdir()
    rc, out, err = run(capsys, "report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "rep"),
                       "--attention-sentence", text)
    assert rc == 2 and "--attention-sentence: must hold a sentence" in refusal(err) and out == ""
    assert not (tmp_path / "rep").exists()


def test_translate_names_a_folder_beside_the_checkpoint_where_its_vocabulary_goes(tmp_path, capsys, run_copy):
    _folder_for(run_copy / "vocab.json")
    checkpoint = sorted((run_copy / "checkpoints").glob("step_*.pt"))[-1]
    (tmp_path / "in.en").write_text("A man reads a book .\n")
    rc, out, err = run(capsys, "translate", "--checkpoint", str(checkpoint), "--greedy", "--input", str(tmp_path / "in.en"))
    assert rc == 2 and f"{run_copy / 'vocab.json'}: vocabulary is a directory" in refusal(err) and out == ""


def test_train_refuses_a_folder_named_like_its_run_record_before_training(tmp_path, capsys):
    data = write_multi30k(tmp_path / "data")
    (tmp_path / "run" / "run.json").mkdir(parents=True)
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    assert rc == 2 and f"{tmp_path / 'run' / 'run.json'}: run record is a directory" in refusal(err)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["run.json"]   # nothing trained, nothing written


def test_a_metrics_log_naming_a_column_twice_is_refused(capsys, run_copy):
    log = run_copy / "metrics.csv"
    header, *rows = log.read_text().splitlines()
    log.write_text("\n".join([header + ",loss", *(row + ",1" for row in rows)]) + "\n")
    rc, _, err = run(capsys, "check", "--run", str(run_copy))
    assert rc == 2 and f"{log}:1: column 'loss' is named twice" in refusal(err)


def test_a_resume_from_a_checkpoint_named_for_another_update_is_refused(capsys, trained, run_copy):
    newest = sorted((run_copy / "checkpoints").glob("step_*.pt"))[-1]
    state = torch.load(newest, weights_only=True)
    state["step"] = 999
    torch.save(state, newest)
    before = tree(run_copy)
    rc, out, err = run(capsys, *train_argv(trained["data"], run_copy, steps=4))
    line = refusal(err)
    assert rc == 2 and str(newest) in line and "field 'step' is 999" in line and out == ""
    assert tree(run_copy) == before


def test_a_session_that_runs_no_update_prints_no_nan(capsys, trained, run_copy):
    rc, out, err = run(capsys, *train_argv(trained["data"], run_copy, steps=2))   # the run is at step 2 already
    summary = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the summary"))
    assert rc == 0 and summary["steps"] == 2 and summary["final_loss"] is None


# -- EVALB parameter files: integers as evalb.c reads them ---------------------------------------------------

@pytest.mark.parametrize("line, named", [
    ("MAX_ERROR 1_0", "needs an integer (ASCII digits)"),
    ("MAX_ERROR \u0661\u0660", "needs an integer (ASCII digits)"),
    ("CUTOFF_LEN -5", "must lie in 0 .. 2147483647"),
    ("MAX_ERROR -1", "must lie in 0 .. 2147483647"),
    ("DEBUG 99999999999999999999", "must lie in -2147483648 .. 2147483647"),
])
def test_an_evalb_parameter_evalb_would_read_otherwise_is_refused(tmp_path, capsys, line, named):
    (tmp_path / "p.prm").write_text(f"LABELED 1\n{line}\n")
    (tmp_path / "t").write_text("(S (NP (DT The) (NN cat)) (VP (VBD sat)))\n")
    rc, out, err = run(capsys, "evalb", "-p", str(tmp_path / "p.prm"), str(tmp_path / "t"), str(tmp_path / "t"))
    refused = refusal(err)
    assert rc == 2 and f"{tmp_path / 'p.prm'} line 2: " in refused and named in refused and out == ""
    assert parse_prm_text("MAX_ERROR +7\nCUTOFF_LEN 0\n").max_error == 7   # what evalb.c reads alike stays


# -- repro audit: a KeyboardInterrupt the target raises is its error -----------------------------------------

@pytest.mark.parametrize("body, named", [
    ("raise KeyboardInterrupt\n", "importing module"),
    ("def make():\n    raise KeyboardInterrupt\n", "calling make()"),
])
def test_an_adapter_raising_keyboard_interrupt_is_the_targets_error(tmp_path, capsys, monkeypatch, body, named):
    (tmp_path / "interrupting_adapter.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, _, err = run(capsys, "audit", "interrupting_adapter:make", "--only", "sec3.eq1")
    line = refusal(err)
    assert rc == 2 and "target 'interrupting_adapter:make'" in line and named in line and "KeyboardInterrupt" in line


# -- training data: the evaluated splits before training; nothing left when nothing fits -----------------------

def test_an_unaligned_dev_split_is_refused_before_training(tmp_path, capsys):
    data = write_multi30k(tmp_path / "data")
    with open(data / "multi30k" / "val.en", "a") as fh:
        fh.write("A line without a partner .\n")
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)
    assert rc == 2 and f"{data / 'multi30k' / 'val.en'}:5: line has no partner" in line
    assert not (tmp_path / "run").exists()


def test_a_corpus_with_no_pair_within_max_len_leaves_nothing_behind(tmp_path, capsys):
    data = write_multi30k(tmp_path / "data")
    argv = [*train_argv(data, tmp_path / "run", steps=1), "--set", "max_len=2"]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and "nothing is left to train on" in refusal(err)
    assert not (tmp_path / "run").exists()


# -- launcher variables and cluster profiles: what the system can hold ------------------------------------------

def test_a_master_port_no_tcp_port_is_refused_naming_it():
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "node1", "MASTER_PORT": "70000"}
    with pytest.raises(UsageError, match="environment variable MASTER_PORT: must be at most 65535, got 70000"):
        find_place(env)
    with pytest.raises(ConfigError, match="MASTER_PORT is empty"):
        find_place({**env, "MASTER_PORT": ""})
    assert find_place({**env, "MASTER_PORT": "65535"}).master_port == 65535


@pytest.mark.parametrize("field", ["nodes", "cpus_per_task", "mem_gb", "max_tokens_per_device"])
def test_a_profile_count_slurm_cannot_hold_is_refused(tmp_path, capsys, field):
    text = (Path(__file__).resolve().parents[1] / "slurm" / "local.toml").read_text()
    lines = [f"{field} = {10**20}" if line.startswith(f"{field} =") else line for line in text.splitlines()]
    (tmp_path / "huge.toml").write_text("\n".join(lines) + "\n")
    rc, out, err = run(capsys, "submit", "--cluster", str(tmp_path / "huge.toml"), "--dry-run", "table2-base-ende",
                       "--state-dir", str(tmp_path / "state"))
    line = refusal(err)
    assert rc == 2 and f"field '{field}' must be at most 4294967293" in line and out == ""
    assert not (tmp_path / "state").exists()


# -- a results store: a folder inside a claim's folder ------------------------------------------------------

@pytest.mark.parametrize("inner", ["other.json", "sub/deeper"])
def test_a_folder_inside_a_claims_folder_of_a_store_is_named(tmp_path, capsys, inner):
    store = tmp_path / "results"
    record = json.loads((default_claims_dir().parent / "reports" / "local" / "results" / "sec5.batch.by-length" /
                         "reproduce-local.json").read_text())
    (store / "sec5.batch.by-length").mkdir(parents=True)
    (store / "sec5.batch.by-length" / "reproduce-local.json").write_text(json.dumps(record))
    (store / "sec5.batch.by-length" / inner).mkdir(parents=True)
    before = tree(store)
    rc, _, err = run(capsys, "report", "--results", str(store), "--out", str(tmp_path / "rep"), "--no-attention")
    line = refusal(err)
    assert rc == 2 and str(store / "sec5.batch.by-length" / inner.split("/")[0]) in line and "a folder inside" in line
    assert not (tmp_path / "rep").exists() and tree(store) == before
    shutil.rmtree(store / "sec5.batch.by-length" / inner.split("/")[0])
    assert run(capsys, "report", "--results", str(store), "--out", str(tmp_path / "rep"), "--no-attention")[0] == 0
