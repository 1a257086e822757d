"""``repro check --run DIR`` on a run of a few updates, then on copies of it with one record edited.

The run is the main job at toy size (``repro reproduce --pipeline local`` with a 1-layer model, 6
updates, a 200-pair corpus): it stands for the paper's base EN-DE job and departs from most of its
statements, each with its value and the paper's. Each edit of its records (a logged rate, a count of
tokens, the averaged checkpoints, the scored file, the translations, the vocabulary, the counted
corpus) fails the claim it touches, the message naming the file and the value; a malformed record
stops the check with one line naming the file and the field (exit 2).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch

from repro.checks.run_check import check_run
from repro.observed.counterpart import counterpart
from repro.pipeline.local import reproduce_local
from repro.results.provenance import config_hash
from tests.cli_run import refusal, run

pytestmark = pytest.mark.xdist_group("observed-run")   # one toy run per worker, shared by the module

OVERRIDES = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, max_steps=6, warmup_steps=4,
                 checkpoint_every_steps=2, average_last=2, log_every=1,
                 model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4})


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory, tiny_multi30k) -> Path:
    root = tmp_path_factory.mktemp("observed")
    data = tiny_multi30k(root / "tiny", {"train": 200, "dev": 10, "test": 10})
    reproduce_local(out_dir=root / "run", reports_dir=root / "reports" / "local", checks=False,
                    overrides=dict(OVERRIDES, dataset=str(data)), say=lambda _: None, write_report=False)
    return root / "run"


@pytest.fixture
def copy(toy_run: Path, tmp_path: Path) -> Path:
    """A copy of the toy run to edit."""
    return Path(shutil.copytree(toy_run, tmp_path / "run"))


def verdicts(path: Path) -> dict[str, object]:
    return {r.claim.id: r for r in check_run(path).records}


def edit_log(path: Path, step: int, column: str, value: str) -> int:
    """Set ``column`` of the row of ``step`` in the run's metrics log; returns that row's line."""
    rows = list(csv.DictReader((path / "metrics.csv").open()))
    line = next(i for i, r in enumerate(rows, start=2) if r["step"] == str(step))
    rows[line - 2][column] = value
    with (path / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return line


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def test_the_untouched_run_departs_with_its_values_and_the_papers(toy_run: Path, capsys) -> None:
    records = verdicts(toy_run)
    status = {k: r.status.value for k, r in records.items()}
    assert not [k for k, s in status.items() if s in ("fail", "error")], {k: records[k].detail for k in status}
    assert status["observed.train-steps.base"] == "departs"
    assert "ran 6 of 100000 updates" in records["observed.train-steps.base"].detail
    assert records["observed.eq3.rates"].status.value == "departs" and "lr_scale 0.5" in records["observed.eq3.rates"].detail
    assert records["observed.warmup-steps"].measured == 4          # recovered from the logged rates, not read
    assert records["observed.batch-tokens"].status.value == "departs"
    assert "recounted from its encoded corpus" in records["observed.batch-tokens"].detail
    assert status["observed.vocabulary.ende"] == status["observed.corpus.ende"] == "departs"
    assert records["observed.average.base"].measured == 2 and status["observed.average.base"] == "departs"
    assert status["observed.beam-size"] == status["observed.adam"] == status["observed.dropout.base"] == "pass"
    assert status["observed.test-set.table2-ende"] == "departs"
    assert status["table2.bleu.base-ende"] == "departs"             # not the paper's job: shown, never counted
    assert "not counted for the paper" in records["table2.bleu.base-ende"].detail
    # what this run cannot show says why
    assert status["observed.train-steps.big"] == "not run"
    assert records["observed.train-steps.big"].detail.startswith("needs another run: the statement is about the "
                                                                 "paper's model big")
    rc, out, _ = run(capsys, "check", "--run", str(toy_run))
    assert rc == 0 and "needs another run" in out and "departs" in out and "ran 6 of 100000 updates" in out


def test_an_edited_rate_fails_eq3_naming_the_line_and_the_value(copy: Path) -> None:
    line = edit_log(copy, 3, "lr", "0.000123")
    records = verdicts(copy)
    for claim in ("observed.eq3.rates", "observed.warmup-steps"):
        record = records[claim]
        assert record.status.value == "fail", (claim, record.detail)
        assert f"{copy / 'metrics.csv'} line {line} (step 3): lr 0.000123" in record.detail


def test_a_nan_rate_never_passes(copy: Path) -> None:
    edit_log(copy, 5, "lr", "nan")
    record = verdicts(copy)["observed.eq3.rates"]
    assert record.status.value == "fail" and "metrics.csv line 6 (step 5): lr" in record.detail


@pytest.mark.parametrize("column, side", [("src_tokens", "source"), ("tgt_tokens", "target")])
def test_an_edited_token_count_fails_the_batch_claim(copy: Path, column: str, side: str) -> None:
    rows = list(csv.DictReader((copy / "metrics.csv").open()))
    logged = int(rows[1][column])
    line = edit_log(copy, 2, column, str(logged - 3))
    record = verdicts(copy)["observed.batch-tokens"]
    assert record.status.value == "fail"
    assert f"metrics.csv line {line} (step 2): {column} {logged - 3}, but the run's batchers gave update 2 " \
           f"{logged} {side} tokens" in record.detail


def test_edited_averaged_checkpoints_fail_the_average_claim(copy: Path) -> None:
    record_path = copy / "evaluations" / "local.multi30k.bleu.json"
    edit_json(record_path, lambda d: d["provenance"]["extra"].update(averaged_from=["step_00000002.pt",
                                                                                    "step_00000006.pt"]))
    record = verdicts(copy)["observed.average.base"]
    assert record.status.value == "fail"
    assert str(record_path) in record.detail and "step_00000002.pt" in record.detail


def test_an_average_of_other_checkpoints_than_the_last_fails(copy: Path) -> None:
    """Every record and the averaged file say so, but they are not the run's last checkpoints (the records
    keep no identities of them, as an older repro's did not)."""
    for path in (copy / "evaluations").glob("*.json"):
        if "averaged_from" in json.loads(path.read_text())["provenance"]["extra"]:
            edit_json(path, lambda d: (d["provenance"]["extra"].update(averaged_from=["step_00000002.pt",
                                                                                      "step_00000004.pt"]),
                                       d["provenance"]["extra"].pop("averaged", None)))
    (copy / "average_last2.pt").unlink()
    record = verdicts(copy)["observed.average.base"]
    assert record.status.value == "fail" and "not the run's last 2 checkpoint(s)" in record.detail


def test_a_scored_file_changed_since_fails_the_test_set_claim(toy_run: Path) -> None:
    bleu = json.loads((toy_run / "evaluations" / "local.multi30k.bleu.json").read_text())
    reference = Path(bleu["provenance"]["extra"]["test_set"]["reference"]["path"])
    before = reference.read_text()
    try:
        reference.write_text(before.replace("a", "o", 1))
        record = verdicts(toy_run)["observed.test-set.table2-ende"]
    finally:
        reference.write_text(before)
    assert record.status.value == "fail"
    assert "local.multi30k.bleu.json: field 'provenance.extra.test_set.reference.sha256'" in record.detail
    assert str(reference) in record.detail and "changed since it was scored" in record.detail


def test_an_edited_record_of_the_scored_file_fails(copy: Path) -> None:
    record_path = copy / "evaluations" / "local.multi30k.bleu.json"
    edit_json(record_path, lambda d: d["provenance"]["extra"]["test_set"]["reference"].update(lines=3003))
    record = verdicts(copy)["observed.test-set.table2-ende"]
    assert record.status.value == "fail" and str(record_path) in record.detail and "3003" in record.detail


def test_edited_translations_fail_the_protocol_claim(copy: Path) -> None:
    hypotheses = copy / "test_2016_flickr.hyp.de"
    hypotheses.write_text("ein Hund .\n" * 10)
    record = verdicts(copy)["observed.bleu-protocol"]
    assert record.status.value == "fail" and str(hypotheses) in record.detail


def test_an_evaluation_that_claims_the_papers_recipe_fails(copy: Path) -> None:
    """A record edited to carry the paper job's config hash is not counted for the paper: it contradicts
    the recipe it keeps and the run's own."""
    record_path = copy / "evaluations" / "local.multi30k.bleu.json"
    edit_json(record_path, lambda d: d["provenance"].update(config_hash=counterpart("base").recipe_hash))
    record = verdicts(copy)["table2.bleu.base-ende"]
    assert record.status.value == "fail"
    assert f"{record_path}: field 'provenance.config_hash' is '{counterpart('base').recipe_hash}'" in record.detail


def test_a_changed_vocabulary_fails_the_vocabulary_claim(copy: Path) -> None:
    vocab = json.loads((copy / "vocab.json").read_text())
    vocab["model"]["vocab"]["Ġzzzz"] = len(vocab["model"]["vocab"])   # one entry more than the run learned
    (copy / "vocab.json").write_text(json.dumps(vocab))
    record = verdicts(copy)["observed.vocabulary.ende"]
    assert record.status.value == "fail"
    assert f"{copy / 'run.json'}: field 'vocabulary.size' is 300, but {copy / 'vocab.json'} holds 301" in record.detail


def test_a_vocabulary_of_the_same_size_but_other_content_fails(copy: Path) -> None:
    text = (copy / "vocab.json").read_text()
    (copy / "vocab.json").write_text(text.replace('"<unk>"', '"<unk>" ', 1) if '"<unk>"' in text else text + " ")
    record = verdicts(copy)["observed.vocabulary.ende"]
    assert record.status.value == "fail" and f"{copy / 'vocab.json'}: changed since the run recorded it" in record.detail


def test_a_recorded_vocabulary_size_that_is_not_the_files_fails(copy: Path) -> None:
    edit_json(copy / "run.json", lambda d: d["vocabulary"].update(size=37000))
    record = verdicts(copy)["observed.vocabulary.ende"]
    assert record.status.value == "fail"
    assert f"{copy / 'run.json'}: field 'vocabulary.size' is 37000, but {copy / 'vocab.json'} holds 300" in record.detail


def test_a_counted_corpus_the_encoded_one_does_not_hold_fails(copy: Path) -> None:
    edit_json(copy / "run.json", lambda d: d["corpus"].update(pairs=4_500_000, trained=4_499_998))
    record = verdicts(copy)["observed.corpus.ende"]
    assert record.status.value == "fail" and "field 'corpus.trained' is 4499998" in record.detail


def test_a_run_record_that_disagrees_with_the_checkpoint_fails(copy: Path) -> None:
    edit_json(copy / "run.json", lambda d: d.update(steps=100000))
    record = verdicts(copy)["observed.train-steps.base"]
    assert record.status.value == "fail" and "field 'steps' is 100000" in record.detail


@pytest.mark.parametrize("damage, named", [
    (lambda p: edit_log(p, 2, "lr", "fast"), "metrics.csv:3: field 'lr' is not a number ('fast')"),
    (lambda p: (p / "run.json").write_text("{"), "run.json:1: not valid JSON"),
    (lambda p: edit_json(p / "run.json", lambda d: d.update(steps="six")), "run.json: field 'steps'"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.bleu.json", lambda d: d.update(measured=[1])),
     "local.multi30k.bleu.json: field 'measured'"),
    (lambda p: (p / "checkpoints" / "step_00000006.pt").write_bytes(b"not a checkpoint"),
     "step_00000006.pt: not a readable checkpoint"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.bleu.json",
                         lambda d: d["provenance"]["extra"].update(averaged_from="step_00000006.pt")),
     "local.multi30k.bleu.json: field 'provenance.extra.averaged_from'"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.bleu.json",
                         lambda d: d["provenance"]["extra"]["test_set"]["reference"].update(lines="ten")),
     "field 'provenance.extra.test_set.reference.lines'"),
])
def test_a_malformed_record_is_refused_naming_its_file_and_field(copy: Path, capsys, damage, named: str) -> None:
    damage(copy)
    rc, _, err = run(capsys, "check", "--run", str(copy))
    assert rc == 2 and named in refusal(err)


def test_a_folder_that_is_no_run_is_refused(tmp_path: Path, capsys) -> None:
    rc, _, err = run(capsys, "check", "--run", str(tmp_path))
    assert rc == 2 and "not the folder of a training run" in refusal(err)


# -- records that disagree with how the run writes them (each fails the claims that read them) --------

def _edit_checkpoint(path: Path, change) -> None:
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def _drop_row(path: Path, step: int, copies: int = 0) -> None:
    """The row of ``step`` left out of the run's metrics log (``copies``: written that many times instead)."""
    rows = list(csv.DictReader((path / "metrics.csv").open()))
    with (path / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for row in rows for r in ([row] * copies if row["step"] == str(step) else [row]))


def _overlapping_sessions(record: dict) -> None:
    """The run's one session split in two that overlap: the second resumed before the first ended."""
    first = record["sessions"][0]
    record["sessions"] = [dict(first, ended_at=4), dict(first, resumed_from=2)]


@pytest.mark.parametrize("damage, claims, named", [
    (lambda p: _drop_row(p, 3), ("observed.eq3.rates", "observed.batch-tokens", "observed.train-steps.base"),
     "metrics.csv: no row for update 3, which the run logged (log_every 1"),
    (lambda p: _drop_row(p, 3, copies=2), ("observed.eq3.rates", "observed.batch-tokens", "observed.train-steps.base"),
     "metrics.csv line 5: step 3 after step 3"),
    (lambda p: (p / "metrics.csv").write_text((p / "metrics.csv").read_text().splitlines()[0] + "\n"),
     ("observed.eq3.rates", "observed.warmup-steps", "observed.batch-tokens"), "metrics.csv: no row for update 1"),
    (lambda p: edit_log(p, 1, "step", "0"), ("observed.warmup-steps", "observed.eq3.rates"),
     "metrics.csv line 2: step 0; updates count from 1"),
    (lambda p: (p / "checkpoints" / "step_00000004.pt").rename(p / "checkpoints" / "step_00000003.pt"),
     ("observed.checkpoint-interval", "observed.average.base"), "step_00000003.pt: holds update 4 (its field 'step')"),
    (lambda p: (p / "checkpoints" / "step_00000004.pt").unlink(), ("observed.checkpoint-interval",),
     "step_00000004.pt is missing: the run writes a checkpoint every 2 updates"),
    (lambda p: _edit_checkpoint(p / "checkpoints" / "step_00000006.pt", lambda s: s["model_config"].update(dropout=0.3)),
     ("observed.dropout.base", "observed.dimensions.base"),
     "step_00000006.pt: field 'model_config.dropout' is 0.3, but the run's recipe builds dropout 0.1"),
    (lambda p: _edit_checkpoint(p / "checkpoints" / "step_00000006.pt", lambda s: s["model_config"].update(d_ff=128)),
     ("observed.dimensions.base",), "step_00000006.pt: field 'model_config.d_ff' is 128, but the run's recipe builds "
                                    "d_ff 64"),
    (lambda p: edit_json(p / "run.json", lambda d: d["sessions"][0].update(ended_at=4)),
     ("observed.hardware", "observed.train-steps.base", "sec5.step-time.base"),
     "run.json: field 'sessions[0].ended_at' is 4, but field 'steps' is 6"),
    (lambda p: edit_json(p / "run.json", _overlapping_sessions),
     ("observed.hardware", "observed.train-steps.base", "sec5.step-time.base"),
     "run.json: field 'sessions[1].resumed_from' is 2, but the session before it ended at update 4"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.bleu.json",
                         lambda d: d["provenance"]["extra"].update(measure="bleu.tokenized-compound-split")),
     ("observed.bleu-protocol",), "field 'provenance.extra.measure' is 'bleu.tokenized-compound-split', but its BLEU "
                                  "was computed as field 'provenance.bleu_signature' says: 'protocol:sacrebleu'"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.ppl.json",
                         lambda d: d["provenance"]["extra"]["recipe_identity"]["train"].update(seed=9)
                         or d["provenance"].update(config_hash=config_hash(d["provenance"]["extra"]["recipe_identity"]))),
     ("observed.average.base",), "local.multi30k.ppl.json: field 'provenance.config_hash'"),
    (lambda p: edit_json(p / "evaluations" / "local.multi30k.bleu.json",
                         lambda d: d["provenance"]["extra"].update(steps=7)),
     ("observed.beam-size", "observed.test-set.table2-ende", "table2.bleu.base-ende"),
     "field 'provenance.extra.steps' is 7, but the run made 6 updates"),
    (lambda p: edit_json(p / "encoded" / "manifest.json", lambda d: d.update(pairs=4_500_000))
     or edit_json(p / "run.json", lambda d: d["corpus"].update(trained=4_500_000, pairs=4_500_000 + d["corpus"]["filtered"])),
     ("observed.corpus.ende",), "pairs, its manifest says 4500000"),
])
def test_records_the_run_did_not_write_so_fail_the_claims_that_read_them(copy: Path, damage, claims, named) -> None:
    damage(copy)
    records = verdicts(copy)
    for claim in claims:
        assert records[claim].status.value == "fail", (claim, records[claim].detail)
        assert named in records[claim].detail and str(copy) in records[claim].detail, (claim, records[claim].detail)


@pytest.mark.parametrize("value, named", [(-0.4, "less than or equal to the minimum of 0"), ("0.4", "must be of type")])
def test_a_step_time_that_is_no_duration_is_refused(copy: Path, capsys, value, named: str) -> None:
    edit_json(copy / "run.json", lambda d: d["sessions"][0]["step_time"].update(steady_s_per_update=value))
    rc, _, err = run(capsys, "check", "--run", str(copy))
    assert rc == 2 and "run.json: field 'sessions.0.step_time.steady_s_per_update'" in refusal(err) and named in err
