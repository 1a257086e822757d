"""Scoring decoded parser output with EVALB after repair (Section 6.3)."""

from __future__ import annotations

import pytest

from repro.errors import DataError
from repro.parsing.scoring import score_outputs
from repro.parsing.linearize import linearize
from repro.parsing.trees import read_tree_lines, tree_to_line


def test_scoring_decoded_output(tmp_path, tiny_parsing_data):
    gold = tiny_parsing_data / "test.trees"
    TREES = read_tree_lines(gold)
    perfect = score_outputs([linearize(t) for t in TREES], gold)
    assert perfect.f1 == 100.0 and perfect.repaired == 0
    assert perfect.leaf_count == {"exact": 2, "too_few": 0, "too_many": 0}
    broken = score_outputs(["(S (NP XX XX", ""], gold, write_trees=tmp_path / "out.trees")
    assert broken.repaired == 2 and broken.evalb.all.error_sentences == 0
    assert broken.evalb.all.valid_sentences == 2
    assert broken.leaf_count == {"exact": 0, "too_few": 2, "too_many": 0}  # 2 of 4 words, then none of 4
    mixed = score_outputs(["(S XX XX XX XX XX )S", "(S XX XX XX XX )S"], gold)
    assert mixed.leaf_count == {"exact": 1, "too_few": 0, "too_many": 1}
    # both gold sentences have 4 words: one bin, holding both outputs, by kind
    assert mixed.leaf_count_by_length == {"1-10": {"sentences": 2, "exact": 1, "too_few": 0, "too_many": 1}}
    written = read_tree_lines(tmp_path / "out.trees")
    assert [t.leaves() for t in written] == [t.leaves() for t in TREES]
    assert tree_to_line(written[1]) == "(TOP (PRP it) (VBZ rains) (RB hard) (, ,))"
    with pytest.raises(DataError, match="1 parser outputs for 2 gold trees"):
        score_outputs(["(S XX )S"], gold)


def test_length_bins_cover_every_length():
    from repro.parsing.scoring import length_bin
    assert [length_bin(n) for n in (1, 10, 11, 20, 21, 40, 41, 600)] == [
        "1-10", "1-10", "11-20", "11-20", "21-30", "31-40", "41+", "41+"]
