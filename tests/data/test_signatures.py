"""Berkeley-style unknown-word classes (repro.data.signatures) for the word-level parser vocabulary."""

from __future__ import annotations

import pytest

from repro.data.signatures import signature


@pytest.mark.parametrize("word, expected", [
    ("Hudson", "UNK-INITC"), ("reorganizing", "UNK-LC-ing"), ("IBM", "UNK-CAPS"), ("12.5", "UNK-NUM"),
    ("1.5-billion", "UNK-LC-NUM-DASH-ion"), ("walked", "UNK-LC-ed"), ("quickly", "UNK-LC-ly"),
    ("%", "UNK"), ("as", "UNK-LC"), ("Co-operative", "UNK-INITC-DASH"),
])
def test_signature_marks_case_digits_dashes_and_suffix(word, expected):
    assert signature(word) == expected


def test_signatures_separate_words_a_parser_must_tell_apart():
    assert len({signature(w) for w in ("Smith", "smiths", "walked", "walking", "1987", "IBM")}) == 6


def test_tree_symbols_are_always_whole_words_are_not():
    from repro.data.tree_tokens import always_whole

    assert always_whole("(ADVP|PRT") and always_whole(")INTJ")
    assert not any(always_whole(w) for w in ("-LRB-", "(", ")", "Hudson", "XX"))


def test_per_word_tree_tokens_back_off_to_nearer_tokens_that_keep_the_leaf():
    from repro.data.tree_tokens import tree_backoffs
    assert tree_backoffs(")NP_)VP_(SBAR_(S_(NP_XX") == [")NP_)VP_XX", "XX"]
    assert tree_backoffs("(S_(NP_(QP_XX") == ["XX"] and tree_backoffs(")NP_XX") == ["XX"]
    assert tree_backoffs(")NP_)VP_)S") == [")VP_)S", ")S"]  # the last token of a tree: closers only
    assert all(tree_backoffs(t) == [] for t in ("XX", "(NP", ")S", "Hudson", "UNK-CAPS"))
