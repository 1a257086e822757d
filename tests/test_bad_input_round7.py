"""Bad inputs, round 7: fresh hostile inputs through the CLI in-process, one class each. Each was exit 0
on bad input, a traceback, a half-truth ("does not exist", "no checkpoints") or an input overwritten,
before the mechanism below it was fixed:

- numbers written in other than ASCII digits (``1_0``, ``١٠``, ``１０``, ``²``) that Python's ``int`` and
  ``float`` take: integer and real flags, the environment variables read as numbers, a metrics log's
  columns (``-0`` as a step too), checkpoint file names and ``cuda:N``: :mod:`repro.numerals`;
- ``--only ""`` (every claim ran), ``--rows base,base`` / ``base,,A-h1`` (the repeat or the gap dropped
  without a word) and ``--stages claims,claims``: :func:`repro.argtypes.claim_prefix`, :func:`~repro.argtypes.name_list`;
- a reference file, or an input to translate, of blank lines only (every hypothesis scored 0; blank
  sentences translated): :func:`repro.data.text_lines.with_words`;
- an output named through a folder that does not exist (``new/../in.en``): the one writer wrote it as
  ``in.en``, over the input the command read (:func:`repro.paths.not_an_input` took the kernel's meaning);
- a file where a run's ``checkpoints/`` or ``evaluations/`` folder goes (read as "none": ``check --run``
  exit 0): :func:`repro.files.reader.folder_present`;
- a data set whose target language Moses has no tokenization for (``test.zz``): tokenized as English
  under a signature naming ``zz`` after the whole decode; now refused before any work, as ``bleu --lang``;
- a loop of symbolic links given as a folder (``--claims-dir``, ``$REPRO_CLAIMS_DIR``, ``--results``):
  "does not exist";
- a zero-width space or a line separator in a cluster profile's field or a job name (text a job script
  carries): only ASCII control characters were refused;
- a JSON escape of half a surrogate pair (``"\\ud800"``) in a config or ``--set`` value: a traceback where
  it reached a path (:mod:`repro.files.strict_json`);
- ``train --data-dir data`` (relative): recorded as given, so ``evaluate`` and ``check --run`` from another
  folder looked for their own ``./data``.

Every refusal: exit 2, one line naming the file, line, field, flag or variable; nothing written or changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repro.environment import env_int
from repro.errors import UsageError
from repro.train.checkpoint import list_checkpoints
from tests.cli_run import refusal, run
from tests.test_bad_input_fresh import trained, run_copy, train_argv  # noqa: F401  (fixtures)
from tests.test_bad_input_round5 import tree

REPO = Path(__file__).resolve().parents[1]


# -- numbers in other than ASCII digits ------------------------------------------------------------------

FLAGS = [
    (["train", "--max-steps", "1_0", "--print-config"], "--max-steps"),
    (["train", "--threads", "١", "--print-config"], "--threads"),
    (["translate", "--checkpoint", __file__, "--beam", "४"], "--beam"),
    (["translate", "--checkpoint", __file__, "--alpha", "0_5"], "--alpha"),
    (["translate", "--checkpoint", __file__, "--alpha", "٠.٥"], "--alpha"),
    (["bleu", "--confidence", "--confidence-n", "1_000", __file__, __file__], "--confidence-n"),
    (["selftest", "--budget", "1_0"], "--budget"),
    (["submit", "smoke", "--cluster", "local", "--dry-run", "--timeout-min", "１０"], "--timeout-min"),
    (["check", "--device", "cuda:١"], "--device"),
]


@pytest.mark.parametrize("argv, flag", FLAGS, ids=[f"{a[0]} {f} {a[a.index(f) + 1]}" for a, f in FLAGS])
def test_a_number_flag_takes_ascii_digits_only(capsys, argv, flag):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and f"argument {flag}" in refusal(err)


@pytest.mark.parametrize("name, value", [("LOCAL_RANK", "١"), ("MASTER_PORT", "２９５００"), ("SLURM_LOCALID", "1_0")])
def test_an_environment_number_takes_ascii_digits_only(name, value):
    with pytest.raises(UsageError, match=f"environment variable {name}: must be an integer in ASCII digits"):
        env_int(name, environ={name: value})


def test_a_sacrebleu_seed_of_other_digits_is_refused_before_any_score(tmp_path, capsys, monkeypatch):
    (tmp_path / "ref").write_text("a b c d e\n")
    monkeypatch.setenv("SACREBLEU_SEED", "1_2")   # sacreBLEU would read 12, and the output say "seed 1_2"
    rc, out, err = run(capsys, "bleu", "--confidence", "--confidence-n", "10", str(tmp_path / "ref"), str(tmp_path / "ref"))
    assert rc == 2 and out == "" and "SACREBLEU_SEED" in refusal(err)


@pytest.mark.parametrize("step", ["1_0", "٢", "-0"])
def test_a_metrics_log_step_of_other_digits_is_refused_by_check_run(capsys, run_copy, step):
    log = run_copy / "metrics.csv"
    log.write_text(log.read_text().replace("\n2,", f"\n{step},", 1))
    rc, out, err = run(capsys, "check", "--run", str(run_copy))
    line = refusal(err)
    assert rc == 2 and out == "" and f"{log}:2: field 'step'" in line


def test_a_metrics_log_step_int_cannot_read_is_refused_on_resume(capsys, trained, run_copy):
    log = run_copy / "metrics.csv"
    log.write_text(log.read_text().replace("\n2,", "\n²,", 1))   # str.isdigit takes it; int() raised ValueError
    before = tree(run_copy / "checkpoints")
    rc, _, err = run(capsys, *train_argv(trained["data"], run_copy, steps=3))
    assert rc == 2 and f"{log}:2: field 'step'" in refusal(err)
    assert tree(run_copy / "checkpoints") == before


def test_a_checkpoint_named_in_other_digits_is_no_checkpoint(run_copy):
    newest = list_checkpoints(run_copy)[-1]
    shutil.copy(newest, newest.with_name("step_٠٠٠٠٠٠٠٩.pt"))   # \d matched it: "step 9", the newest
    assert list_checkpoints(run_copy) == [newest]


# -- selections that select everything, or drop a repeat ---------------------------------------------------

@pytest.mark.parametrize("argv", [["check", "--only", ""], ["check", "--only", "sec3", "--only", " "],
                                  ["audit", "--only", "", "repro.audit.repro_adapter:adapter"]])
def test_an_empty_claim_prefix_is_refused(tmp_path, capsys, argv):
    rc, out, err = run(capsys, *argv, "--json", str(tmp_path / "out.json"))
    assert rc == 2 and out == "" and "argument --only" in refusal(err)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("argv, flag", [
    (["submit", "table3", "--scale", "small", "--cluster", "local", "--dry-run", "--rows", "base,base"], "--rows"),
    (["submit", "table3", "--scale", "small", "--cluster", "local", "--dry-run", "--rows", "base,,A-h1"], "--rows"),
    (["reproduce", "--pipeline", "table3-small", "--rows", "A-h1, A-h1"], "--rows"),
    (["selftest", "--stages", "claims,claims"], "--stages"),
])
def test_a_name_list_with_a_repeat_or_a_gap_is_refused(tmp_path, capsys, argv, flag):
    folder = "--state-dir" if argv[0] == "submit" else "--out-dir"
    rc, out, err = run(capsys, *argv, folder, str(tmp_path / "out"))
    assert rc == 2 and out == "" and f"argument {flag}" in refusal(err)
    assert not (tmp_path / "out").exists()


# -- text without words -------------------------------------------------------------------------------------

@pytest.mark.parametrize("flags", [[], ["--protocol", "paper", "--confidence", "--confidence-n", "10"]])
def test_a_reference_of_blank_lines_is_refused_naming_it(tmp_path, capsys, flags):
    (tmp_path / "hyp").write_text("a b c d e\nf g h i j\n")
    (tmp_path / "ref").write_text("\n \t\n")
    rc, out, err = run(capsys, "bleu", *flags, str(tmp_path / "hyp"), str(tmp_path / "ref"))
    assert rc == 2 and out == "" and f"{tmp_path / 'ref'}: the reference file holds no words" in refusal(err)
    rc, out, _ = run(capsys, "bleu", *flags, str(tmp_path / "ref"), str(tmp_path / "hyp"))   # a model's blank output
    assert rc == 0 and "BLEU = 0.00" in out


def test_an_input_to_translate_of_blank_lines_is_refused(tmp_path, capsys, run_copy):
    (tmp_path / "in.en").write_text("\n\n")
    rc, _, err = run(capsys, "translate", "--checkpoint", str(list_checkpoints(run_copy)[-1]), "--greedy",
                     "--input", str(tmp_path / "in.en"), "--output", str(tmp_path / "out.de"))
    assert rc == 2 and "the input to translate holds no words" in refusal(err)
    assert not (tmp_path / "out.de").exists()


# -- an output named through a folder that is not there --------------------------------------------------------

def test_an_output_named_through_a_missing_folder_never_replaces_the_input(tmp_path, capsys, run_copy):
    source = tmp_path / "in.en"
    source.write_text("A man rides a bike .\n")
    rc, _, err = run(capsys, "translate", "--checkpoint", str(list_checkpoints(run_copy)[-1]), "--greedy",
                     "--input", str(source), "--output", str(tmp_path / "new" / ".." / "in.en"))
    assert rc == 2 and f"is {source}, one of this command's inputs" in refusal(err)
    assert source.read_text() == "A man rides a bike .\n" and not (tmp_path / "new").exists()


# -- a file where a run's folder goes ---------------------------------------------------------------------------

@pytest.mark.parametrize("folder", ["checkpoints", "evaluations"])
def test_a_file_where_a_runs_folder_goes_is_refused(tmp_path, capsys, run_copy, folder):
    shutil.rmtree(run_copy / folder)
    (run_copy / folder).write_text("x")
    rc, out, err = run(capsys, "check", "--run", str(run_copy), "--json", str(tmp_path / "out.json"))
    assert rc == 2 and out == "" and f"{run_copy / folder}: " in refusal(err) and "is not a directory" in refusal(err)
    assert not (tmp_path / "out.json").exists()


# -- a language that arrives in a file name ------------------------------------------------------------------------

def test_a_data_set_whose_target_language_moses_lacks_is_refused_before_decoding(tmp_path, capsys, trained, run_copy):
    data = tmp_path / "data" / "zzset"
    data.mkdir(parents=True)
    for path in (trained["data"] / "multi30k").iterdir():
        shutil.copy(path, data / path.name.replace(".de", ".zz").replace("test_2016_flickr", "test"))
    rc, out, err = run(capsys, "evaluate", "--checkpoint", str(list_checkpoints(run_copy)[-1]), "--greedy",
                       "--data-dir", str(tmp_path / "data"), "--dataset", "zzset", "--no-record",
                       "--hypotheses", str(tmp_path / "hyp.zz"))
    line = refusal(err)
    assert rc == 2 and out == "" and str(data / "test.zz") in line and "target language 'zz'" in line
    assert not (tmp_path / "hyp.zz").exists()


# -- a loop of links given as a folder --------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["--claims-dir", "$REPRO_CLAIMS_DIR", "--results"])
def test_a_loop_of_links_as_a_folder_is_named_as_one(tmp_path, capsys, monkeypatch, how):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    argv = {"--claims-dir": ["claims", "--claims-dir", str(loop), "list"], "$REPRO_CLAIMS_DIR": ["claims", "list"],
            "--results": ["report", "--results", str(loop), "--out", str(tmp_path / "rep"), "--no-attention"]}[how]
    monkeypatch.setenv("REPRO_CLAIMS_DIR", str(loop)) if how == "$REPRO_CLAIMS_DIR" else None
    rc, out, err = run(capsys, *argv)
    line = refusal(err)
    assert rc == 2 and out == "" and str(loop) in line and "symbolic links" in line and "does not exist" not in line
    assert not (tmp_path / "rep").exists()


# -- unprintable text bound for a job script ------------------------------------------------------------------------------

def test_a_zero_width_space_in_a_cluster_profile_is_refused(tmp_path, capsys):
    profile = tmp_path / "pasted.toml"
    profile.write_text((REPO / "slurm" / "local.toml").read_text().replace('partition = "local"',
                                                                          'partition = "local\u200b"'))
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", str(profile), "--dry-run", "--state-dir",
                       str(tmp_path / "state"))
    assert rc == 2 and out == "" and str(profile) in refusal(err) and "'partition'" in refusal(err)


def test_a_line_separator_in_a_job_name_is_refused(capsys):
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", "local", "--dry-run", "--job-name", "x\u2028y")
    assert rc == 2 and out == "" and "argument --job-name" in refusal(err)


# -- half a character in JSON ------------------------------------------------------------------------------------------------

def test_a_lone_surrogate_escape_in_a_json_config_is_refused_naming_its_line(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text('{\n"vocab_size": 300,\n"dataset": "\\ud800"\n}\n')   # decoded, it is no text a path can hold
    rc, out, err = run(capsys, "train", "--config", str(config), "--print-config")
    assert rc == 2 and out == "" and f"{config}:3: \\ud800 is half of a UTF-16 surrogate pair" in refusal(err)


def test_a_lone_surrogate_escape_in_a_set_value_is_no_traceback(tmp_path, capsys, trained):
    rc, _, err = run(capsys, *train_argv(trained["data"], tmp_path / "run", steps=1), "--set", 'dataset="\\ud800"')
    assert rc == 2 and "unknown dataset" in refusal(err) and not (tmp_path / "run").exists()


# -- a relative data folder, read again from another folder --------------------------------------------------------------------

def test_a_relative_data_folder_is_recorded_so_another_folder_finds_it(tmp_path, capsys, monkeypatch, trained):
    monkeypatch.chdir(trained["data"].parent)   # repro train --data-dir data: the run recorded "data"
    argv = train_argv(Path(trained["data"].name), tmp_path / "run", steps=1)
    assert run(capsys, *argv)[0] == 0
    monkeypatch.chdir(tmp_path)   # evaluate (and check --run) from elsewhere looked for ./data
    newest = list_checkpoints(tmp_path / "run")[-1]
    rc, out, err = run(capsys, "evaluate", "--checkpoint", str(newest), "--greedy", "--no-record", "--ppl-split", "none")
    assert rc == 0 and "error" not in err, err
