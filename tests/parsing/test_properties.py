"""Properties over random trees: linearisation round trip, repair, EVALB self-agreement (Section 6.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from repro.eval.evalb import evalb_lines, score_sentence
from repro.parsing.linearize import LinearizationError, delinearize, linearize
from repro.parsing.repair import repair
from repro.parsing.trees import parse_tree, tags, tree_to_line

PHRASES = ["S", "NP", "VP", "PP", "ADJP", "SBAR", "ADVP", "PRT", "NP-SBJ"]
TAGS = ["DT", "NN", "VBZ", "IN", "JJ", "PRP", ",", ".", "``", "''", ":", "-LRB-"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "very", ",", ".", "-LRB-", "it's", "U.S.", "XX", "(S"[1:]]


@st.composite
def trees(draw, max_depth: int = 4) -> Tree:
    """Trees with every word under a pre-terminal and no empty constituent (as after pre-processing)."""

    def leaf() -> Tree:
        return Tree(draw(st.sampled_from(TAGS)), [draw(st.sampled_from(WORDS))])

    def node(depth: int) -> Tree:
        if depth > 0 and (depth == max_depth or draw(st.booleans())):
            return leaf()
        return Tree(draw(st.sampled_from(PHRASES)), [node(depth + 1) for _ in range(draw(st.integers(1, 3)))])

    return node(0)


@settings(max_examples=150, deadline=None)
@given(trees())
def test_linearise_delinearise_round_trip(tree):
    target = linearize(tree)
    assert target.split().count("XX") == len(tree.leaves())
    assert delinearize(target, tree.leaves(), tags(tree)) == tree
    fixed = repair(target, tree.leaves(), tags(tree))
    assert fixed.tree == tree and fixed.fixes == ()
    assert parse_tree(tree_to_line(tree)) == tree  # the one-line form reads back


@settings(max_examples=150, deadline=None)
@given(trees(), st.data())
def test_dropping_any_token_is_rejected_by_the_strict_inverse(tree, data):
    tokens = linearize(tree).split()
    i = data.draw(st.integers(0, len(tokens) - 1))
    with pytest.raises(LinearizationError):
        delinearize(tokens[:i] + tokens[i + 1:], tree.leaves(), tags(tree))


TOKENS = ["(S", "(NP", "(VP", ")NP", ")S", ")VP", ")", "XX", "XX", "XX", "junk", "(", "NP)"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
def test_repair_always_gives_a_tree_evalb_scores_without_error(tokens, words):
    tag_list = ["NN"] * len(words)
    fixed = repair(tokens, words, tag_list)
    tree = fixed.tree
    assert tree.leaves() == words and tags(tree) == tag_list
    for sub in tree.subtrees():
        assert len(sub) >= 1
        assert all(isinstance(c, Tree) for c in sub) or (len(sub) == 1 and isinstance(sub[0], str))
    gold = "(S " + " ".join(f"(NN {w})" for w in words) + ")"
    result = evalb_lines([gold], [tree_to_line(tree)])
    assert result.all.valid_sentences == 1 and result.messages == []
    try:
        strict = delinearize(tokens, words, tag_list)
    except LinearizationError:
        assert fixed.was_malformed
    else:
        assert strict == tree and not fixed.was_malformed


@settings(max_examples=100, deadline=None)
@given(trees())
def test_evalb_tree_against_itself_and_against_a_relabelled_root(tree):
    line = tree_to_line(tree)
    row, _ = score_sentence(line, line)
    if row.status == 2:  # only punctuation words: EVALB skips the sentence
        return
    assert row.status == 0 and row.matched == row.gold_brackets == row.test_brackets
    assert row.correct_tags == row.words
    if row.gold_brackets:
        assert evalb_lines([line], [line]).all.f1 == 100.0
    other = tree.copy(deep=True)
    other.set_label("ZZ")  # a label used nowhere: exactly the root bracket is lost
    perturbed, _ = score_sentence(line, tree_to_line(other))
    assert perturbed.matched == row.matched - 1
    assert perturbed.gold_brackets == perturbed.test_brackets == row.gold_brackets
