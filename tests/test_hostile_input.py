"""Issue 27: nothing lost, nothing executed, nothing silently dropped.

Every input is checked before work starts; each section below is one item of the issue, each case
a malformed or hostile input tried as a new user would, through the CLI in-process: a refusal is
one line ``repro: error: ...`` (or argparse's ``error: argument ...``) naming the file, line or
field, exit 2, and nothing deleted, half-written or executed.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repro.data.vocab import SharedVocab
from repro.model import Transformer, TransformerConfig
from repro.results import Provenance, Result, ResultStore
from repro.train.checkpoint import save_checkpoint
from repro.train.lineage import FIELDS
from tests.cli_run import refusal, run
from tests.metric_claim import claims_dir  # noqa: F401  (claims_dir: a fixture)

REPO = Path(__file__).resolve().parents[1]
EN = ["A man rides a bike .", "Two dogs play in the snow .", "A woman reads a book .", "Children run on the beach ."]
DE = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch .",
      "Kinder rennen am Strand ."]


def provenance(**changes) -> dict:
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d",
                      date="2026-01-01T00:00:00+00:00", scale="local: test").to_dict()
    return {**prov, **changes}


def record(**changes) -> dict:
    return {"claim_id": "x.bleu", "measured": 31.5, "unit": "BLEU", "status": None, "detail": "", "extra": {},
            "provenance": provenance(), **changes}


@pytest.fixture()
def multi30k(tmp_path: Path) -> Path:
    """A data directory laid out like ../shared/data/multi30k, a few sentences per split."""
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        (folder / f"{split}.en").write_text("".join(EN[i % 4] + "\n" for i in range(n)))
        (folder / f"{split}.de").write_text("".join(DE[i % 4] + "\n" for i in range(n)))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def model_run(tmp_path_factory) -> dict[str, Path]:
    """A checkpoint of a tiny model (64 positions) beside the vocabulary it was built for, and the
    vocabulary of another run (20 entries more)."""
    root = tmp_path_factory.mktemp("run")
    vocab = SharedVocab.train(EN + DE, 300)
    vocab.save(root / "vocab.json")
    other = root / "other"
    other.mkdir()
    SharedVocab.train(EN + DE + [" ".join(f"w{i}x{i}" for i in range(200))], 400).save(other / "vocab.json")
    assert len(SharedVocab.load(other / "vocab.json")) != len(vocab)
    cfg = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), n_layers=1, d_model=16, d_ff=32,
                            n_heads=2, max_positions=64)
    torch.manual_seed(0)
    checkpoint = save_checkpoint(root / "checkpoints" / "step_00000001.pt",
                                 {"step": 1, "model": Transformer(cfg).state_dict(), "model_config": cfg.to_dict(),
                            "lineage": dict.fromkeys(FIELDS)})
    source = root / "in.en"
    source.write_text("A man reads a book .\n")
    return {"checkpoint": checkpoint, "vocab": root / "vocab.json", "other_vocab": other / "vocab.json",
            "input": source}


# -- 1. Nothing deleted before every input is checked; --fresh deletes only what repro wrote ---------

def _user_folder(path: Path) -> dict[Path, str]:
    files = {path / "notes.txt": "precious", path / "data" / "mine.csv": "1,2,3", path / "vocab.txt": "mine"}
    for file, text in files.items():
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    return files


def _unchanged(files: dict[Path, str]) -> bool:
    return all(f.is_file() and f.read_text() == text for f, text in files.items())


@pytest.mark.parametrize("case", ["missing data dir", "missing claims dir", "invalid record", "parsing: no data"])
def test_fresh_refuses_bad_input_before_deleting_or_running_anything(tmp_path, capsys, multi30k, case):
    out = tmp_path / "my-folder"
    files = _user_folder(out)
    reports = tmp_path / "reports"
    args = ["reproduce", "--fresh", "--max-steps", "1", "--out-dir", str(out), "--reports", str(reports),
            "--data-dir", str(multi30k)]
    if case == "missing data dir":
        args[-1] = str(tmp_path / "no-data")
    elif case == "missing claims dir":
        args += ["--claims-dir", str(tmp_path / "no-claims")]
    elif case == "invalid record":  # the report at the end would refuse it: refused now, not after training
        bad = reports / "local" / "results" / "local.multi30k.bleu" / "old.json"
        bad.parent.mkdir(parents=True)
        bad.write_text(json.dumps(record(claim_id="local.multi30k.bleu", measured="high")))
    else:
        args = ["reproduce", "--profile", "local-parsing", "--fresh", "--out-dir", str(out), "--reports",
                str(reports), "--data-dir", str(tmp_path / "no-data")]
    began = time.monotonic()
    rc, out_text, err = run(capsys, *args)
    assert rc == 2, err
    named = {"missing data dir": "no-data", "missing claims dir": "no-claims", "invalid record": "old.json",
             "parsing: no data": "no-data"}[case]
    assert named in refusal(err)
    assert _unchanged(files) and sorted(p.name for p in out.iterdir()) == ["data", "notes.txt", "vocab.txt"]
    assert "local claims" not in err and "training" not in err  # no stage started
    assert time.monotonic() - began < 30


def test_fresh_refuses_a_checkpoint_repro_did_not_write(tmp_path, capsys, multi30k):
    out = tmp_path / "run"
    files = _user_folder(out)
    foreign = out / "checkpoints" / "step_00000010.pt"
    foreign.parent.mkdir()
    foreign.write_bytes(b"someone else's checkpoint")
    rc, _, err = run(capsys, "reproduce", "--fresh", "--skip-checks", "--max-steps", "1", "--out-dir", str(out),
                     "--reports", str(tmp_path / "reports"), "--data-dir", str(multi30k))
    assert rc == 2 and str(foreign) in refusal(err) and "--fresh" in refusal(err)
    assert _unchanged(files) and foreign.read_bytes() == b"someone else's checkpoint"


TINY = dict(vocab_size=300, tokens_per_batch=200, max_tokens_per_device=200, max_steps=2, warmup_steps=2,
            checkpoint_every_steps=1, average_last=2, log_every=1,
            model_overrides={"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2})


def test_fresh_deletes_only_what_the_runs_manifest_lists(tmp_path, multi30k):
    from repro.pipeline.local import reproduce_local

    out = tmp_path / "my-folder"
    files = _user_folder(out)
    kwargs = dict(out_dir=out, reports_dir=tmp_path / "reports" / "local", data_dir=str(multi30k), checks=False,
                  overrides=TINY, write_report=False, say=lambda _: None)
    reproduce_local(**kwargs)
    written = {p for p in out.rglob("*")} - set(files) - {out / "data"}
    assert out / "checkpoints" / "step_00000002.pt" in written and out / "vocab.json" in written
    later = out / "checkpoints" / "my-notes.txt"  # a user's file put among repro's after the run
    later.write_text("mine too")
    stale = out / "checkpoints" / "step_00000002.pt"
    before = stale.stat().st_mtime_ns
    time.sleep(0.01)
    summary = reproduce_local(**kwargs, fresh=True)
    assert summary["resumed_from"] == 0  # started over: the old checkpoints were deleted, not resumed from
    assert stale.stat().st_mtime_ns != before
    assert _unchanged(files) and later.read_text() == "mine too"
    manifest = json.loads((out / ".repro-manifest.json").read_text())
    assert "vocab.txt" not in json.dumps(manifest["claimed"]) and manifest["format"] == "repro-manifest"


def test_the_manifest_never_claims_what_was_there_before(tmp_path):
    from repro.manifest import Manifest

    root = tmp_path / "run"
    root.mkdir()
    (root / "vocab.json").write_text("the user's")
    manifest = Manifest.load(root)
    manifest.claim("vocab.json", "metrics.csv", "checkpoints/", "checkpoints/step_*.pt")
    (root / "metrics.csv").write_text("step\n")
    (root / "checkpoints").mkdir()
    (root / "checkpoints" / "step_00000001.pt").write_text("x")
    (root / "checkpoints" / "notes.txt").write_text("kept")
    removed = Manifest.load(root).remove()
    assert sorted(p.name for p in removed) == ["metrics.csv", "step_00000001.pt"]
    assert (root / "vocab.json").read_text() == "the user's" and (root / "checkpoints" / "notes.txt").exists()
    (root / ".repro-manifest.json").write_text('{"format": "repro-manifest", "claimed": ["*"], "claimed": []}')
    with pytest.raises(Exception, match="appears twice"):
        Manifest.load(root)


# -- 2. Nothing unpickled: JSON for ledgers and job states, weights_only for torch -------------------

class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _ledger(state: Path, folder: Path, job_id: str = "999999", **changes) -> Path:
    record = {"id": "20260101T000000-abcdef", "experiment": "smoke", "profile": "local", "executor": "local",
              "created": "2026-01-01T00:00:00+00:00", "folder": str(folder), "results_dir": None,
              "job_name": "repro-smoke", "jobs": [{"name": "smoke", "job_id": job_id, "out_dir": None}], **changes}
    path = state / "submissions" / f"{record['id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_status_never_unpickles_a_file_its_ledger_points_to(tmp_path, capsys):
    evil, marker = tmp_path / "evil", tmp_path / "PWNED"
    evil.mkdir()
    job = str(_dead_pid())
    (evil / f"{job}_0_result.pkl").write_bytes(pickle.dumps(("success", _Payload(marker))))
    _ledger(tmp_path / "state", evil, job)
    rc, out, err = run(capsys, "status", "--state-dir", str(tmp_path / "state"), "--json")
    assert not marker.exists(), "repro status ran code from a pickle named by its ledger"
    assert rc == 0, err
    [sub] = json.loads(out)
    assert sub["jobs"][0]["state"] == "UNKNOWN"  # ended, outcome not recorded in JSON: not read from the pickle


def test_a_crafted_job_state_file_is_refused_naming_it(tmp_path, capsys):
    evil, marker = tmp_path / "evil", tmp_path / "PWNED"
    evil.mkdir()
    state_file = evil / "999999_0_state.json"
    state_file.write_bytes(pickle.dumps(_Payload(marker)))
    _ledger(tmp_path / "state", evil)
    rc, _, err = run(capsys, "status", "--state-dir", str(tmp_path / "state"))
    assert rc == 2 and str(state_file) in refusal(err) and not marker.exists()
    state_file.write_text('{"state": "COMPLETED"}')
    rc, out, _ = run(capsys, "status", "--state-dir", str(tmp_path / "state"), "--json")
    assert rc == 0 and json.loads(out)[0]["jobs"][0]["state"] == "COMPLETED"


def test_a_crafted_checkpoint_is_refused_naming_it(tmp_path, capsys):
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil.pt"
    torch.save({"format": "repro-checkpoint", "version": 1, "model": _Payload(marker), "model_config": {}}, evil)
    (tmp_path / "in.en").write_text("a\n")
    rc, _, err = run(capsys, "translate", "--checkpoint", str(evil), "--input", str(tmp_path / "in.en"))
    assert rc == 2 and str(evil) in refusal(err) and not marker.exists()


def test_jobs_record_how_they_ended_in_json(tmp_path, monkeypatch):
    import submitit

    from repro.cluster import job_state

    class Env:
        paths = type("P", (), {"folder": tmp_path})()
        job_id, global_rank = "42", 0

    monkeypatch.setattr(job_state.submitit, "JobEnvironment", lambda: Env())

    class Fails(submitit.helpers.Checkpointable):
        def __call__(self):
            raise RuntimeError("diverged")

        def checkpoint(self):
            return submitit.helpers.DelayedSubmission(Fails())

    assert job_state.RecordsState(lambda: {"steps": 3})() == {"steps": 3}
    assert job_state.read_state(tmp_path, "42") == "COMPLETED"
    with pytest.raises(RuntimeError):
        job_state.RecordsState(Fails())()
    assert job_state.read_state(tmp_path, "42") == "FAILED"
    assert "diverged" in json.loads((tmp_path / "42_0_state.json").read_text())["error"]
    requeued = job_state.RecordsState(Fails()).checkpoint()
    assert isinstance(requeued.function, job_state.RecordsState)  # a requeued job still records its end


def test_no_module_unpickles_and_every_torch_load_is_weights_only():
    import ast

    offenders = []
    for path in sorted((REPO / "repro").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.split(".")[0] in ("pickle", "cloudpickle", "dill", "shelve", "marshal", "joblib", "_pickle"):
                    offenders.append(f"{path}:{node.lineno}: imports {name}")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("torch.load", "serialization.load")):
                if not any(k.arg == "weights_only" and ast.unparse(k.value) == "True" for k in node.keywords):
                    offenders.append(f"{path}:{node.lineno}: torch.load without weights_only=True")
    assert offenders == []


# -- 3. Output paths checked when the flags are read -------------------------------------------------

@pytest.fixture()
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


def _unwritable() -> Path:
    """A folder no file can be created in, whoever runs the tests (root included)."""
    if Path("/proc/self").is_dir():
        return Path("/proc")
    pytest.skip("no /proc")


#: Flags that make a run that was not refused fail fast (without them, an unchecked run would train).
NO_WORK = ("--skip-checks", "--max-steps", "1", "--data-dir", "/surely/not/here")
OUTPUT_CASES = {  # case -> (argv, the path the refusal names); f: a file, d: a folder holding report.md/ and a run
    "report --out FILE": lambda f, d: (["report", "--out", str(f), "--no-attention"], f),
    "report --out unwritable": lambda f, d: (["report", "--out", str(_unwritable() / "out"), "--no-attention"],
                                             _unwritable()),
    "report --out with report.md a folder": lambda f, d: (["report", "--out", str(d), "--no-attention"],
                                                          d / "report.md"),
    "check --json under a file": lambda f, d: (["check", "--json", str(f / "x.json"), "--only", "sec3.eq1"], f),
    "check --store FILE": lambda f, d: (["check", "--store", str(f), "--only", "sec3.eq1"], f),
    "translate --output FOLDER": lambda f, d: (["translate", "--checkpoint", str(d / "run" / "checkpoints" /
                                                "step_00000001.pt"), "--output", str(d)], d),
    "average -o unwritable": lambda f, d: (["average", str(d / "run"), "--last", "1", "-o",
                                            str(_unwritable() / "x.pt")], _unwritable()),
    "average into a run folder that is a file": lambda f, d: (["average", str(d / "run"), "--last", "1"],
                                                              d / "run" / "average_last1.pt"),
    "train --out-dir FILE": lambda f, d: (["train", "--profile", "smoke", "--out-dir", str(f)], f),
    "train --set out_dir under a file": lambda f, d: (["train", "--profile", "smoke", "--set", f"out_dir={f}/run"], f),
    "train where checkpoints/ is a file": lambda f, d: (["train", "--profile", "smoke", "--out-dir", str(d / "bad-run"),
                                                         "--max-steps", "2"], d / "bad-run" / "checkpoints"),
    "reproduce where metrics.csv is a folder": lambda f, d: (["reproduce", "--out-dir", str(d / "run"), *NO_WORK[:3]],
                                                             d / "run" / "metrics.csv"),
    "reproduce --out-dir FILE": lambda f, d: (["reproduce", "--out-dir", str(f), *NO_WORK], f),
    "reproduce --reports FILE": lambda f, d: (["reproduce", "--reports", str(f), *NO_WORK], f),
    "evaluate --hypotheses FOLDER": lambda f, d: (["evaluate", "--checkpoint", str(d / "run" / "checkpoints" /
                                                   "step_00000001.pt"), "--hypotheses", str(d)], d),
    "audit --json FOLDER": lambda f, d: (["audit", "repro.audit.torch_adapter:adapter", "--json", str(d)], d),
    "submit --state-dir FILE": lambda f, d: (["submit", "smoke", "--cluster", "local", "--dry-run", "--state-dir",
                                              str(f)], f),
}


@pytest.mark.parametrize("case", list(OUTPUT_CASES))
def test_output_paths_are_refused_before_any_work(tmp_path, capsys, a_file, model_run, case):
    folder = tmp_path / "a-folder"
    (folder / "report.md").mkdir(parents=True)
    run_dir = folder / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_00000001.pt").write_bytes(model_run["checkpoint"].read_bytes())
    (run_dir / "vocab.json").write_bytes(model_run["vocab"].read_bytes())
    (run_dir / "average_last1.pt").mkdir()  # the default output of `average --last 1`, a folder
    (run_dir / "metrics.csv").mkdir()  # the metrics log training appends to, a folder
    (folder / "bad-run").mkdir()
    (folder / "bad-run" / "checkpoints").write_text("a file where training puts its checkpoints")
    argv, named = OUTPUT_CASES[case](a_file, folder)
    began = time.monotonic()
    rc, out, err = run(capsys, *argv)
    line = refusal(err)
    assert rc == 2, err
    assert str(named) in line, line
    assert "Traceback" not in err and " pass " not in err and out == ""  # no claim ran, nothing printed
    assert time.monotonic() - began < 20
    assert a_file.read_text() == "not a folder"


# -- 4. Every record validated against one schema; strays named; --skip-invalid lists each -----------

RECORD_CASES = {
    "stray file": ("notes.txt", "not json", "not a result record"),
    "stray file in a claim folder": ("x.bleu/notes.txt", "not json", "not a result record"),
    "measured is text": ("x.bleu/r.json", record(measured="31.5"), "'measured' must be a number"),
    "unknown field": ("x.bleu/r.json", record(measure=31.5), "unknown field 'measure'"),
    "unknown provenance field": ("x.bleu/r.json", record(provenance=provenance(comit="x")),
                                 "unknown field 'provenance.comit'"),
    "claim id 42": ("x.bleu/r.json", record(claim_id=42), "'claim_id'"),
    "unknown claim id": ("no.such/r.json", record(claim_id="no.such"), "no claim has the id 'no.such'"),
    "another claim's folder": ("y.bleu/r.json", record(), "lies in the folder of 'y.bleu'"),
    "status passed": ("x.bleu/r.json", record(status="passed"), "'status'"),
    "date yesterday": ("x.bleu/r.json", record(provenance=provenance(date="yesterday")), "ISO 8601"),
    "duplicate key": ("x.bleu/r.json", '{"claim_id": "x.bleu", "claim_id": "x.bleu"}', "appears twice"),
    "ci95 of three": ("x.bleu/r.json", record(ci95=[1, 2, 3]), "'ci95'"),
}


def _store(tmp_path: Path, case: str) -> tuple[Path, Path]:
    results = tmp_path / "results"
    ResultStore(results).write(Result.from_dict(record()), "good")
    relative, content, _ = RECORD_CASES[case]
    bad = results / relative
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(content if isinstance(content, str) else json.dumps(content))
    return results, bad


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_report_refuses_an_invalid_record_naming_file_and_field(tmp_path, capsys, claims_dir, case):
    results, bad = _store(tmp_path, case)
    out = tmp_path / "out"
    argv = ["report", "--results", str(results), "--claims-dir", str(claims_dir), "--out", str(out), "--no-attention"]
    rc, _, err = run(capsys, *argv)
    line = refusal(err)
    assert rc == 2 and str(bad) in line and RECORD_CASES[case][2] in line, line
    assert not out.exists()
    rc, _, err = run(capsys, *argv, "--skip-invalid")
    assert rc == 0 and (out / "report.md").exists()
    assert any(str(bad) in w and "WARNING" in w for w in err.splitlines()), err
    row = [r for r in json.loads((out / "report.json").read_text())["claims"] if r["id"] == "x.bleu"][0]
    assert row["measured"] == 31.5  # the good record still counts


def test_check_refuses_a_text_measurement_as_bad_input(tmp_path, capsys, claims_dir):
    results, bad = _store(tmp_path, "measured is text")
    rc, _, err = run(capsys, "check", "--results", str(results), "--claims-dir", str(claims_dir))
    assert rc == 2 and str(bad) in refusal(err) and "'measured'" in refusal(err)
    rc, out, err = run(capsys, "check", "--results", str(results), "--claims-dir", str(claims_dir), "--skip-invalid")
    assert rc == 0 and str(bad) in err and "WARNING" in err


def test_records_of_the_projects_claims_stay_known_beside_another_claims_folder(tmp_path, capsys, claims_dir):
    results = tmp_path / "results"
    ResultStore(results).write(Result.from_dict(record()), "good")
    ResultStore(results).write(Result.from_dict(record(claim_id="sec3.pe.layout", measured="interleaved")), "mine")
    rc, _, err = run(capsys, "check", "--results", str(results), "--claims-dir", str(claims_dir))
    assert rc == 0 and "error" not in err
    (results / "sec3.pe.layout" / "mine.json").write_text(json.dumps(record(claim_id="sec3.pe.layout", measured=3)))
    rc, _, err = run(capsys, "check", "--results", str(results), "--claims-dir", str(claims_dir))
    assert rc == 2 and "'measured' must be a string" in refusal(err)


@pytest.mark.parametrize("change, field", [
    (lambda r: r["jobs"][0].pop("name"), "name"),
    (lambda r: r.update(created=5), "created"),
    (lambda r: r.update(created="last week"), "created"),
    (lambda r: r["jobs"][0].update(job_id="../../etc/x"), "job_id"),
    (lambda r: r.update(executor="ssh"), "executor"),
    (lambda r: r.update(extra=1), "extra"),
    (lambda r: r["jobs"][0].update(job_id="9" * 30), "job_id"),
])
def test_status_refuses_a_malformed_ledger_record_naming_its_field(tmp_path, capsys, change, field):
    state = tmp_path / "state"
    good = _ledger(state, tmp_path)
    data = json.loads(good.read_text())
    data["id"] = "20260102T000000-bad000"
    change(data)
    bad = good.parent / f"{data['id']}.json"
    bad.write_text(json.dumps(data))
    rc, _, err = run(capsys, "status", "--state-dir", str(state), "--json")
    assert rc == 2 and str(bad) in refusal(err) and field in refusal(err)
    rc, out, err = run(capsys, "status", "--state-dir", str(state), "--json", "--skip-invalid")
    assert rc == 0 and [s["id"] for s in json.loads(out)] == ["20260101T000000-abcdef"]
    assert str(bad) in err and "WARNING" in err


def test_status_names_a_stray_file_in_the_ledger(tmp_path, capsys):
    state = tmp_path / "state"
    _ledger(state, tmp_path)
    (state / "submissions" / "README").write_text("notes")
    rc, _, err = run(capsys, "status", "--state-dir", str(state))
    assert rc == 2 and "README" in refusal(err)


# -- 5. Strict parsing ---------------------------------------------------------------------------------

def test_a_key_given_twice_in_a_json_config_is_refused_naming_file_and_line(tmp_path, capsys):
    cfg = tmp_path / "train.json"
    cfg.write_text('{\n  "max_steps": 10,\n  "max_steps": 20\n}\n')
    rc, out, err = run(capsys, "train", "--config", str(cfg), "--print-config")
    assert rc == 2 and out == "" and f"{cfg}:3: key 'max_steps' appears twice" in refusal(err)


@pytest.mark.parametrize("argv, named", [
    (["--set", "seed=1", "--set", "seed=2"], "'seed' is set twice"),
    (["--max-steps", "5", "--set", "max_steps=6"], "max_steps"),
    (["--set", 'norm_first="false"'], "'norm_first' must be true or false"),
    (["--set", "share_embeddings=1"], "'share_embeddings' must be true or false"),
    (["--set", "alpha=NaN"], "NaN"),
    (["--set", "lr_scale=Infinity"], "Infinity"),
    (["--set", 'model_overrides={"dropout": NaN}'], "NaN"),
    (["--set", 'model_overrides={"d_ff": 64, "d_ff": 128}'], "appears twice"),
    (["--set", "max_positions=1000000000"], "max_positions"),
    (["--set", "d_model=1000000000"], "parameters"),
    (["--set", "beam_size=1000000000"], "'beam_size' must be at most 1024"),
    (["--set", "alpha=1e308"], "'alpha' must be at most 10"),
    (["--threads", "100000000"], "'threads' must be at most 1024"),
    (["--set", "data_dir="], "'data_dir' must not be empty"),
    (["--set", "seed=100000000000000000000"], "seed"),
])
def test_lenient_values_are_refused(capsys, argv, named):
    rc, out, err = run(capsys, "train", "--profile", "smoke", *argv, "--print-config")
    assert rc == 2 and out == "" and named in refusal(err)


CLAIM = """[[claim]]
id = "x.eq1"
source = "test"
statement = "Eq. 1"
kind = "equation"
scale = "local"
checker = "attention.eq1"
"""


@pytest.mark.parametrize("lines, named", [
    ("expected = 0.0\ntolerance = { abs = inf }\n", "tolerance.abs"),
    ("expected = nan\ntolerance = { abs = 0.1 }\n", "expected"),
    ("expected = 0.0\ntolerance = { abs = 0.1 }\nparams = { trials = 0 }\n", "params.trials"),
    ("expected = 0.0\ntolerance = { abs = 0.1 }\nparams = { trials = \"2\" }\n", "params.trials"),
    ("expected = 0.0\ntolerance = { abs = 0.1 }\nparams = { trails = 5 }\n", "params.trails"),
    ("expected = 0.0\ntolerance = { rel = inf }\n", "tolerance.rel"),
])
def test_claims_files_are_parsed_strictly(tmp_path, capsys, lines, named):
    folder = tmp_path / "claims"
    folder.mkdir()
    (folder / "x.toml").write_text(CLAIM + lines)
    for argv in (["claims", "--claims-dir", str(folder), "list"], ["check", "--claims-dir", str(folder)]):
        rc, _, err = run(capsys, *argv)
        line = refusal(err)
        assert rc == 2 and str(folder / "x.toml") in line and "x.eq1" in line and named in line, line


@pytest.mark.parametrize("field", ["partition", "account", "qos", "constraint"])
def test_a_control_character_in_a_cluster_profile_is_refused(tmp_path, capsys, field):
    profile = tmp_path / "evil.toml"
    text = (REPO / "slurm" / "local.toml").read_text()
    profile.write_text(text + f'\n{field} = "debug\\n#SBATCH --wrap=id"\n' if f"\n{field} =" not in text else
                       text.replace(f"\n{field} =", f'\n{field} = "debug\\n#SBATCH --wrap=id"\n#', 1))
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", str(profile), "--dry-run")
    assert rc == 2 and out == "" and str(profile) in refusal(err) and f"'{field}'" in refusal(err)


def test_a_control_character_in_a_job_name_is_refused(capsys):
    rc, out, err = run(capsys, "submit", "smoke", "--cluster", "local", "--dry-run", "--job-name", "x\n#SBATCH -A y")
    assert rc == 2 and out == "" and "--job-name" in refusal(err)


@pytest.mark.parametrize("verb", ["check", "audit"])
def test_a_seed_out_of_range_is_a_bad_flag(capsys, verb):
    target = ["repro.audit.torch_adapter:adapter"] if verb == "audit" else []
    rc, out, err = run(capsys, verb, *target, "--seed", str(10**20), "--only", "sec3.eq1")
    assert rc == 2 and out == "" and "argument --seed" in refusal(err) and "2147483647" in refusal(err)


# -- 6. Sizes bounded -----------------------------------------------------------------------------------

def test_beam_and_offset_are_bounded_before_the_model_loads(capsys, model_run):
    common = ["translate", "--checkpoint", str(model_run["checkpoint"]), "--input", str(model_run["input"])]
    for flags, named in ((["--beam", "1000000000"], "--beam 1000000000: at most 1024"),
                         (["--beam", "100"], "--force"),
                         (["--max-len-offset", "1000000000"], "--max-len-offset 1000000000: at most"),
                         (["--max-len-offset", "2000"], "--force"),
                         (["--max-len-offset", "2000", "--force"], "64 positions"),
                         (["--max-len-offset", "60"], "in.en:1"),
                         (["--alpha", "1e308"], "--alpha 1e+308: at most 10")):
        rc, out, err = run(capsys, *common, *flags)
        assert rc == 2 and out == "" and named in refusal(err), (flags, err)
    rc, out, err = run(capsys, *common, "--beam", "100", "--force", "--max-len-offset", "5")
    assert rc == 0 and len(out.splitlines()) == 1, err


def test_bleu_refuses_a_folder_for_a_file(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("a b c\n")
    rc, out, err = run(capsys, "bleu", str(tmp_path), str(text))
    assert rc == 2 and out == "" and "argument hyp" in refusal(err) and str(tmp_path) in refusal(err)


def test_confidence_resamples_are_bounded(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("a b c\n")
    rc, out, err = run(capsys, "bleu", str(text), str(text), "--confidence", "--confidence-n", "1000000000")
    assert rc == 2 and out == "" and "--confidence-n 1000000000: at most 10000000" in refusal(err)
    rc, out, err = run(capsys, "bleu", str(text), str(text), "--confidence", "--confidence-n", "200000")
    assert rc == 2 and "--force" in refusal(err)


@pytest.mark.parametrize("seeds, named", [("10000", "at most 1000"), ("11", "--force")])
def test_seeds_are_bounded_before_anything_starts(tmp_path, capsys, seeds, named):
    rc, _, err = run(capsys, "reproduce", "--seeds", seeds, "--out-dir", str(tmp_path / "run"), *NO_WORK)
    assert rc == 2 and named in refusal(err) and not (tmp_path / "run").exists()


# -- 7. EVALB: the report byte for byte, the exit code ours ----------------------------------------------

TREE = "(S (NP (DT a) (NN b)) (VP (VB c)))"


@pytest.mark.parametrize("gold, test, named", [
    ([TREE, TREE], [TREE, "(S (NP (DT a) (NN b)) (VP (VB c))"], "malformed"),  # unbalanced test tree
    ([TREE, "", TREE], [TREE, TREE, TREE], "malformed"),                    # a blank line in the gold file
    ([TREE, TREE], [TREE, "(S (NP (DT a) (NN x)) (VP (VB c)))"], "malformed"),  # words differ
    ([TREE, TREE], [TREE, ""], "skipped"),                                   # no parse for a sentence
])
def test_evalb_exits_2_when_sentences_are_left_out(tmp_path, capsys, gold, test, named):
    gold_path, test_path = tmp_path / "gold", tmp_path / "test"
    gold_path.write_text("\n".join(gold) + "\n")
    test_path.write_text("\n".join(test) + "\n")
    rc, out, err = run(capsys, "evalb", str(gold_path), str(test_path))
    line = refusal(err)
    assert rc == 2 and str(gold_path) in line and named in line
    rc_ok, out_ok, err_ok = run(capsys, "evalb", str(gold_path), str(test_path), "--allow-mismatch")
    assert rc_ok == 0 and out_ok == out and "error:" not in err_ok  # EVALB's report unchanged
    assert "Number of Valid sentence  =      1" in out or "Number of Valid sentence  =      2" in out


# -- 8. The leftovers of a killed write are removed by the next writer ------------------------------------

def test_a_killed_writes_temporary_file_is_removed_by_the_next_writer(tmp_path):
    from repro.files.writer import STALE_AFTER_S, atomic_open, atomic_write_text

    target = tmp_path / "record.json"
    code = ("import sys, time; from repro.files.writer import atomic_open\n"
            "with atomic_open(sys.argv[1]) as fh:\n    fh.write('half'); fh.flush(); print('open', flush=True)"
            "; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "open"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    [left] = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    legacy = tmp_path / ".record.json.abcd1234.tmp"  # a leftover of a repro before names said whose
    legacy.write_text("old")
    os.utime(legacy, (time.time() - STALE_AFTER_S - 10,) * 2)
    young = tmp_path / ".record.json.efgh5678.tmp"  # maybe a live writer of another host: kept
    young.write_text("young")
    other = tmp_path / ".other.json.abcd1234.tmp"  # another file's: not this writer's business
    other.write_text("x")
    os.utime(other, (time.time() - STALE_AFTER_S - 10,) * 2)
    with atomic_open(target) as fh:  # a live writer's own temporary file is never removed
        fh.write("whole")
        atomic_write_text(tmp_path / "unrelated.json", "{}")
        assert sum(p.name.startswith(".record.json.") for p in tmp_path.iterdir()) == 2  # young + mine
    assert target.read_text() == "whole"
    assert not left.exists() and not legacy.exists() and young.exists() and other.exists()


def test_a_write_in_progress_is_not_a_stray_record(tmp_path):
    results = tmp_path / "results"
    ResultStore(results).write(Result.from_dict(record()), "good")
    (results / "x.bleu" / ".good.json.host-1.abc.tmp").write_text("{")
    assert [r.claim_id for r in ResultStore(results).read_all()] == ["x.bleu"]


# -- 9. A vocabulary that does not fit the checkpoint ----------------------------------------------------

@pytest.mark.parametrize("verb", ["translate", "evaluate"])
def test_another_runs_vocabulary_is_refused_naming_both_sizes(capsys, model_run, multi30k, verb):
    other, ours = SharedVocab.load(model_run["other_vocab"]), SharedVocab.load(model_run["vocab"])
    extra = (["--input", str(model_run["input"])] if verb == "translate" else
             ["--data-dir", str(multi30k), "--dataset", "multi30k-en-de"])
    rc, out, err = run(capsys, verb, "--checkpoint", str(model_run["checkpoint"]), "--vocab",
                       str(model_run["other_vocab"]), *extra, "--max-len-offset", "5")
    line = refusal(err)
    assert rc == 2 and out == ""
    assert str(model_run["other_vocab"]) in line and str(model_run["checkpoint"]) in line
    assert f"{len(other)} entries" in line and str(len(ours)) in line
    rc, out, err = run(capsys, "translate", "--checkpoint", str(model_run["checkpoint"]), "--input",
                       str(model_run["input"]), "--max-len-offset", "5")
    assert rc == 0, err  # its own vocabulary, found beside the run
