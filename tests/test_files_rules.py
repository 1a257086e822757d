"""Issue 45, item 2 (and 6): the rules of the one reader and the one writer, case by case, through
the CLI in-process where a user meets them. Every refusal is one line naming the file, exit 2; a
user's file outside the run is never written; nothing is half-written.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from repro.errors import DataError, OutputError, UsageError
from repro.files import reader, writer
from repro.limits import LINE_BYTES, NESTING, RECORD_BYTES
from repro.results import Provenance, Result, ResultStore
from tests.cli_run import refusal, run
from tests.metric_claim import METRIC_CLAIM as CLAIM

SENTENCES = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch ."]
TEXT = "".join(s + "\n" for s in SENTENCES)


def _text(path: Path, content: str | bytes = TEXT) -> Path:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


# -- the reader: what is a file -----------------------------------------------------------------------

@pytest.mark.parametrize("make, named", [
    (lambda d: Path("/dev/zero"), "a character device"),
    (lambda d: _link(d / "zero.json", "/dev/zero"), "a symbolic link to /dev/zero"),
    (lambda d: _fifo(d / "pipe.json"), "a pipe"),
    (lambda d: d, "a directory"),
    (lambda d: _link(d / "dangling.json", d / "nowhere"), "which does not exist"),
    (lambda d: _link(d / "loop.json", d / "loop.json"), "a loop of symbolic links"),
])
def test_only_regular_files_are_read_where_a_file_is_expected(tmp_path, make, named):
    path = make(tmp_path)
    with pytest.raises(UsageError) as err:
        reader.read_json(path, "record")
    assert str(path) in str(err.value) and named in str(err.value)


def _link(path: Path, target) -> Path:
    path.symlink_to(target)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _feed(path: Path, data: bytes) -> threading.Thread:
    """A writer of ``data`` into the FIFO ``path`` (as ``<(...)`` is), in a thread."""
    def write() -> None:
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except BrokenPipeError:
            pass
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_pipe_is_read_where_a_stream_is_expected(tmp_path, capsys):
    hyp = _text(tmp_path / "hyp.de")
    ref = _fifo(tmp_path / "ref.de")
    feeder = _feed(ref, TEXT.encode())
    rc, out, err = run(capsys, "bleu", str(hyp), str(ref), "--json")
    feeder.join(5)
    assert rc == 0, err
    assert json.loads(out)["score"] == pytest.approx(100.0)


def test_a_stream_without_end_stops_at_the_line_bound(tmp_path, capsys):
    hyp = _text(tmp_path / "hyp.de")
    ref = _fifo(tmp_path / "ref.de")
    feeder = _feed(ref, b"\0" * (LINE_BYTES.hard + 10))  # /dev/zero piped in: no newline, ever
    rc, _, err = run(capsys, "bleu", str(hyp), str(ref))
    feeder.join(5)
    line = refusal(err)
    assert rc == 2 and f"{ref}:1" in line


def test_a_character_device_is_refused_even_where_a_stream_is_expected(capsys):
    rc, _, err = run(capsys, "bleu", "/dev/zero", "/dev/zero")
    assert rc == 2 and "/dev/zero" in refusal(err) and "character device" in refusal(err)


def test_a_file_over_its_size_bound_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "record.json"
    with open(big, "wb") as fh:
        fh.truncate(RECORD_BYTES.hard + 1)   # sparse: nothing is written, the size is what counts
    with pytest.raises(UsageError, match="more than the 64.0 MiB"):
        reader.read_json(big, "record")


@pytest.mark.parametrize("depth, refused", [(NESTING.hard, False), (NESTING.hard + 1, True), (5000, True)])
def test_json_nesting_is_bounded(tmp_path, depth, refused):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    if refused:
        with pytest.raises(UsageError, match=f"{path}: nested"):
            reader.read_json(path, "record")
    else:
        assert reader.read_json(path, "record") == eval("[" * depth + "]" * depth)


def test_toml_nesting_is_bounded(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UsageError, match=f"{path}: nested"):
        reader.read_toml(path, "claims file")


# -- the reader: one text decoding rule -------------------------------------------------------------

@pytest.mark.parametrize("codec, named", [("utf-16", "UTF-16LE (with a byte-order mark)"),
                                          ("utf-16-le", "UTF-16LE (without"), ("utf-16-be", "UTF-16BE (without"),
                                          ("utf-32", "UTF-32LE (with a byte-order mark)"),
                                          ("utf-32-le", "UTF-32LE (without"), ("utf-32-be", "UTF-32BE (without")])
def test_utf16_and_utf32_are_named_and_refused(tmp_path, capsys, codec, named):
    hyp = _text(tmp_path / "hyp.de", TEXT.encode(codec))
    ref = _text(tmp_path / "ref.de")
    rc, out, err = run(capsys, "bleu", str(hyp), str(ref))
    line = refusal(err)
    assert rc == 2 and out == "" and str(hyp) in line and named in line


def test_a_bom_in_the_middle_is_removed_with_a_warning_naming_its_line(tmp_path, capsys):
    ref = _text(tmp_path / "ref.de")
    first, second = tmp_path / "a.de", tmp_path / "b.de"
    _text(first, "\ufeff" + "".join(s + "\n" for s in SENTENCES[:1]))
    _text(second, "\ufeff" + "".join(s + "\n" for s in SENTENCES[1:]))
    joined = _text(tmp_path / "hyp.de", first.read_bytes() + second.read_bytes())   # cat a b > hyp
    rc, out, err = run(capsys, "bleu", str(joined), str(ref), "--json")
    assert rc == 0, err
    assert json.loads(out)["score"] == pytest.approx(100.0)
    assert f"{joined}:2: a byte-order mark" in err and "WARNING" in err


def test_nul_bytes_and_bytes_that_are_not_utf8_name_their_line(tmp_path):
    nul = _text(tmp_path / "nul.txt", b"a\nb\x00c\n")
    latin = _text(tmp_path / "latin.txt", "a\nb\nStra\u00dfe\n".encode("latin-1"))
    with pytest.raises(DataError, match=f"{nul}:2: a NUL byte"):
        list(reader.iter_lines(nul, error=DataError))
    with pytest.raises(DataError, match=f"{latin}:3: not valid UTF-8"):
        reader.read_text(latin, error=DataError)


# -- the writer ------------------------------------------------------------------------------------

@pytest.fixture()
def user_file(tmp_path: Path) -> Path:
    mine = tmp_path / "elsewhere" / "precious.txt"
    mine.parent.mkdir()
    mine.write_text("the user's")
    return mine


def test_a_target_that_is_a_link_is_refused_and_what_it_points_to_kept(tmp_path, user_file):
    link = _link(tmp_path / "out.json", user_file)
    with pytest.raises(OutputError, match="symbolic link"):
        writer.atomic_write_text(link, "{}")
    assert user_file.read_text() == "the user's" and link.is_symlink()


@pytest.mark.parametrize("target", ["/dev/null", "/dev/stdout"])
def test_a_device_as_output_is_refused_when_the_flags_are_read(capsys, target):
    rc, out, err = run(capsys, "check", "--json", target, "--only", "sec3.eq1")
    assert rc == 2 and out == "" and target in refusal(err)


def test_a_folder_inside_the_run_that_links_elsewhere_is_refused(tmp_path, user_file):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _link(run_dir / "checkpoints", user_file.parent)
    with pytest.raises(OutputError, match="symbolic link .* inside"):
        writer.atomic_write_text(run_dir / "checkpoints" / "step_00000001.pt", "x", within=run_dir)
    with pytest.raises(OutputError, match="lies outside"):
        writer.atomic_write_text(run_dir / ".." / "elsewhere" / "precious.txt", "x", within=run_dir)
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["precious.txt"]


def test_train_refuses_a_run_whose_checkpoints_folder_links_elsewhere(tmp_path, capsys, user_file):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _link(run_dir / "checkpoints", user_file.parent)
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(run_dir), "--max-steps", "1")
    assert rc == 2 and str(run_dir / "checkpoints") in refusal(err)
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["precious.txt"]


def test_a_record_named_out_of_its_store_is_refused(tmp_path):
    store = ResultStore(tmp_path / "results")
    prov = Provenance(commit="c", config_hash="h", hardware="cpu", dataset="d", date="2026-01-01T00:00:00+00:00",
                      scale="local: t")
    with pytest.raises(OutputError, match="lies outside"):
        store.write(Result("../../escaped", 1.0, prov), "r")
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_the_run_lock_is_never_opened_through_a_link(tmp_path, capsys, user_file, kind):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = run_dir / ".repro-lock"
    lock.symlink_to(user_file) if kind == "symlink" else os.link(user_file, lock)
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(run_dir), "--max-steps", "1")
    assert rc == 2 and str(lock) in refusal(err)
    assert user_file.read_text() == "the user's"


def test_a_run_inside_another_runs_folder_is_refused(tmp_path, capsys):
    first = tmp_path / "first"
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(first), "--max-steps", "1")
    assert rc == 0, err
    before = {p: p.stat().st_mtime_ns for p in first.rglob("*")}
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(first / "checkpoints"), "--max-steps", "1")
    line = refusal(err)
    assert rc == 2 and str(first / "checkpoints") in line and "another run's folder" in line
    assert {p: p.stat().st_mtime_ns for p in first.rglob("*")} == before


def test_the_runs_a_pipeline_lays_out_are_its_own_not_nested_runs(tmp_path):
    from repro.manifest import Manifest
    from repro.pipeline import run_dir
    from repro.run_lock import refuse_nested

    Manifest.load(tmp_path).claim(*run_dir.under("seed-*", run_dir.LOCAL))   # reproduce --seeds 2
    refuse_nested(tmp_path / "seed-2")
    for inside in ("checkpoints", "seed-2/checkpoints", "elsewhere"):
        with pytest.raises(UsageError, match="another run's folder"):
            refuse_nested(tmp_path / inside)


@pytest.mark.parametrize("name", ["summary.md", "summary.MD.md"])
def test_selftest_refuses_a_json_path_its_readable_summary_would_overwrite(tmp_path, capsys, name):
    rc, out, err = run(capsys, "selftest", "--device", "cpu", "--quick", "--json", str(tmp_path / name),
                       "--out-dir", str(tmp_path / "st"))
    line = refusal(err)
    assert rc == 2 and out == "" and name in line and "overwritten" in line
    assert not (tmp_path / "st").exists() and not (tmp_path / name).exists()


# -- every kind of input the CLI reads, through the CLI -------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


def _report_of(tmp_path: Path, record_path: str) -> tuple[list[str], Path]:
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "x.toml").write_text(CLAIM)
    bad = tmp_path / "results" / record_path
    bad.parent.mkdir(parents=True)
    return ["report", "--results", str(tmp_path / "results"), "--claims-dir", str(tmp_path / "claims"), "--out",
            str(tmp_path / "out"), "--no-attention"], bad


def _status_of(tmp_path: Path, name: str) -> tuple[list[str], Path]:
    bad = tmp_path / "state" / "submissions" / name
    bad.parent.mkdir(parents=True)
    return ["status", "--state-dir", str(tmp_path / "state")], bad


@pytest.mark.parametrize("command", [_report_of, _status_of])
@pytest.mark.parametrize("hostile", ["nested 5000 deep", "a link to /dev/zero", "UTF-16", "a folder"])
def test_records_and_ledgers_that_are_no_records_are_one_line(tmp_path, capsys, command, hostile):
    argv, bad = command(tmp_path, "x.bleu/r.json" if command is _report_of else "20260101T000000-abcdef.json")
    if hostile == "nested 5000 deep":
        bad.write_text('{"claim_id": ' + DEEP + "}")
    elif hostile == "a link to /dev/zero":
        bad.symlink_to("/dev/zero")
    elif hostile == "UTF-16":
        bad.write_bytes(json.dumps({"claim_id": "x.bleu"}).encode("utf-16"))
    else:
        bad.mkdir()
        (bad / "inside.json").write_text("{}")
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and str(bad) in refusal(err)
    assert not (tmp_path / "out").exists()


def test_a_job_state_file_linked_to_dev_zero_is_one_line(tmp_path, capsys):
    from repro.cluster.ledger import Ledger, SubmissionRecord

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    Ledger(tmp_path / "state").write(SubmissionRecord(
        id="s1", experiment="smoke", profile="local", executor="local", created="2026-01-01T00:00:00+00:00",
        folder=str(jobs), results_dir=None, job_name="j", jobs=[{"name": "smoke", "job_id": "999999999"}]))
    (jobs / "999999999_0_state.json").symlink_to("/dev/zero")
    rc, _, err = run(capsys, "status", "--state-dir", str(tmp_path / "state"))
    assert rc == 2 and str(jobs / "999999999_0_state.json") in refusal(err)


@pytest.mark.parametrize("argv", [["--set", f"model_overrides={DEEP}"], ["--set", f"seed={'9' * 5000}"]])
def test_set_values_nested_deep_or_too_long_are_one_line(capsys, argv):
    rc, out, err = run(capsys, "train", "--recipe", "smoke", *argv, "--print-config")
    assert rc == 2 and out == "" and "--set" in refusal(err)


def test_standard_input_of_binary_data_is_refused_from_its_first_bytes(monkeypatch):
    import io
    import sys

    class Endless(io.RawIOBase):   # /dev/zero: it never ends, so only its first bytes may be read
        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            self.read_bytes = getattr(self, "read_bytes", 0) + len(buffer)
            assert self.read_bytes < 2**24, "read far past the first bytes"
            buffer[:] = b"\0" * len(buffer)
            return len(buffer)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    with pytest.raises(DataError, match="<stdin>: a NUL byte"):
        reader.read_standard_input("the input to translate", error=DataError)
