"""``repro evaluate`` records its evaluation in the run folder, and ``repro check --run`` reads Section 6.1 off it.

One tiny real run (``repro train --recipe base``: a 1-layer model, 10 updates, a checkpoint every 2) is
averaged and evaluated as the paper's pipeline does (train -> average the last 5 -> evaluate with beam 4,
alpha 0.6, input + 50), and again with one evaluation setting changed each (3 checkpoints averaged, beam 1,
alpha 1.0, a greedy search, input + 10, a training checkpoint not averaged): the record of each must say
what ran, and the observed claims must pass the first, fail each departure on the claim that reads it,
fail hand-edited records (a hash that is not the file's, sacreBLEU filed as tokenized BLEU, NaN, an empty
list or search), and read "needs another run" only where no evaluation was recorded.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from repro.checks.run_check import check_run
from repro.claims.loader import load_claims
from repro.content_hash import file_sha256
from repro.errors import ResultError
from repro.observed.gate import not_counted
from repro.results.store import Result
from repro.train.checkpoint import load_checkpoint, save_checkpoint
from tests.cli_run import run, succeed as repro

pytestmark = pytest.mark.xdist_group("observed-evaluation-records")

MODEL = {"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4}
SETS = dict(vocab_size=300, tokens_per_batch=400, max_tokens_per_device=400, checkpoint_every_steps=2,
            keep_checkpoints=20, log_every=1, device="cpu", threads=1, max_steps=10)
#: The claims of Section 6.1's evaluation the records show.
CLAIMS = ("observed.average.base", "observed.average-spacing", "observed.beam-size", "observed.length-penalty",
          "observed.max-output-length", "observed.early-termination", "observed.bleu-protocol")
PAPER = "evaluate.test.bleu.tokenized-compound-split.json"
SACRE = "evaluate.test.bleu.sacrebleu.json"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_multi30k) -> Path:
    data = tiny_multi30k(tmp_path_factory.mktemp("evalrec") / "tiny", {"train": 200, "dev": 10, "test": 10})
    out = tmp_path_factory.mktemp("runs") / "trained"
    argv = ["train", "--recipe", "base", "--out-dir", str(out), "--set", f"dataset={data}",
            "--set", f"model_overrides={json.dumps(MODEL)}"]
    for key, value in SETS.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    repro(*argv)
    return out


@pytest.fixture(scope="module")
def evaluated(trained: Path, tmp_path_factory):
    """``evaluated(name, *flags, average=K)``: a copy of the run, averaged over its last K checkpoints (None:
    its newest checkpoint evaluated as is) and evaluated with ``flags``; made once per name."""
    root, made = tmp_path_factory.mktemp("evaluated"), {}

    def make(name: str, *flags: str, average: int | None = 5) -> Path:
        if name not in made:
            out = root / name
            shutil.copytree(trained, out)
            checkpoint = out / "checkpoints" / "step_00000010.pt"
            if average is not None:
                repro("average", str(out), "--last", str(average))
                checkpoint = out / f"average_last{average}.pt"
            repro("evaluate", "--checkpoint", str(checkpoint), "--ppl-split", "none", *flags)
            made[name] = out
        return made[name]

    return make


@pytest.fixture
def paper_run(evaluated, tmp_path: Path) -> Path:
    """A copy of the run evaluated as the paper's pipeline does, to edit."""
    copy = tmp_path / "run"
    shutil.copytree(evaluated("paper"), copy)
    return copy


def verdicts(path: Path) -> dict[str, object]:
    return {r.claim.id: r for r in check_run(path, only=CLAIMS).records}


def status(record) -> str:
    return "needs another run" if str(record.status) == "not run" else str(record.status)


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_record_says_what_the_evaluation_ran(evaluated) -> None:
    out = evaluated("paper")
    record = json.loads((out / "evaluations" / PAPER).read_text())
    extra = record["provenance"]["extra"]
    assert extra["averaged_from"] == [f"step_{s:08d}.pt" for s in (2, 4, 6, 8, 10)]
    assert [(a["name"], a["step"], a["sha256"]) for a in extra["averaged"]] == \
        [(f"step_{s:08d}.pt", s, file_sha256(out / "checkpoints" / f"step_{s:08d}.pt")) for s in (2, 4, 6, 8, 10)]
    assert extra["evaluated_checkpoint"] == "average_last5.pt"
    assert extra["evaluated_sha256"] == file_sha256(out / "average_last5.pt")
    assert {k: extra["decode"][k] for k in ("search", "beam_size", "alpha", "max_len_offset", "stop")} == \
        {"search": "beam", "beam_size": 4, "alpha": 0.6, "max_len_offset": 50, "stop": "early"}
    assert extra["test_set"]["sentences"] == 10 and extra["test_set"]["hypotheses"]["lines"] == 10
    assert record["provenance"]["bleu_signature"].startswith("protocol:paper|")
    assert record["provenance"]["commit"] and record["provenance"]["hardware"]
    assert math.isfinite(record["measured"])
    assert json.loads((out / "evaluations" / SACRE).read_text())["provenance"]["bleu_signature"].startswith(
        "protocol:sacrebleu|")


def test_the_papers_evaluation_passes_every_claim_it_shows(evaluated) -> None:
    got = {k: status(r) for k, r in verdicts(evaluated("paper")).items()}
    assert got == {**dict.fromkeys(CLAIMS, "pass"),
                   "observed.average-spacing": "departs"}   # asked for a checkpoint every 2 updates, not 1500


@pytest.mark.parametrize(("name", "flags", "average", "claim", "said"), [
    ("avg3", (), 3, "observed.average.base", "averages the last 5"),
    ("beam1", ("--beam", "1"), 5, "observed.beam-size", "decode.beam_size' is 1"),
    ("alpha1", ("--alpha", "1.0"), 5, "observed.length-penalty", "decode.alpha' is 1.0"),
    ("greedy", ("--greedy",), 5, "observed.length-penalty", "greedy search"),
    ("greedy", ("--greedy",), 5, "observed.beam-size", "decode.beam_size' is 1"),
    ("len10", ("--max-len-offset", "10"), 5, "observed.max-output-length", "decode.max_len_offset' is 10"),
    ("newest", (), None, "observed.average.base", "averages the last 5"),
    ("newest", (), None, "observed.average-spacing", "averaged one checkpoint"),
])
def test_a_run_evaluated_otherwise_fails_the_claim_that_reads_it(evaluated, name, flags, average, claim, said) -> None:
    got = verdicts(evaluated(name, *flags, average=average))
    assert status(got[claim]) == "fail" and said in got[claim].detail, got[claim].detail
    others = [c for c in CLAIMS if c not in (claim, "observed.average-spacing") and status(got[c]) != "pass"]
    assert others == [] or name in ("greedy", "newest"), [(c, got[c].detail) for c in others]


def _perturbed(path: Path) -> None:
    state = load_checkpoint(path)
    name = next(iter(state["model"]))
    state["model"][name] = state["model"][name] + 1.0
    save_checkpoint(path, {k: v for k, v in state.items() if k not in ("format", "version")})


def _sacre_as_paper(run_dir: Path) -> None:
    sacre = json.loads((run_dir / "evaluations" / SACRE).read_text())
    edit(run_dir / "evaluations" / PAPER, lambda d: d.update(measured=sacre["measured"] + 0.5))


def _translations_elsewhere(run_dir: Path) -> None:
    """The run's translations not on this machine: its BLEU cannot be recomputed from them."""
    next(run_dir.glob("hypotheses.evaluate.*")).unlink()
    for name in (PAPER, SACRE):
        edit(run_dir / "evaluations" / name,
             lambda d: d["provenance"]["extra"]["test_set"]["hypotheses"].update(path="/elsewhere/hypotheses"))


@pytest.mark.parametrize(("change", "claim", "said"), [
    (lambda p: _perturbed(p / "checkpoints" / "step_00000008.pt"), "observed.average.base",
     "averaged[3].sha256"),
    (lambda p: _perturbed(p / "average_last5.pt"), "observed.average.base", "evaluated_sha256"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d["provenance"]["extra"]["averaged"][0].update(step=4)),
     "observed.average.base", "averaged[0].step"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d["provenance"]["extra"]["averaged"].pop(0)),
     "observed.average.base", "field 'provenance.extra.averaged' names"),
    (lambda p: [edit(f, lambda d: d["provenance"]["extra"].update(averaged_from=[], checkpoints_averaged=None))
                for f in (p / "evaluations").glob("evaluate.*.json")], "observed.average.base", "is empty"),
    (lambda p: edit(p / "evaluations" / SACRE, lambda d: d["provenance"]["extra"].update(decode={})),
     "observed.beam-size", "records no beam_size"),
    (lambda p: edit(p / "evaluations" / SACRE, lambda d: d["provenance"]["extra"]["decode"].update(stop="bound")),
     "observed.early-termination", "bound"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d["provenance"]["extra"].update(test_set={})),
     "observed.bleu-protocol", "names no source file"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d.update(measured=float("nan"))),
     "observed.bleu-protocol", "not finite"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d["provenance"].update(bleu_signature=None)),
     "observed.bleu-protocol", "no signature"),
    (lambda p: edit(p / "evaluations" / PAPER, lambda d: d.update(unit="sacreBLEU (detokenized)")),
     "observed.bleu-protocol", "field 'unit'"),
    (lambda p: edit(p / "evaluations" / SACRE, lambda d: d["provenance"]["extra"].update(
        measure="bleu.tokenized-compound-split")), "observed.bleu-protocol", "bleu_signature"),
    (_sacre_as_paper, "observed.bleu-protocol", "its translations scored against its reference give"),
    (lambda p: (_sacre_as_paper(p), _translations_elsewhere(p)), "observed.bleu-protocol",
     "which scored the same translations, measured"),
])
def test_an_edited_record_fails(paper_run: Path, change, claim, said) -> None:
    change(paper_run)
    record = verdicts(paper_run)[claim]
    assert status(record) == "fail" and said in record.detail, record.detail


def test_a_search_setting_that_is_nan_is_refused_naming_the_field(paper_run: Path) -> None:
    edit(paper_run / "evaluations" / SACRE, lambda d: d["provenance"]["extra"]["decode"].update(alpha=float("nan")))
    with pytest.raises(ResultError, match=r"evaluate\.test\.bleu\.sacrebleu\.json: field 'provenance\.extra\.decode\.alpha'"):
        check_run(paper_run, only=CLAIMS)


def test_a_record_of_an_older_repro_without_the_stopping_rule_needs_another_run(paper_run: Path) -> None:
    for path in (paper_run / "evaluations").glob("evaluate.test.*.json"):
        edit(path, lambda d: d["provenance"]["extra"]["decode"].pop("stop"))
    got = verdicts(paper_run)
    assert status(got["observed.early-termination"]) == "needs another run"
    assert status(got["observed.beam-size"]) == "pass"


def test_a_run_never_evaluated_needs_another_run(trained: Path) -> None:
    got = verdicts(trained)
    assert {k: status(r) for k, r in got.items()} == dict.fromkeys(CLAIMS, "needs another run")
    assert "holds no evaluation" in got["observed.average.base"].detail


def test_evaluating_again_keeps_the_earlier_record(evaluated, tmp_path: Path) -> None:
    copy = tmp_path / "again"
    shutil.copytree(evaluated("beam1", "--beam", "1"), copy)
    first = (copy / "evaluations" / PAPER).read_text()
    repro("evaluate", "--checkpoint", str(copy / "average_last5.pt"), "--ppl-split", "none")
    kept = copy / "evaluations" / "earlier" / PAPER.replace(".json", ".1.json")
    assert kept.read_text() == first
    now = json.loads((copy / "evaluations" / PAPER).read_text())
    assert now["provenance"]["extra"]["replaces"] == f"earlier/{kept.name}"
    assert status(verdicts(copy)["observed.beam-size"]) == "pass"   # the run's evaluation is its newest


def test_an_evaluation_whose_record_cannot_be_written_leaves_none_of_its_records(evaluated, tmp_path: Path,
                                                                                capsys) -> None:
    copy = tmp_path / "blocked"
    shutil.copytree(evaluated("paper"), copy)
    shutil.rmtree(copy / "evaluations")
    (copy / "evaluations" / SACRE).mkdir(parents=True)   # a folder where the sacreBLEU record goes
    rc, _, err = run(capsys, "evaluate", "--checkpoint", str(copy / "average_last5.pt"), "--ppl-split", "none")
    assert rc == 2 and SACRE in err and "Traceback" not in err
    assert sorted(p.name for p in (copy / "evaluations").iterdir()) == [SACRE]   # the paper's record not put alone


def test_a_checkpoint_of_no_run_is_evaluated_without_a_record_and_says_so(evaluated, tmp_path: Path, capsys) -> None:
    lone = tmp_path / "lone.pt"
    shutil.copy(evaluated("paper") / "average_last5.pt", lone)
    shutil.copy(evaluated("paper") / "vocab.json", tmp_path / "vocab.json")
    rc, out, err = run(capsys, "evaluate", "--checkpoint", str(lone), "--ppl-split", "none")
    assert rc == 0 and not (tmp_path / "evaluations").exists()
    assert "lies in no run folder" in err and "records" not in json.loads(out)


def test_a_result_whose_decode_did_not_search_as_its_recipe_is_not_counted(evaluated) -> None:
    path = evaluated("beam1", "--beam", "1") / "evaluations" / PAPER
    result = Result.from_dict(json.loads(path.read_text()), source=str(path))
    claim = next(c for c in load_claims() if c.id == "table2.bleu.base-ende")
    assert "did not search as its recipe asks: beam_size 1 (its recipe: 4)" in (not_counted(claim, result) or "")


def test_the_runs_bleu_for_table_2_is_its_record_measured_as_the_claim_says(evaluated) -> None:
    """repro evaluate records both protocols: Table 2's figure is read off the tokenized one, and a decode
    that did not search as the recipe asks is named."""
    [record] = check_run(evaluated("beam1", "--beam", "1"), only=("table2.bleu.base-ende",)).records
    assert record.detail.startswith(PAPER) and "did not search as its recipe asks: beam_size 1" in record.detail
