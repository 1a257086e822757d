"""Repair of malformed decoder output: every output becomes a tree over the source words (Section 6.3)."""

from __future__ import annotations

from repro.parsing.repair import repair
from repro.parsing.trees import tree_to_line

WORDS = ["the", "cat", "sleeps", "."]
TAGS = ["DT", "NN", "VBZ", "."]


def line(target: str) -> str:
    return tree_to_line(repair(target, WORDS, TAGS).tree)


def test_well_formed_output_is_unchanged():
    fixed = repair("(S (NP XX XX )NP (VP XX )VP XX )S", WORDS, TAGS)
    assert fixed.fixes == ()
    assert tree_to_line(fixed.tree) == "(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)) (. .))"


def test_unclosed_brackets_are_closed():
    assert line("(S (NP XX XX )NP (VP XX XX") == "(S (NP (DT the) (NN cat)) (VP (VBZ sleeps) (. .)))"


def test_too_few_leaves_are_appended_to_the_root():
    fixed = repair("(S (NP XX )NP )S", WORDS, TAGS)
    assert tree_to_line(fixed.tree) == "(S (NP (DT the)) (NN cat) (VBZ sleeps) (. .))"
    assert any("missing" in f for f in fixed.fixes)


def test_too_many_leaves_and_junk_are_dropped():
    assert line("(S XX XX XX XX XX XX foo )S )S )") == "(S (DT the) (NN cat) (VBZ sleeps) (. .))"


def test_mismatched_closer_closes_the_innermost_and_empty_constituents_vanish():
    assert line("(S (NP XX XX )VP (VP (PP )PP XX )VP XX )S") == \
        "(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)) (. .))"


def test_several_roots_and_empty_output_go_under_top():
    assert line("(NP XX XX )NP (VP XX XX )VP") == "(TOP (NP (DT the) (NN cat)) (VP (VBZ sleeps) (. .)))"
    assert line("") == "(TOP (DT the) (NN cat) (VBZ sleeps) (. .))"
    assert line(")S )S") == "(TOP (DT the) (NN cat) (VBZ sleeps) (. .))"


def test_without_tags_preterminals_are_xx():
    assert tree_to_line(repair("(S XX XX )S", ["a", "b"]).tree) == "(S (XX a) (XX b))"


def test_output_nested_deeper_than_the_recursion_limit_is_repaired_and_scored(tmp_path):
    """A weak model can emit hundreds of openers in a row (the limit is input length + 300); the
    repair and the one-line writer must not recurse (found by the local profile's greedy search)."""
    import sys

    from repro.parsing.scoring import score_outputs

    depth = sys.getrecursionlimit() + 100
    fixed = repair("(NP " * depth + "XX XX", WORDS, TAGS)
    written = tree_to_line(fixed.tree)
    assert written.startswith("(NP " * depth + "(DT the) (NN cat)") and written.count("(NP") == depth
    assert written.endswith(")" * (depth - 1) + " (VBZ sleeps) (. .))")  # missing words join the outermost
    assert any("missing" in f for f in fixed.fixes)
    assert any("closed" in f for f in fixed.fixes)
    gold = tmp_path / "gold.trees"
    gold.write_text("(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)) (. .))\n")
    score = score_outputs(["(S " + "(NP " * depth + "XX XX XX XX"], gold)
    assert score.repaired == 1 and score.evalb.all.valid_sentences == 1
