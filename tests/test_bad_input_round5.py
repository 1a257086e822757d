"""Bad inputs, round 5: fresh hostile inputs through the CLI in-process, one class each. Each was a
traceback, exit 0 on bad input, a refusal that named no file or field, or an input overwritten,
before the mechanism below it was fixed:

- environment variables read as numbers (``LOCAL_RANK``, ``SLURM_LOCALID``, ``SACREBLEU_SEED``):
  one reader, :func:`repro.environment.env_int` (a ``ValueError`` traceback);
- ``bleu --lang`` a language Moses has no tokenization for (tokenized as English, exit 0, the
  signature naming the other language);
- an output where the command reads: ``check``/``audit --json`` naming a claims file of the claims
  folder (a claims file replaced by JSON), ``report --out`` or ``check --json`` in a results store
  (stray files that broke the next report): :func:`repro.paths.outside_inputs`;
- ``average --checkpoints`` naming one file twice (by any name: weighed twice in the mean);
- ``claims/statements.csv`` with a statement id given twice (counted twice), and an unknown claim
  named without the file's folder and line;
- ``$REPRO_CLAIMS_DIR`` naming a file ("does not exist");
- ``status --experiment`` naming no experiment ("no submissions", exit 0);
- a bad flag of an entry point ``repro bench NAME`` or ``repro diagnose NAME`` runs (argparse's
  usage, many lines, before the one-line refusal); a diagnosis whose PTB sample is missing (its
  run folder was created before the data was looked for);
- a job time limit (``submit --timeout-min``, a profile's ``time_limit_min``) SLURM cannot hold
  (``10**14`` minutes: accepted, exit 0 on ``--dry-run``).

Every refusal: exit 2, one line naming the file, line, field, flag or variable; nothing written or changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repro.claims.loader import default_claims_dir
from tests.cli_run import refusal, run
from tests.test_bad_input_fresh import checkpoint_dir, train_argv, write_multi30k  # noqa: F401  (a fixture)
from tests.test_hostile_input import claims_dir, record  # noqa: F401  (claims_dir: a fixture)


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- environment variables read as numbers ----------------------------------------------------------------

@pytest.mark.parametrize("name, value", [("LOCAL_RANK", "abc"), ("SLURM_LOCALID", "0x1"), ("LOCAL_RANK", "-1")])
def test_a_launcher_variable_that_is_no_rank_is_refused_naming_it(tmp_path, capsys, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    data = write_multi30k(tmp_path / "data")
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)
    assert rc == 2 and f"environment variable {name}" in line and value in line
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("value, named", [("abc", "must be an integer or 'none'"), ("-5", "at least 0")])
def test_a_sacrebleu_seed_it_cannot_seed_with_is_refused_before_any_score(tmp_path, capsys, monkeypatch, value, named):
    (tmp_path / "ref").write_text("a man rides a bike .\ntwo dogs .\n")
    monkeypatch.setenv("SACREBLEU_SEED", value)
    rc, out, err = run(capsys, "bleu", "--confidence", "--confidence-n", "10", str(tmp_path / "ref"), str(tmp_path / "ref"))
    line = refusal(err)
    assert rc == 2 and "SACREBLEU_SEED" in line and named in line and out == ""
    monkeypatch.setenv("SACREBLEU_SEED", "none")   # sacreBLEU's "no fixed seed" stays valid
    assert run(capsys, "bleu", "--confidence", "--confidence-n", "10", str(tmp_path / "ref"), str(tmp_path / "ref"))[0] == 0


# -- bleu --lang -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["zz", "DE", "../x"])
def test_a_language_moses_does_not_tokenize_is_a_bad_flag(tmp_path, capsys, lang):
    (tmp_path / "ref").write_text("Ein Mann fährt Fahrrad .\n")
    rc, out, err = run(capsys, "bleu", "--protocol", "paper", "--lang", lang, str(tmp_path / "ref"), str(tmp_path / "ref"))
    line = refusal(err)
    assert rc == 2 and "--lang" in line and repr(lang) in line and out == ""
    assert run(capsys, "bleu", "--protocol", "paper", "--lang", "de", str(tmp_path / "ref"), str(tmp_path / "ref"))[0] == 0


# -- an output inside a folder the command reads -------------------------------------------------------------

def _store(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    (results / "x.bleu").mkdir(parents=True)
    (results / "x.bleu" / "r.json").write_text(json.dumps(record()))
    return results


@pytest.mark.parametrize("argv", [
    ["check", "--claims-dir", "{claims}", "--json", "{claims}/x.toml"],
    ["check", "--claims-dir", "{claims}", "--json", "{claims}/new.toml"],
    ["check", "--claims-dir", "{claims}", "--json", "{claims}/statements.csv"],
    ["audit", "repro.audit.torch_adapter:adapter", "--claims-dir", "{claims}", "--json", "{claims}/x.toml"],
    ["check", "--claims-dir", "{claims}", "--results", "{results}", "--json", "{results}/x.bleu/out.json"],
    ["report", "--claims-dir", "{claims}", "--results", "{results}", "--out", "{results}", "--no-attention"],
    ["report", "--claims-dir", "{claims}", "--results", "{results}", "--out", "{results}/x.bleu", "--no-attention"],
])
def test_an_output_never_lands_in_a_folder_the_command_reads(tmp_path, capsys, claims_dir, argv):
    results = _store(tmp_path)
    before = tree(tmp_path)
    rc, _, err = run(capsys, *[a.format(claims=claims_dir, results=results) for a in argv])
    line = refusal(err)
    assert rc == 2 and "this command reads" in line
    assert tree(tmp_path) == before


def test_outputs_beside_the_inputs_are_still_written(tmp_path, capsys, claims_dir):
    results = _store(tmp_path)
    rc, _, _ = run(capsys, "report", "--claims-dir", str(claims_dir), "--results", str(results),
                   "--out", str(tmp_path / "rep"), "--no-attention")
    assert rc == 0 and (tmp_path / "rep" / "report.md").is_file()
    rc, _, _ = run(capsys, "check", "--claims-dir", str(claims_dir), "--results", str(results),
                   "--json", str(claims_dir / "records.json"))   # a claims folder's other files are not read
    assert rc in (0, 1) and (claims_dir / "records.json").is_file()


# -- average: one checkpoint twice --------------------------------------------------------------------------

@pytest.mark.parametrize("alias", [False, True])
def test_average_refuses_a_checkpoint_given_twice(capsys, checkpoint_dir, alias):
    model = checkpoint_dir / "model.pt"
    second = model
    if alias:
        second = checkpoint_dir / "alias.pt"
        second.symlink_to(model)
    rc, _, err = run(capsys, "average", "--checkpoints", str(model), str(second), "-o", str(checkpoint_dir / "avg.pt"),
                     "--allow-no-lineage")
    line = refusal(err)
    assert rc == 2 and str(second) in line and "given twice" in line
    assert not (checkpoint_dir / "avg.pt").exists()


# -- the claims folder: statements.csv, $REPRO_CLAIMS_DIR ------------------------------------------------------

@pytest.fixture()
def claims_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "claims"
    shutil.copytree(default_claims_dir(), folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.mark.parametrize("extra, named", [
    ("{first}", "given twice (first on line 2)"),
    (',3,"a statement without an id",sec3.eq1.scaled-dot-product,code path,', "field 'id' is empty"),
    ("S998,3,a statement,no.such.claim,code path,", "statement S998 names unknown claim(s) no.such.claim"),
])
def test_a_statements_file_is_checked_naming_its_line(capsys, claims_copy, extra, named):
    path = claims_copy / "statements.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, extra.format(first=lines[1])]) + "\n")
    rc, out, err = run(capsys, "claims", "--claims-dir", str(claims_copy), "coverage")
    line = refusal(err)
    assert rc == 2 and f"{path}:{len(lines) + 1}: " in line and named in line and out == ""


def test_a_claims_folder_from_the_environment_that_is_a_file_says_so(tmp_path, capsys, monkeypatch):
    (tmp_path / "claims.toml").write_text("")
    monkeypatch.setenv("REPRO_CLAIMS_DIR", str(tmp_path / "claims.toml"))
    rc, _, err = run(capsys, "claims", "list")
    assert rc == 2 and "claims directory ($REPRO_CLAIMS_DIR) is not a directory" in refusal(err)


# -- status --experiment -------------------------------------------------------------------------------------

def test_status_refuses_an_experiment_that_does_not_exist(tmp_path, capsys):
    rc, out, err = run(capsys, "status", "--state-dir", str(tmp_path), "--experiment", "table2-bse-ende")
    line = refusal(err)
    assert rc == 2 and "--experiment" in line and "table2-base-ende" in line and out == ""
    assert run(capsys, "status", "--state-dir", str(tmp_path), "--experiment", "table2-base-ende")[0] == 0


# -- the entry points repro bench and repro diagnose run: one line too ----------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["bench", "train_speed", "--steps", "0"], "--steps"),
    (["bench", "decode_speed", "--rounds", "x"], "--rounds"),
    (["diagnose", "parser-sanity", "--trees", "0"], "--trees"),
    (["diagnose", "parser-curve", "--sizes", "-3"], "--sizes"),
])
def test_an_entry_points_bad_flag_is_one_line(capsys, argv, flag):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and flag in err and "usage:" not in err


@pytest.mark.parametrize("name", ["parser-curve", "parser-sanity"])
def test_a_diagnosis_without_its_data_leaves_no_folder_behind(tmp_path, capsys, name):
    rc, _, err = run(capsys, "diagnose", name, "--data-dir", str(tmp_path / "no-data"), "--out-dir", str(tmp_path / "out"),
                     "--reports", str(tmp_path / "rep"))
    assert rc == 2 and "PTB sample not found" in refusal(err)
    assert sorted(tmp_path.iterdir()) == []


# -- submit: a job time limit SLURM cannot hold ---------------------------------------------------------------

def test_a_job_time_limit_slurm_cannot_hold_is_refused(tmp_path, capsys):
    from repro.cluster.profiles import profile_dir
    huge = str(2**40)
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", "local", "--dry-run", "--state-dir", str(tmp_path / "s"),
                       "--timeout-min", huge)
    assert rc == 2 and "--timeout-min" in refusal(err) and out == ""
    profile = tmp_path / "huge.toml"
    profile.write_text((profile_dir() / "local.toml").read_text().replace("time_limit_min = 60", f"time_limit_min = {huge}"))
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", str(profile), "--dry-run", "--state-dir", str(tmp_path / "s"))
    line = refusal(err)
    assert rc == 2 and str(profile) in line and "time_limit_min" in line and out == ""
    assert not (tmp_path / "s").exists()
