"""``repro check --run`` on runs a user makes that depart from the paper in one way (a second fresh-eyes round).

Each run is a real ``repro train --recipe base`` of a few updates at toy size (a 1-layer model, a 200-pair
corpus): it stands for the paper's base EN-DE job, and where it departs in one way the check must say
so on the claim that reads it, with the right cause:

- a run resumed with another warm-up (or with label smoothing turned on) departs, naming the update the
  recipe changed at; it neither fails as if its log were wrong nor passes on its last session's value;
- a run resumed with the same recipe reads as one run;
- a ``run.json`` whose recipe is not its checkpoint's (any field) contradicts it;
- a pre-norm model, untied embeddings and learned positions depart from Sections 3.1, 3.4 and 3.5, read
  off the checkpoint's weights, and weights that are not what the model config says fail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from repro.checks.run_check import check_run
from tests.cli_run import run

pytestmark = pytest.mark.xdist_group("observed-run-round2")

MODEL = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}
SETS = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, checkpoint_every_steps=2,
            keep_checkpoints=20, log_every=1, device="cpu", threads=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_multi30k) -> Path:
    return tiny_multi30k(tmp_path_factory.mktemp("round2") / "tiny", {"train": 200, "dev": 10, "test": 10})


@pytest.fixture(scope="module")
def train(data: Path, tmp_path_factory):
    """``train(name, steps, model=..., **sets)``: one session of ``repro train --recipe base`` in the run
    ``name`` (a second call resumes it)."""
    root = tmp_path_factory.mktemp("runs")

    def session(name: str, steps: int, model: dict | None = None, recipe: str = "base", **sets) -> Path:
        argv = ["train", "--recipe", recipe, "--out-dir", str(root / name), "--set", f"dataset={data}",
                "--set", f"model_overrides={json.dumps({**MODEL, **(model or {})})}", "--set", f"max_steps={steps}"]
        for key, value in {**SETS, **sets}.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        rc, _, err = run(_Quiet(), *argv)
        assert rc == 0, err
        return root / name

    return session


class _Quiet:
    """capsys's readouterr for an in-process run outside a test's capture."""

    def readouterr(self):
        return "", ""


def verdicts(path: Path) -> dict[str, object]:
    return {r.claim.id: r for r in check_run(path).records}


@pytest.fixture(scope="module")
def resumed(train) -> Path:
    """4 updates, then resumed to 6 with the same recipe."""
    train("resumed", 4)
    return train("resumed", 6)


def test_a_resume_with_the_same_recipe_reads_as_one_run(resumed: Path) -> None:
    records = verdicts(resumed)
    for claim in ("observed.eq3.rates", "observed.warmup-steps", "observed.adam", "observed.label-smoothing",
                  "observed.dropout.base", "observed.post-norm", "observed.shared-weights", "observed.positional"):
        assert records[claim].status.value == "pass", (claim, records[claim].detail)
    assert records["observed.warmup-steps"].measured == 4000


def test_a_resume_with_another_warmup_departs_naming_the_update(train) -> None:
    train("warmup", 4)
    records = verdicts(train("warmup", 6, warmup_steps=2000))
    for claim in ("observed.eq3.rates", "observed.warmup-steps"):
        record = records[claim]
        assert record.status.value == "departs", (claim, record.detail)   # was: eq3 failed on the log's line 2
        assert "4000 for updates 1-4, then 2000 from update 5" in record.detail.replace("(4000, 1.0)", "4000") \
            .replace("(2000, 1.0)", "2000"), record.detail
        assert "resumed with another recipe" in record.detail


def test_a_resume_that_turns_label_smoothing_on_departs(train) -> None:
    train("smoothing", 4, label_smoothing=0.0)
    record = verdicts(train("smoothing", 6))["observed.label-smoothing"]
    assert record.status.value == "departs", record.detail   # was: pass, read off the last session alone
    assert "label_smoothing 0.0 for updates 1-4, then 0.1 from update 5" in record.detail
    assert "sessions[1].train" in record.detail   # the run's record now keeps each session's recipe


def test_the_history_is_read_off_the_checkpoints_where_the_record_keeps_none(train, tmp_path: Path) -> None:
    train("older", 4, label_smoothing=0.0)
    path = Path(shutil.copytree(train("older", 6), tmp_path / "older"))
    record = json.loads((path / "run.json").read_text())
    for session in record["sessions"]:   # a record written before sessions kept their recipe
        del session["train"]
    (path / "run.json").write_text(json.dumps(record))
    detail = verdicts(path)["observed.label-smoothing"].detail
    assert "then 0.1 from update 5" in detail and "step_00000006.pt" in detail


@pytest.mark.parametrize("field, value", [(("train", "adam_beta2"), 0.999), (("train", "warmup_steps"), 8000),
                                          (("name",), "local")])
def test_a_record_whose_recipe_is_not_its_checkpoints_fails(resumed: Path, tmp_path: Path, field, value) -> None:
    path = Path(shutil.copytree(resumed, tmp_path / "run"))
    record = json.loads((path / "run.json").read_text())
    target = record["recipe"]
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    (path / "run.json").write_text(json.dumps(record))
    records = verdicts(path)
    wanted = f"field 'recipe.{'.'.join(field)}' is {value!r}, but the run's checkpoint step_00000006.pt holds"
    for claim in ("observed.adam", "observed.eq3.rates", "observed.dimensions.base"):   # adam passed before
        assert records[claim].status.value == "fail" and wanted in records[claim].detail, records[claim].detail
    assert records["observed.dimensions.big"].status.value == "not run"   # about another job: still not this run's


@pytest.mark.parametrize("model, claim, value", [
    ({"norm_first": True}, "observed.post-norm", "pre-norm"),
    ({"share_embeddings": False, "tie_output": False}, "observed.shared-weights", "three separate matrices"),
    ({"tie_output": False}, "observed.shared-weights", "only src_embed=tgt_embed tied"),
    ({"positional": "learned"}, "observed.positional", "learned"),
])
def test_a_model_built_otherwise_than_section_3_departs(train, model, claim, value) -> None:
    name = "-".join(f"{k}{v}" for k, v in model.items())
    records = verdicts(train(name, 2, model=model))
    assert records[claim].status.value == "departs", records[claim].detail
    assert records[claim].measured == value and "the run was asked for it" in records[claim].detail
    others = {"observed.post-norm", "observed.shared-weights", "observed.positional"} - {claim}
    assert all(records[c].status.value == "pass" for c in others), {c: records[c].detail for c in others}


def test_a_run_of_table_3_row_e_is_not_held_to_sinusoids(train) -> None:
    """Row E learns its positions as the paper specifies it: not a departure from Section 3.5."""
    records = verdicts(train("row-e", 2, model={"positional": "learned"}, recipe="table3-E-learned"))
    record = records["observed.positional"]
    assert record.status.value == "not run" and "table3-E-learned, whose recipe builds learned" in record.detail
    assert records["observed.post-norm"].status.value == "pass"


def test_weights_that_are_not_the_model_config_fail(resumed: Path, tmp_path: Path) -> None:
    path = Path(shutil.copytree(resumed, tmp_path / "run"))
    newest = path / "checkpoints" / "step_00000006.pt"
    state = torch.load(newest, weights_only=True)
    state["model"]["output_projection.weight"] = state["model"]["output_projection.weight"].clone()   # untied
    torch.save(state, newest)
    record = verdicts(path)["observed.shared-weights"]
    assert record.status.value == "fail", record.detail
    assert "step_00000006.pt: its weights are only src_embed=tgt_embed tied" in record.detail


def test_a_record_of_another_parameter_count_than_the_weights_fails(resumed: Path, tmp_path: Path) -> None:
    path = Path(shutil.copytree(resumed, tmp_path / "run"))
    record = json.loads((path / "run.json").read_text())
    counted, record["parameters"] = record["parameters"], 65_000_000   # Table 3's base model
    (path / "run.json").write_text(json.dumps(record))
    detail = verdicts(path)["observed.dimensions.base"].detail
    assert f"field 'parameters' is 65,000,000, but the weights of step_00000006.pt hold {counted:,}" in detail


def test_a_missing_last_checkpoint_is_named_not_the_log(resumed: Path, tmp_path: Path) -> None:
    """run.json and the log say 6 updates; step_00000006.pt is gone: the checkpoint is what is missing."""
    path = Path(shutil.copytree(resumed, tmp_path / "run"))
    (path / "checkpoints" / "step_00000006.pt").unlink()
    records = verdicts(path)
    for claim in ("observed.eq3.rates", "observed.train-steps.base"):   # was: "the log ends at step 6, but the run made 4"
        assert records[claim].status.value == "fail"
        assert "step_00000006.pt is missing" in records[claim].detail, records[claim].detail


def test_a_resume_asking_other_betas_applies_them_and_departs_from_that_update(train) -> None:
    """``repro train`` resumed with other betas runs them (it used to keep the checkpoint's, silently): the run
    asked for 0.999 from update 5, its newest checkpoint's Adam holds 0.999, and the claim departs naming the
    change; a run whose Adam holds what its recipe did not ask (older code, a hand edit) still fails."""
    train("betas", 4)
    path = train("betas", 6, adam_beta2=0.999)
    record = verdicts(path)["observed.adam"]
    assert record.status.value == "departs", record.detail
    assert "then (0.9, 0.999, 1e-09) from update 5" in record.detail
    newest = torch.load(path / "checkpoints" / "step_00000006.pt", map_location="cpu", weights_only=False)
    assert tuple(newest["optimizer"]["param_groups"][0]["betas"]) == (0.9, 0.999)
    newest["optimizer"]["param_groups"][0]["betas"] = (0.9, 0.98)   # Adam kept the first session's betas
    torch.save(newest, path / "checkpoints" / "step_00000006.pt")
    record = verdicts(path)["observed.adam"]
    assert record.status.value == "fail", record.detail
    assert "Adam kept the betas of the checkpoint it resumed from" in record.detail
