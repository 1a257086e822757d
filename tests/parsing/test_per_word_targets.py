"""Per-word target tokens: the same linearised tree cut into one token per source word (issue 18)."""

from __future__ import annotations

import json

import pytest

from repro.parsing.linearize import delinearize, group_by_word, linearize, symbols
from repro.parsing.prepare import main
from repro.parsing.repair import repair
from repro.parsing.symbol_accuracy import symbol_kind
from repro.parsing.trees import parse_tree

TREE = "(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)))"


def test_each_token_ends_in_its_words_leaf_and_the_closers_after_the_last_word_come_last():
    target = linearize(parse_tree(TREE))
    assert target == "(S (NP XX XX )NP (VP XX )VP )S"
    assert group_by_word(target) == "(S_(NP_XX XX )NP_(VP_XX )VP_)S"
    assert symbols(group_by_word(target)) == target.split()


def test_per_word_targets_read_back_as_the_same_tree():
    words = ["the", "cat", "sleeps"]
    grouped = group_by_word(linearize(parse_tree(TREE)))
    assert delinearize(grouped, words) == delinearize(linearize(parse_tree(TREE)), words)
    fixed = repair(grouped, words)
    assert not fixed.fixes and str(fixed.tree) == str(delinearize(grouped, words))
    # a decoder that stops one word short is repaired as with symbols
    assert repair("(S_(NP_XX XX )NP_)S", words).fixes == repair("(S (NP XX XX )NP )S", words).fixes


def test_kinds_of_per_word_tokens():
    assert [symbol_kind(t) for t in ("(S_(NP_XX", "XX", ")NP_(VP_XX", ")VP_)S", ")S")] == [
        "leaf", "leaf", "leaf", "close", "close"]


@pytest.fixture(scope="module")
def per_word(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ptb-per-word")
    assert main([str(out), "--data-dir", str(data_dir), "--targets", "per-word"]) == 0
    return out


def test_prepared_per_word_targets_have_one_token_per_word(per_word):
    assert json.loads((per_word / "manifest.json").read_text())["targets"] == "per-word"
    for split in ("train", "dev", "test"):
        src = (per_word / f"{split}.src").read_text().splitlines()
        tgt = (per_word / f"{split}.tgt").read_text().splitlines()
        for words, target in zip(src, tgt):
            tokens = target.split()
            n = len(words.split())
            assert all(t.split("_")[-1] == "XX" for t in tokens[:n]), target
            assert len(tokens) in (n, n + 1) and all(symbol_kind(t) == "close" for t in tokens[n:])
            delinearize(target, words.split())


def test_unknown_target_units_are_refused(data_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "out"), "--data-dir", str(data_dir), "--targets", "chunks"])
    assert exc.value.code == 2 and "--targets" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_leaf_counts_of_per_word_outputs(tmp_path):
    from repro.parsing.scoring import score_outputs
    gold = tmp_path / "gold.trees"
    gold.write_text(TREE + "\n" + TREE + "\n" + TREE + "\n")
    score = score_outputs(["(S_(NP_XX XX )NP_(VP_XX )VP_)S", "(S_(NP_XX XX )NP_)S", "(S_(NP_XX XX XX XX )NP_)S"], gold)
    assert score.leaf_count == {"exact": 1, "too_few": 1, "too_many": 1}
    assert score.repaired == 2


def test_vocabulary_ceiling_is_what_the_vocabulary_lets_a_perfect_model_score(per_word):
    """A vocabulary that holds every test target token lets a perfect model score 100; one learned on
    the training split only backs off the per-word tokens it never saw (losing their brackets),
    which caps F1 below that, and says by how much."""
    from repro.data.vocab import SharedVocab
    from repro.parsing.scoring import vocabulary_ceiling

    texts = [line for split in ("train", "test") for suffix in ("src", "tgt")
             for line in (per_word / f"{split}.{suffix}").read_text().splitlines()]
    whole = SharedVocab.train(texts, 20000, split="word-level", min_frequency=1)
    assert vocabulary_ceiling(whole, per_word) == {"f1": 100.0, "tokens_backed_off": 0, "tokens": 6209}
    train_only = [line for suffix in ("src", "tgt") for line in (per_word / f"train.{suffix}").read_text().splitlines()]
    small = SharedVocab.train(train_only, 4000, split="word-level")
    capped = vocabulary_ceiling(small, per_word)
    assert 50.0 < capped["f1"] < 100.0 and capped["tokens_backed_off"] > 0
