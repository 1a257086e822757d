"""The parser's sanity ladder (Section 6.3 at small scale; issue 18): the local-parsing recipe must
memorise 1 and 10 training trees (greedy F1 >= 90), every training tree must survive linearisation
and the length filter whole, and Section 6.3's beam must not do worse than greedy on trees it knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.data.vocab import SharedVocab
from repro.decode.translate import load_model, translate_ids
from repro.parsing.scoring import score_outputs
from repro.parsing.linearize import LEAF, delinearize, symbols
from repro.parsing.prepare import prepare_ptb_sample
from repro.parsing.trees import read_tree_lines, tags
from repro.pipeline.parsing_sanity import overfit_parser
from repro.recipes import get_recipe
from repro.train.checkpoint import list_checkpoints
from repro.train.data import encode_pairs


@pytest.fixture(scope="module")
def prepared(data_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ptb")
    prepare_ptb_sample(data_dir, out, get_recipe("local-parsing").targets)  # the recipe's target units
    return out


def _texts(prepared: Path) -> list[str]:
    return [line for s in ("src", "tgt") for line in (prepared / f"train.{s}").read_text().splitlines()]


@pytest.fixture(scope="module")
def ten(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("overfit10")
    result = overfit_parser(get_recipe("local-parsing"), prepared, out, trees=10, vocab_texts=_texts(prepared))
    return out, result


def test_training_trees_round_trip_and_no_target_is_truncated(prepared):
    recipe = get_recipe("local-parsing").train
    src = (prepared / "train.src").read_text().splitlines()
    tgt = (prepared / "train.tgt").read_text().splitlines()
    for s, t, g in zip(src, tgt, read_tree_lines(prepared / "train.trees")):
        assert delinearize(t, s.split(), tags(g)) == g
    vocab = SharedVocab.train(_texts(prepared), recipe.vocab_size, split=recipe.bpe_split)
    examples, dropped = encode_pairs(vocab, list(zip(src, tgt)), recipe.max_len)
    assert dropped == [] and len(examples) == 3396
    assert all(len(e[0]) == symbols(t).count(LEAF) for e, t in zip(examples, tgt))  # one source token per leaf
    # every training target is in the vocabulary whole, one id per token (tree tokens are never capped)
    assert all(vocab.decode(e[1]) == t and len(e[1]) == len(t.split()) for e, t in zip(examples, tgt))


def test_recipe_memorises_one_tree(prepared, tmp_path):
    result = overfit_parser(get_recipe("local-parsing"), prepared, tmp_path, trees=1, steps=150, warmup=50,
                            vocab_texts=_texts(prepared))
    assert result.trees == 1 and result.f1 >= 90.0 and result.exact_leaf_count == 1


def test_recipe_memorises_ten_trees(ten):
    _, result = ten
    assert result.trees == 10 and result.epochs >= 100 and result.f1 >= 90.0 and result.exact_leaf_count >= 9


def test_beam_is_not_worse_than_greedy_on_memorised_trees(ten):
    out, result = ten
    recipe = get_recipe("local-parsing")
    model, _ = load_model(list_checkpoints(out)[-1])
    vocab = SharedVocab.load(out / "vocab.json")
    sentences = (out / "overfit.src").read_text().splitlines()
    ids = translate_ids(model, vocab.encode_batch(sentences), recipe.decode)  # beam 21, alpha 0.3, input + 300
    beam = score_outputs([vocab.decode(o) for o in ids], out / "overfit.trees")
    assert beam.f1 >= result.f1 - 1e-6 and beam.leaf_count["exact"] >= result.exact_leaf_count


def test_ladder_rung_as_a_committed_record(tmp_path, data_dir):
    """``python -m repro.pipeline.parsing_sanity``: one rung written as REPORTS/parsing_overfit_N.json;
    exit 1 when the rung is not reached (2 updates memorise nothing)."""
    from repro.pipeline.parsing_sanity import main
    code = main(["--trees", "2", "--steps", "2", "--warmup", "1", "--out-dir", str(tmp_path / "run"),
                 "--reports", str(tmp_path / "reports"), "--data-dir", str(data_dir)])
    record = json.loads((tmp_path / "reports" / "parsing_overfit_2.json").read_text())
    assert code == 1 and record["trees"] == 2 and record["steps"] == 2 and record["f1"] < 90.0
    with pytest.raises(SystemExit) as stop:
        main(["--trees", "0"])
    assert stop.value.code == 2
