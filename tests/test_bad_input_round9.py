"""Bad inputs, round 9: fresh hostile inputs through the CLI in-process, one class each (the cases tried
are listed in ``docs/bad_input_round9.md``). Each was exit 0 on bad input, a verdict drawn from a file
that is not what it should be, or an output that broke the next read, before the mechanism below it
was fixed:

- an output inside a folder this command makes and later runs read (``check --json`` inside ``--store``,
  ``submit --state-dir`` equal to or inside ``--results-dir``): the folder did not exist yet, so it was
  not compared, and the next ``check``/``report`` of that store refused the stray file:
  :func:`repro.paths.outside_inputs`;
- a checkpoint whose ``model_config`` builds no model (``n_heads`` not dividing ``d_model``, a bool for
  ``d_model``): ``check --run`` drew ``fail`` verdicts from it (exit 0 or 1) where ``translate`` and
  ``report --runs`` refused it: :func:`repro.train.checkpoint.load_checkpoint`, the one checkpoint reader;
- a whole number written with a point (``d_model = 512.0``) where a claim's parameter, a checkpoint's
  ``step`` or a run record's count is an integer: JSON Schema counts ``512.0`` an integer, so it passed,
  and the checker raised ``TypeError`` out of ``torch.randn`` (status ``error``, exit 1) where ``"512"``
  was refused naming the field: :func:`repro.validation.problem`, the one validator;
- a metrics log whose last row a kill cut as it was written (no line end): the resume and ``check --run``
  leave such a row out, ``report --runs`` refused the run ("3 fields, but the header names 12
  columns"): :func:`repro.train.metrics_log.read_log`;
- a result record whose ``status`` is ``pass`` beside a value its claim does not take (BLEU 1.0 against
  "at least 30"): ``check`` passed it on the record's word (exit 0) where the report said it deviates;
  the claim decides: :func:`repro.checks.metric_results.result`;
- a line of a training split holding only invisible characters (a zero-width space, a word joiner, a
  soft hyphen), which ``str.strip`` keeps: trained on as a sentence, exit 0, where an empty line (or one
  of no-break spaces) is refused naming the file and line: :func:`repro.data.text_lines.blank`.

Every refusal: exit 2, one line naming the file, field or flag; nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from repro.data.text_lines import blank
from repro.results import Result, ResultStore
from repro.train.checkpoint import load_checkpoint
from tests.cli_run import refusal, run
from tests.metric_claim import claims_dir  # noqa: F401  (claims_dir: a fixture)
from tests.test_bad_input_fresh import run_copy, train_argv, trained, write_multi30k  # noqa: F401  (fixtures)
from tests.test_hostile_input import record

REPO = Path(__file__).resolve().parents[1]
PROFILE = str(REPO / "slurm" / "h100-x1.toml")


# -- an output inside a folder the command makes ------------------------------------------------------------

def test_check_json_inside_a_new_store_is_refused_before_any_claim(tmp_path, capsys):
    store = tmp_path / "store"
    rc, out, err = run(capsys, "check", "--only", "sec3.pe.layout", "--store", str(store),
                       "--json", str(store / "x.json"))
    line = refusal(err)
    assert rc == 2 and out == "" and str(store / "x.json") in line and "--store" in line
    assert not store.exists()


@pytest.mark.parametrize("state", ["results", "results/state"])
def test_submit_state_folder_in_its_results_store_is_refused(tmp_path, capsys, state):
    argv = ["submit", "smoke", "--dry-run", "--cluster", PROFILE, "--results-dir", str(tmp_path / "results"),
            "--state-dir", str(tmp_path / state)]
    rc, out, err = run(capsys, *argv)
    line = refusal(err)
    assert rc == 2 and out == "" and "--state-dir" in line and "--results-dir" in line
    assert list(tmp_path.iterdir()) == []


def test_submit_results_store_inside_its_state_folder_is_still_taken(tmp_path, capsys):
    rc, out, _ = run(capsys, "submit", "smoke", "--dry-run", "--cluster", PROFILE, "--state-dir", str(tmp_path / "s"),
                     "--results-dir", str(tmp_path / "s" / "results"))
    assert rc == 0 and "dry run" in out


# -- a checkpoint whose model configuration builds no model -------------------------------------------------

@pytest.mark.parametrize("change, named", [
    ({"n_heads": 3}, "must be divisible by 'n_heads' (3)"),
    ({"d_model": True}, "'d_model' must be a positive integer"),
    ({"d_mdoel": 16}, "unknown config field(s): d_mdoel"),
])
def test_a_checkpoint_whose_model_config_builds_no_model_is_refused_by_check_run(capsys, run_copy, change, named):
    newest = sorted((run_copy / "checkpoints").glob("step_*.pt"))[-1]
    state = load_checkpoint(newest)
    state["model_config"].update(change)
    torch.save(state, newest)
    rc, out, err = run(capsys, "check", "--run", str(run_copy))
    line = refusal(err)
    assert rc == 2 and out == "" and str(newest) in line and "field 'model_config'" in line and named in line


# -- a metrics log whose last row a kill cut --------------------------------------------------------------------

def test_report_runs_leaves_out_a_last_row_cut_as_it_was_written(tmp_path, capsys, run_copy):
    metrics = run_copy / "metrics.csv"
    whole = metrics.read_text()
    metrics.write_text(whole + "9,6.01,5.9")   # the process killed while it wrote the row of update 9
    (tmp_path / "results").mkdir()
    rc, out, err = run(capsys, "report", "--runs", str(run_copy), "--out", str(tmp_path / "out"), "--no-attention",
                       "--results", str(tmp_path / "results"))
    assert rc == 0 and "Traceback" not in err and (tmp_path / "out" / "report.json").exists(), err
    assert metrics.read_text() == whole + "9,6.01,5.9"   # read, never repaired by the report


def test_report_runs_still_refuses_a_whole_row_wider_than_its_header(tmp_path, capsys, run_copy):
    metrics = run_copy / "metrics.csv"
    metrics.write_text(metrics.read_text() + "9,6.01,5.9\n")
    (tmp_path / "results").mkdir()
    rc, out, err = run(capsys, "report", "--runs", str(run_copy), "--out", str(tmp_path / "out"), "--no-attention",
                       "--results", str(tmp_path / "results"))
    assert rc == 2 and f"{metrics}:" in refusal(err) and not (tmp_path / "out").exists()


# -- a whole number written with a point where an integer goes ----------------------------------------------

MULTIHEAD = """part = "x"

[[claim]]
id = "x.multihead"
source = "Section 3.2.2"
statement = "s"
kind = "complexity"
scale = "local"
checker = "attention.multihead_cost"
expected = 1.0
tolerance = { rel = 0.1 }
params = { d_model = D_MODEL, heads = 8, length = 64 }
"""


def test_a_claims_integer_parameter_written_with_a_point_is_refused_naming_the_field(tmp_path, capsys):
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "x.toml").write_text(MULTIHEAD.replace("D_MODEL", "512.0"))
    rc, out, err = run(capsys, "check", "--claims-dir", str(tmp_path / "claims"), "--results", str(tmp_path))
    line = refusal(err)
    assert rc == 2 and out == "" and str(tmp_path / "claims" / "x.toml") in line and "'params.d_model'" in line


def test_a_checkpoint_step_written_with_a_point_is_refused_by_translate(tmp_path, capsys, run_copy):
    newest = sorted((run_copy / "checkpoints").glob("step_*.pt"))[-1]
    state = load_checkpoint(newest)
    torch.save({**state, "step": float(state["step"])}, newest)
    (tmp_path / "in.en").write_text("A man rides a bike .\n")
    rc, out, err = run(capsys, "translate", "--checkpoint", str(newest), "--input", str(tmp_path / "in.en"),
                       "--output", str(tmp_path / "out.de"))
    assert rc == 2 and str(newest) in refusal(err) and "'step'" in refusal(err)
    assert not (tmp_path / "out.de").exists()


# -- a result record whose own word contradicts its value -------------------------------------------------------

@pytest.mark.parametrize("measured, status, rc, verdict", [
    (1.0, "pass", 1, "fail"),       # the record says pass; BLEU 1.0 is below the claim's 30
    (31.5, "pass", 0, "pass"),
    (31.5, None, 0, "pass"),
    (31.5, "fail", 1, "fail"),      # a job stores "fail" for a value that is no finite number: it stays one
])
def test_a_metric_records_status_never_passes_a_value_its_claim_does_not_take(tmp_path, capsys, claims_dir,
                                                                              measured, status, rc, verdict):
    store = ResultStore(tmp_path / "results")
    store.write(Result.from_dict(record(measured=measured, status=status)), "r")
    got, _, err = run(capsys, "check", "--claims-dir", str(claims_dir), "--results", str(tmp_path / "results"),
                      "--json", str(tmp_path / "out.json"))
    assert got == rc, err
    assert [r["status"] for r in json.loads((tmp_path / "out.json").read_text())] == [verdict]


# -- a sentence of invisible characters only ------------------------------------------------------------------

@pytest.mark.parametrize("invisible", ["\u200b", "\u2060", " \u00ad \u200b "])
def test_a_training_line_of_invisible_characters_is_an_empty_line(tmp_path, capsys, invisible):
    data = write_multi30k(tmp_path / "data")
    train_en = data / "multi30k" / "train.en"
    lines = train_en.read_text().splitlines()
    lines[2] = invisible
    train_en.write_text("\n".join(lines) + "\n")
    rc, out, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    assert rc == 2 and out == "" and f"{train_en}:3: empty line" in refusal(err)
    assert not (tmp_path / "run").exists()


def test_a_sentence_holding_an_invisible_character_beside_words_is_text():
    assert not blank("Ein\u00adMann fährt\u200b Fahrrad .") and blank(" \t\u200b\ufeff")
