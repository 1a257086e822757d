"""``repro check --run`` on runs whose records show a departure their settings do not (a fourth round).

Three real ``repro train --recipe base`` runs at toy size (a 1-layer model, a 200-pair corpus): one of
two sessions (6 updates, resumed to 10) averaged and evaluated as the paper's pipeline does, one
resumed with another checkpoint spacing, one whose log holds no update inside its warm-up. Copies of
them are edited the way a run goes wrong unseen: the records of one session lost or written by another
config, an older checkpoint's Adam that did not follow Eq. 3 or the recipe's betas, an optimizer with
weight decay, a loss that never smoothed, an update plan that is not the recipe's, a session of half
batches hidden by the run's median, an evaluation of one checkpoint filed as an average, an average of
another run's checkpoints. Each must fail, depart or read "needs another run" on the claim that reads
it, never pass; where the paper's value sits at toy scale, the claim is given the toy run's value
(``at_toy_scale``) so that a pass is possible and the departure is what turns it.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from repro.checks import select_claims
from repro.checks.run_check import check_run
from repro.content_hash import file_sha256
from repro.files.reader import load_torch
from tests.cli_run import succeed as repro

pytestmark = pytest.mark.xdist_group("observed-run-round4")

MODEL = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}
SETS = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, checkpoint_every_steps=2,
            keep_checkpoints=20, log_every=1, device="cpu", threads=1)
PAPER = "evaluations/evaluate.test.bleu.tokenized-compound-split.json"
SACRE = "evaluations/evaluate.test.bleu.sacrebleu.json"


@pytest.fixture(scope="module")
def train(tmp_path_factory, tiny_multi30k):
    """``train(name, steps, **sets)``: one session of ``repro train --recipe base`` (a second call resumes it) on
    ``train.data`` unless ``sets`` name another ``dataset``; ``recipe=`` another of the paper's recipes."""
    root = tmp_path_factory.mktemp("round4")
    data = tiny_multi30k(root / "tiny", {"train": 200, "dev": 10, "test": 10})

    def session(name: str, steps: int, recipe: str = "base", **sets) -> Path:
        argv = ["train", "--recipe", recipe, "--out-dir", str(root / name), "--set", f"dataset={sets.pop('dataset', data)}",
                "--set", f"model_overrides={json.dumps(MODEL)}", "--set", f"max_steps={steps}"]
        for key, value in {**SETS, **sets}.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        repro(*argv)
        return root / name

    session.data = data
    return session


@pytest.fixture(scope="module")
def evaluated(train) -> Path:
    """6 updates, resumed to 10, its last 5 checkpoints averaged and evaluated (beam 4, alpha 0.6, input + 50)."""
    train("resumed", 6)
    out = train("resumed", 10)
    repro("average", str(out), "--last", "5")
    repro("evaluate", "--checkpoint", str(out / "average_last5.pt"), "--ppl-split", "none")
    return out


@pytest.fixture
def copy(evaluated: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(evaluated, tmp_path / "run"))


def verdicts(path: Path, *claims: str, toy: dict | None = None) -> dict:
    chosen = [dataclasses.replace(c, expected=(toy or {}).get(c.id, c.expected))
              for c in select_claims() if c.id in claims]
    return {r.claim.id: r for r in check_run(path, claims=chosen).records}


def status(record) -> str:
    return record.status.value


def checkpoint(path: Path, step: int) -> Path:
    return path / "checkpoints" / f"step_{step:08d}.pt"


def edit_checkpoint(path: Path, change) -> None:
    state = load_torch(path)   # as the project reads a checkpoint: no pickle runs
    change(state)
    torch.save(state, path)


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_rows(path: Path, change) -> None:
    rows = list(csv.DictReader((path / "metrics.csv").open()))
    rows = change(rows) or rows
    with (path / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_untouched_resumed_run_holds_every_claim_these_edits_turn(evaluated: Path) -> None:
    claims = ("observed.eq3.rates", "observed.warmup-steps", "observed.adam", "observed.label-smoothing.loss",
              "observed.average.base", "observed.train-steps.base", "observed.batch-tokens",
              "observed.checkpoint-interval")
    records = verdicts(evaluated, *claims)
    assert {c: status(records[c]) for c in claims} == {
        **dict.fromkeys(claims[:5], "pass"), **dict.fromkeys(claims[5:], "departs")}, {c: records[c].detail for c in claims}
    smoothing = records["observed.label-smoothing.loss"]
    assert smoothing.measured[0] > 0 and "allow eps_ls" in smoothing.detail   # a bound the loss gives, not the setting


@pytest.mark.parametrize("drop", [slice(0, 6), slice(2, 3)], ids=["first-session", "one-row"])
def test_rows_of_an_earlier_session_missing_fail_not_pass_on_the_rest(copy: Path, drop: slice) -> None:
    edit_rows(copy, lambda rows: rows[:drop.start] + rows[drop.stop:])
    records = verdicts(copy, "observed.eq3.rates", "observed.warmup-steps")
    for record in records.values():   # was: pass on the rows of the last session
        assert status(record) == "fail", record.detail
        assert f"no row for update {drop.start + 1}" in record.detail and "its session 0" in record.detail


def test_an_older_checkpoints_adam_rate_off_eq3_fails(copy: Path) -> None:
    edit_checkpoint(checkpoint(copy, 4), lambda s: s["optimizer"]["param_groups"][0].update(lr=1e-3))
    record = verdicts(copy, "observed.eq3.rates")["observed.eq3.rates"]
    assert status(record) == "fail" and "step_00000004.pt: Adam's rate 0.001 after update 4" in record.detail


@pytest.mark.parametrize("step, change, said", [
    (4, {"betas": (0.9, 0.999)}, "[0.9, 0.999, 1e-09] are not the run's recipe's [0.9, 0.98, 1e-09]"),
    *[(step, {"weight_decay": 0.01}, "holds weight_decay 0.01: not the paper's Adam") for step in (4, 10)],
    *[(step, {"amsgrad": True}, "holds amsgrad True: not the paper's Adam") for step in (4, 10)],
])
def test_a_checkpoints_adam_that_is_not_the_recipes_fails(copy: Path, change: dict, said: str, step: int) -> None:
    edit_checkpoint(checkpoint(copy, step), lambda s: s["optimizer"]["param_groups"][0].update(change))
    record = verdicts(copy, "observed.adam")["observed.adam"]
    assert status(record) == "fail" and f"step_{step:08d}.pt" in record.detail and said in record.detail


def test_a_loss_that_never_smoothed_fails_label_smoothing(copy: Path) -> None:
    def unsmoothed(rows):
        for row in rows:
            row["loss"] = row["nll"]
    edit_rows(copy, unsmoothed)
    record = verdicts(copy, "observed.label-smoothing.loss")["observed.label-smoothing.loss"]
    assert status(record) == "fail" and "the loss is its NLL: no smoothing" in record.detail
    assert "label_smoothing 0.1" in record.detail


@pytest.mark.parametrize("loss, verdict", [(3.08, "fail"), (3.4, "pass")])
def test_the_loss_bounds_the_smoothing_from_above_once_the_nll_is_below_log_v(copy: Path, loss: float,
                                                                               verdict: str) -> None:
    """NLL 3.0 < log 298: eps <= (loss - NLL) / (log 298 - NLL); 3.08 allows at most 0.03 (smoothed with 0.02,
    say: U = 7), 3.4 at most 0.15 (smoothed with 0.1)."""
    def trained(rows):
        rows[-1]["nll"], rows[-1]["loss"] = "3.0", str(loss)
    edit_rows(copy, trained)
    record = verdicts(copy, "observed.label-smoothing.loss")["observed.label-smoothing.loss"]
    assert status(record) == verdict, record.detail
    assert verdict == "pass" or "allows eps_ls at most 0.02966" in record.detail


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_a_non_finite_loss_fails_label_smoothing(copy: Path, bad: str) -> None:
    edit_rows(copy, lambda rows: rows[3].update(loss=bad))
    record = verdicts(copy, "observed.label-smoothing.loss")["observed.label-smoothing.loss"]
    assert status(record) == "fail" and "line 5 (step 4): loss is not finite" in record.detail


def test_a_log_without_the_loss_needs_another_run(copy: Path) -> None:
    edit_rows(copy, lambda rows: [{k: v for k, v in r.items() if k not in ("loss", "nll")} for r in rows])
    record = verdicts(copy, "observed.label-smoothing.loss")["observed.label-smoothing.loss"]
    assert status(record) == "not run" and "keeps no loss and NLL" in record.detail


@pytest.mark.parametrize("plan, field", [({"tokens_per_batch": 25000, "tokens_per_update": 25000}, "tokens_per_batch"),
                                         ({"accumulation": 2, "tokens_per_micro_batch": 200}, "accumulation")])
def test_an_update_plan_that_is_not_the_recipes_fails(copy: Path, plan: dict, field: str) -> None:
    edit_json(copy / "run.json", lambda d: d["update_plan"].update(plan))
    record = verdicts(copy, "observed.batch-tokens")["observed.batch-tokens"]
    assert status(record) == "fail" and f"field 'update_plan.{field}' is {plan[field]}" in record.detail


def test_a_session_of_half_batches_fails_though_the_runs_median_passes(copy: Path) -> None:
    shutil.rmtree(copy / "encoded")   # nothing to recount them from: the logged counts only
    rows = list(csv.DictReader((copy / "metrics.csv").open()))
    median = [sorted(int(r[c]) for r in rows)[len(rows) // 2] for c in ("src_tokens", "tgt_tokens")]
    toy = {"observed.batch-tokens": median}   # the run's own median as the claim's batch

    def halved(rows):
        for row in rows[6:]:   # the resumed session's 4 updates
            row["src_tokens"], row["tgt_tokens"] = str(int(row["src_tokens"]) // 2), str(int(row["tgt_tokens"]) // 2)
    assert status(verdicts(copy, "observed.batch-tokens", toy=toy)["observed.batch-tokens"]) == "pass"
    edit_rows(copy, halved)
    record = verdicts(copy, "observed.batch-tokens", toy=toy)["observed.batch-tokens"]
    assert status(record) == "fail", record.detail   # was: pass on the run's median
    assert "the 4 counted updates of its session 1 (updates 7-10" in record.detail


def test_a_record_that_scored_one_checkpoint_but_lists_five_averaged_fails(copy: Path) -> None:
    for name in (PAPER, SACRE):
        edit_json(copy / name, lambda d: d["provenance"]["extra"].update(
            evaluated_checkpoint="step_00000010.pt", evaluated_sha256=file_sha256(checkpoint(copy, 10))))
    records = verdicts(copy, "observed.average.base", "observed.average-spacing")
    for record in records.values():
        assert status(record) == "fail" and "'step_00000010.pt', a training checkpoint scored as it is" in record.detail


@pytest.mark.parametrize("forged", ["identities", "lineage"])
def test_an_average_of_another_runs_checkpoints_fails(copy: Path, forged: str) -> None:
    """The evaluation record keeps no identities of its own (an older repro): the averaged file's are read."""
    def other(state):
        if forged == "identities":
            state["averaged_checkpoints"][0]["sha256"] = "0" * 64
        else:
            state["lineage"]["vocab_sha256"] = "1" * 64
    edit_checkpoint(copy / "average_last5.pt", other)
    for name in (PAPER, SACRE):
        edit_json(copy / name, lambda d: (d["provenance"]["extra"].pop("averaged"), d["provenance"]["extra"].update(
            evaluated_sha256=file_sha256(copy / "average_last5.pt"))))
    record = verdicts(copy, "observed.average.base")["observed.average.base"]
    assert status(record) == "fail", record.detail
    assert f"average_last5.pt: field '{'averaged_checkpoints[0].sha256' if forged == 'identities' else 'lineage.vocab_sha256'}'" \
        in record.detail


def test_a_checkpoint_not_holding_its_sessions_recipe_fails(copy: Path) -> None:
    for step in (2, 4, 6):   # written by session 0, whose record says label_smoothing 0.1
        edit_checkpoint(checkpoint(copy, step), lambda s: s["train_config"].update(label_smoothing=0.0))
    record = verdicts(copy, "observed.label-smoothing")["observed.label-smoothing"]
    assert status(record) == "fail", record.detail
    assert "field 'sessions[0].train.label_smoothing' is 0.1, but step_00000002.pt" in record.detail


def test_a_record_of_other_max_steps_than_its_recipe_fails(copy: Path) -> None:
    edit_json(copy / "run.json", lambda d: d.update(max_steps=100000))
    record = verdicts(copy, "observed.train-steps.base")["observed.train-steps.base"]
    assert status(record) == "fail" and "field 'max_steps' is 100000" in record.detail   # was: departs, "ran 10 of 100000"


def test_a_resume_that_changed_the_checkpoint_spacing_departs_naming_the_update(train) -> None:
    train("spacing", 4)
    path = train("spacing", 6, checkpoint_every_steps=1)
    record = verdicts(path, "observed.checkpoint-interval")["observed.checkpoint-interval"]
    assert status(record) == "departs", record.detail   # was: fail, step_00000002.pt "off" the last session's spacing
    assert "checkpoint_every_steps/checkpoint_every_minutes (2, 0.0) for updates 1-4, then (1, 0.0) from update 5" \
        in record.detail


@pytest.fixture(scope="module")
def past_warmup(train) -> Path:
    """Warm-up 2, a row every 3 updates: no logged update lies inside the warm-up."""
    return train("past-warmup", 6, warmup_steps=2, log_every=3)


def test_no_logged_update_inside_the_warmup_needs_another_run(past_warmup: Path) -> None:
    record = verdicts(past_warmup, "observed.warmup-steps", toy={"observed.warmup-steps": 2})["observed.warmup-steps"]
    assert status(record) == "not run", record.detail   # was: pass, on the recipe's value
    assert "logs no update inside the warm-up" in record.detail


def test_a_row_before_the_warmup_ends_at_the_decays_rate_fails(copy: Path) -> None:
    edit_rows(copy, lambda rows: rows[2].update(lr=repr(32 ** -0.5 * 3 ** -0.5)))   # Eq. 3 past a warm-up of 3
    record = verdicts(copy, "observed.warmup-steps")["observed.warmup-steps"]
    assert status(record) == "fail" and "(step 3): lr" in record.detail and "warms up over 3 updates" in record.detail


def test_one_kept_checkpoint_shows_no_spacing(past_warmup: Path, tmp_path: Path) -> None:
    path = Path(shutil.copytree(past_warmup, tmp_path / "run"))
    toy = {"observed.checkpoint-interval": round(2 * 0.4 / 60, 4)}   # the recipe's spacing at the paper's step time
    assert status(verdicts(path, "observed.checkpoint-interval", toy=toy)["observed.checkpoint-interval"]) == "pass"
    for step in (2, 4):
        checkpoint(path, step).unlink()
    keep = {"keep_checkpoints": 1, "average_last": 1}
    edit_json(path / "run.json", lambda d: [d["recipe"]["train"].update(keep)] + [s["train"].update(keep) for s in d["sessions"]])
    edit_checkpoint(checkpoint(path, 6), lambda s: (s["train_config"].update(keep), s["recipe"]["train"].update(keep)))
    record = verdicts(path, "observed.checkpoint-interval", toy=toy)["observed.checkpoint-interval"]
    assert status(record) == "not run" and "keeps one checkpoint (update 6)" in record.detail   # was: pass on the recipe


def test_a_session_on_the_cpu_of_a_p100_machine_did_not_train_on_p100s(copy: Path) -> None:
    """The hardware line describes the machine; the session's device says where it trained."""
    def on_p100s(record):
        for session in record["sessions"]:
            session.update(devices=8, hardware="8x Tesla P100-SXM2-16GB (CUDA 12.1), torch 2.13.0")
        record["update_plan"]["world_size"] = 8
    edit_json(copy / "run.json", on_p100s)
    record = verdicts(copy, "observed.hardware")["observed.hardware"]
    assert status(record) == "departs", record.detail   # was: pass, on the machine's line
    assert "8 x CPU (device 'cpu' on a machine of 8x Tesla P100-SXM2-16GB, unused)" in record.detail


def test_a_target_vocabulary_other_than_the_shared_one_fails(copy: Path) -> None:
    # untied, as a model of two vocabularies must be (with the embeddings shared the checkpoint's
    # config builds no model, and every reader refuses it naming the field: tests/test_bad_input_round9.py)
    edit_checkpoint(checkpoint(copy, 10), lambda s: s["model_config"].update(tgt_vocab_size=400, share_embeddings=False))
    record = verdicts(copy, "observed.vocabulary.ende")["observed.vocabulary.ende"]
    assert status(record) == "fail", record.detail   # was: departs, on the source side's 300 alone
    assert "embeds 400 (field 'model_config.tgt_vocab_size')" in record.detail
