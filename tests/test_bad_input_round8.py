"""Bad inputs, round 8: fresh hostile inputs through the CLI in-process, one class each (the cases tried
are listed in ``docs/bad_input_round8.md``). Each was exit 0 on bad input, a traceback, a refusal that
named no field, or a run folder left half-written, before the mechanism below it was fixed:

- ``--set model_overrides=`` a JSON value that is no object but is falsy (``[]``, ``0``, ``""``,
  ``null``, ``false``): read as "no overrides", the model the user gave overrides for silently dropped
  (a truthy one was refused): :meth:`repro.recipes.Recipe.replace`;
- a token count per update or per device (``tokens_per_batch``, ``max_tokens_per_device``) past what
  the update plan's arithmetic holds exactly (``10**30``): refused *after* the vocabulary and the encoded
  corpus were written, as "accumulation ... is more than needed" naming no field; now bounded in the
  training config (:data:`repro.limits.TOKENS`) before anything is written;
- an ``lr_scale`` whose Eq. 3 rate no float32 holds (``1e308``): a ``RuntimeError`` traceback out of
  Adam's first step; now bounded in the training config (:data:`repro.limits.LR_SCALE`);
- ``$REPRO_CLUSTER_STATE`` naming a file (``status``: "no submissions", exit 0) or a folder that does not
  exist (a typo read as "no submissions", as ``--state-dir`` is not): :func:`repro.cluster.ledger.default_state_dir`;
- a claim whose ``expected`` is a list where its checker measures one number, or the reverse: a
  ``fail`` verdict (the claim compared as unequal); now an error naming the claims file and the field;
- a full disk: under ``torch.save`` (torch's "unexpected pos" RuntimeError, a traceback), under the run
  lock's record or the metrics log's header ("a file: cannot write"), and under an output in a new
  folder (the empty folder left): :func:`repro.train.checkpoint.save_checkpoint`, the writer;
- one file as both sides of a parallel corpus (trained on each sentence paired with itself, exit 0):
  :func:`repro.data.corpus.read_parallel`;
- whitespace in a cluster profile's SLURM names (passed ``--dry-run``; sbatch refused the job);
- a ``statements.csv`` of a header alone ("0 checkable statements", exit 0);
- ``check --jobs 100000`` (a spawned torch process per claim, hundreds, until memory ran out);
- an empty path or name where the flag's absence has a default (``--results ""``, ``--out ""``,
  ``--dataset ""``, ``--experiment ""``): the default taken, or ``Path("")``, the working folder.

Every refusal: exit 2 (a claim's error: status ``error``), one line naming the file, field, flag or
variable; nothing written.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli_run import refusal, run
from tests.test_bad_input_fresh import train_argv, write_multi30k

REPO = Path(__file__).resolve().parents[1]
TINY = '{"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "attention": "fused"}'


def _without(argv: list[str], field: str) -> list[str]:
    """``argv`` without its ``--set FIELD=...`` pair."""
    out: list[str] = []
    for i, item in enumerate(argv):
        if item == "--set" and argv[i + 1].startswith(f"{field}="):
            continue
        if i and argv[i - 1] == "--set" and item.startswith(f"{field}="):
            continue
        out.append(item)
    return out


# -- a model_overrides that is no object ------------------------------------------------------------------

@pytest.mark.parametrize("value", ["[]", "0", '""', "null", "false", "[1]"])
def test_model_overrides_that_is_no_object_is_refused(capsys, value):
    rc, out, err = run(capsys, "train", "--set", f"model_overrides={value}", "--print-config")
    assert rc == 2 and out == "" and "field 'model_overrides' must be a JSON object" in refusal(err)


def test_model_overrides_as_an_object_still_applies(capsys):
    rc, out, _ = run(capsys, "train", "--set", f"model_overrides={TINY}", "--print-config")
    assert rc == 0 and json.loads(out)["model_overrides"]["d_model"] == 16


# -- token counts and learning rates past what the arithmetic holds -----------------------------------------

@pytest.mark.parametrize("field, value, named", [
    ("tokens_per_batch", 10**30, "training config field 'tokens_per_batch' must be at most"),
    ("max_tokens_per_device", 10**23, "training config field 'max_tokens_per_device' must be at most"),
    ("lr_scale", 1e308, "training config field 'lr_scale' must be at most"),
])
def test_a_training_number_past_its_bound_is_refused_before_anything_is_written(tmp_path, capsys, field, value, named):
    data = write_multi30k(tmp_path / "data")
    argv = [*_without(train_argv(data, tmp_path / "run", steps=1), field), "--set", f"{field}={value!r}"]
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and named in refusal(err)
    assert not (tmp_path / "run").exists()


def test_the_bounds_leave_the_papers_settings_alone(capsys):
    rc, out, _ = run(capsys, "train", "--recipe", "big", "--set", "tokens_per_batch=25000", "--set", "lr_scale=2.0",
                     "--print-config")
    assert rc == 0 and json.loads(out)["lr_scale"] == 2.0


# -- the cluster's state folder from the environment ----------------------------------------------------------

def test_a_state_folder_from_the_environment_that_is_a_file_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("REPRO_CLUSTER_STATE", str(tmp_path / "afile"))
    for argv in (["status"], ["submit", "smoke", "--cluster", "local", "--dry-run"]):
        rc, out, err = run(capsys, *argv)
        line = refusal(err)
        assert rc == 2 and out == "" and str(tmp_path / "afile") in line and "$REPRO_CLUSTER_STATE" in line


def test_status_refuses_a_state_folder_from_the_environment_that_does_not_exist(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REPRO_CLUSTER_STATE", str(tmp_path / "typo"))
    rc, out, err = run(capsys, "status")
    assert rc == 2 and out == "" and f"{tmp_path / 'typo'}: " in refusal(err) and "does not exist" in refusal(err)
    assert not (tmp_path / "typo").exists()


# -- a claim's expected value of another shape than its measurement ---------------------------------------------

CLAIM = '''part = "x"

[[claim]]
id = "sec3.multihead.cost"
source = "Section 3.2.2"
statement = "s"
kind = "complexity"
scale = "local"
checker = "attention.multihead_cost"
expected = EXPECTED
tolerance = { rel = 0.1 }
unit = "FLOPs(h=8) / FLOPs(h=1)"
params = { d_model = 512, heads = 8, length = 64 }
'''


@pytest.mark.parametrize("expected", ["[1.0]", "[1.0, 1.0]"])
def test_an_expected_list_for_a_measured_number_is_an_error_not_a_fail(tmp_path, capsys, expected):
    (tmp_path / "claims").mkdir()
    (tmp_path / "store").mkdir()   # an empty results store: the project's records are of the paper's claims
    (tmp_path / "claims" / "a.toml").write_text(CLAIM.replace("EXPECTED", expected))
    rc, _, _ = run(capsys, "check", "--claims-dir", str(tmp_path / "claims"), "--results", str(tmp_path / "store"),
                   "--json", str(tmp_path / "out.json"))
    record = json.loads((tmp_path / "out.json").read_text())[0]
    assert rc == 1 and record["status"] == "error", record
    assert str(tmp_path / "claims" / "a.toml") in record["detail"] and "'expected'" in record["detail"]
    (tmp_path / "claims" / "a.toml").write_text(CLAIM.replace("EXPECTED", "1.0"))
    assert run(capsys, "check", "--claims-dir", str(tmp_path / "claims"), "--results", str(tmp_path / "store"))[0] == 0


def test_one_paper_number_against_a_measured_list_is_compared_value_by_value():
    """A checker that lists its values where they disagree (one per session, checkpoint or run) is
    compared with the paper's one number value by value: a departure reads ``fail``, never ``error``
    (a list in the claims file against one measured number stays an error, above)."""
    from repro.claims.outcome import Measurement
    from repro.checks import select_claims
    from repro.claims import Outcome
    from repro.claims.runner import run_claim
    claim = next(c for c in select_claims() if c.id == "sec5.warmup-steps")
    claim = dataclasses.replace(claim, expected=4000, tolerance={}, inconsistency=None)

    def verdict(value):
        return run_claim(claim, lambda _c, _ctx: Measurement(value=value), target=None).status

    assert verdict([4000, 4000]) is Outcome.PASS
    assert verdict([4000, 2]) is Outcome.FAIL
    assert verdict([]) is Outcome.FAIL
    assert verdict([4000, float("nan")]) is Outcome.FAIL
    assert verdict([4000, "4000"]) is Outcome.FAIL


# -- a full disk under a checkpoint ------------------------------------------------------------------------------

class _FullDisk(io.FileIO):
    """A file on a disk that fills after ``room`` bytes (ENOSPC, as a full file system raises it)."""

    room = 64

    def write(self, data) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def _fill_disk_under(folder: Path, monkeypatch) -> None:
    """Files written (or appended to) under ``folder``, or at that path, meet a full disk (every other
    file is written as ever)."""
    real = os.fdopen

    def fdopen(fd, mode="r", *args, **kwargs):
        if ("w" in mode or "a" in mode) and os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            binary = io.BufferedWriter(_FullDisk(fd, "w"))
            return binary if "b" in mode else io.TextIOWrapper(binary, encoding=kwargs.get("encoding"),
                                                                newline=kwargs.get("newline"))
        return real(fd, mode, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen)


def test_a_disk_that_fills_under_a_checkpoint_is_named_and_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    data = write_multi30k(tmp_path / "data")
    checkpoints = tmp_path / "run" / "checkpoints"
    _fill_disk_under(checkpoints, monkeypatch)
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)   # was a RuntimeError traceback out of torch's zip writer ("unexpected pos 64 vs 0")
    assert rc == 2 and str(checkpoints / "step_00000001.pt") in line and "No space left on device" in line
    assert not list(checkpoints.glob("*"))


def test_a_disk_too_full_for_the_metrics_logs_header_is_named(tmp_path, capsys, monkeypatch):
    data = write_multi30k(tmp_path / "data")
    monkeypatch.setattr(_FullDisk, "room", 0)
    _fill_disk_under(tmp_path / "run" / "metrics.csv", monkeypatch)
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)   # was "a file: cannot write (No space left on device)"
    assert rc == 2 and f"{tmp_path / 'run' / 'metrics.csv'}: cannot write (No space left on device)" in line
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("argv, written", [
    (["report", "--results", "{store}", "--out", "{out}/new/report", "--no-attention"], "report.md"),
    (["check", "--only", "sec3.multihead.cost", "--json", "{out}/new/deeper/c.json"], "c.json"),
])
def test_a_disk_that_fills_under_a_new_folder_leaves_no_folder_behind(tmp_path, capsys, monkeypatch, argv, written):
    (tmp_path / "store").mkdir()
    (tmp_path / "out").mkdir()
    _fill_disk_under(tmp_path / "out", monkeypatch)
    rc, _, err = run(capsys, *(a.format(store=tmp_path / "store", out=tmp_path / "out") for a in argv))
    assert rc == 2 and written in refusal(err) and "No space left on device" in refusal(err)
    assert list((tmp_path / "out").iterdir()) == []   # the folders made for the output went with it


# -- one file as both sides of a parallel corpus ----------------------------------------------------------------

def test_a_split_whose_two_sides_are_one_file_is_refused_before_training(tmp_path, capsys):
    data = write_multi30k(tmp_path / "data")
    source = data / "multi30k" / "train.en"
    source.unlink()
    source.symlink_to("train.de")   # each German sentence paired with itself: trained, exit 0
    rc, out, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)
    assert rc == 2 and out == "" and f"{data / 'multi30k' / 'train.de'}: the target side is the source side's" in line
    assert not (tmp_path / "run").exists()


# -- a SLURM name with whitespace in a cluster profile -------------------------------------------------------------

@pytest.mark.parametrize("field, value", [("partition", "gpu large"), ("qos", "normal --time=0"), ("account", " lab")])
def test_a_slurm_name_with_whitespace_in_a_profile_is_refused_by_a_dry_run(tmp_path, capsys, field, value):
    text = (REPO / "slurm" / "local.toml").read_text()
    lines = [f'{field} = "{value}"' if line.startswith(f"{field} =") else line for line in text.splitlines()]
    (tmp_path / "spaced.toml").write_text("\n".join(lines) + "\n")
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", str(tmp_path / "spaced.toml"), "--dry-run",
                       "--state-dir", str(tmp_path / "state"))
    line = refusal(err)
    assert rc == 2 and out == "" and str(tmp_path / "spaced.toml") in line and f"field '{field}' holds whitespace" in line
    assert not (tmp_path / "state").exists()


# -- a statements file of a header alone ---------------------------------------------------------------------------

def test_a_statements_file_without_statements_is_refused(tmp_path, capsys):
    claims = tmp_path / "claims"
    shutil.copytree(REPO / "claims", claims)
    header = (claims / "statements.csv").read_text().splitlines()[0]
    (claims / "statements.csv").write_text(header + "\n")
    rc, out, err = run(capsys, "claims", "--claims-dir", str(claims), "coverage")
    assert rc == 2 and out == "" and f"{claims / 'statements.csv'}: holds no statement" in refusal(err)


def test_a_disk_that_fills_under_the_run_lock_names_the_lock_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    data = write_multi30k(tmp_path / "data")
    real = os.write

    def write(fd, data_):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".repro-lock"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data_)

    monkeypatch.setattr(os, "write", write)
    rc, _, err = run(capsys, *train_argv(data, tmp_path / "run", steps=1))
    line = refusal(err)   # was "a file: cannot write (No space left on device)"
    assert rc == 2 and f"{tmp_path / 'run' / '.repro-lock'}: cannot write (No space left on device)" in line
    assert not (tmp_path / "run").exists()


# -- more worker processes than cores -------------------------------------------------------------------------------

def test_check_jobs_beyond_the_cores_spawns_no_more_workers_than_cores(tmp_path, capsys, monkeypatch):
    import concurrent.futures

    from repro.claims import runner

    def no_pool(*args, **kwargs):
        raise AssertionError(f"a pool of {kwargs.get('max_workers')} workers on one core")

    monkeypatch.setattr(runner, "usable_cores", lambda: 1)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)   # --jobs 100000: one per claim
    rc, _, err = run(capsys, "check", "--jobs", "100000", "--only", "sec3.multihead", "--json", str(tmp_path / "c.json"))
    assert rc == 0 and "Traceback" not in err
    assert {r["status"] for r in json.loads((tmp_path / "c.json").read_text())} == {"pass"}


# -- an empty value where the flag's absence has a default ------------------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["status", "--experiment", ""], "--experiment"),   # listed every submission, exit 0
    (["evaluate", "--checkpoint", __file__, "--dataset", ""], "--dataset"),   # the checkpoint's data set taken
    (["evaluate", "--checkpoint", __file__, "--data-dir", ""], "--data-dir"),   # Path("") is "."; the default taken
    (["check", "--only", "sec3.multihead.cost", "--results", ""], "--results"),   # the default store read
    (["report", "--out", ""], "--out"),   # the working folder
    (["check", "--only", "sec3.multihead.cost", "--claims-dir", ""], "--claims-dir"),
])
def test_an_empty_value_for_a_flag_with_a_default_is_refused(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and f"argument {flag}" in refusal(err)
    assert list(tmp_path.iterdir()) == []
