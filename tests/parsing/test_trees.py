"""Reading PTB trees and the standard pre-processing (Section 6.3)."""

from __future__ import annotations

import pytest
from nltk import Tree

from repro.errors import DataError
from repro.parsing.trees import (parse_tree, preprocess, read_tree_lines, read_trees, strip_function_tags,
                                 tree_to_line)

MRG = """
( (S
    (NP-SBJ-1 (NNP Mr.) (NNP Vinken) )
    (VP (VBZ is)
      (NP-PRD (NP (NN chairman) )
        (SBAR (WHNP-2 (-NONE- 0) )
          (S (NP-SBJ (-NONE- *T*-2) ) (VP (VBD said) ))))
      (PP-LOC=3 (IN of) (NP (NNP Elsevier) )))
    (. .) ))
( (S (NP-SBJ (PRP It)) (VP (VBZ is)) (. .)))
"""


def test_preprocess_strips_tags_empty_elements_and_wrapper(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(MRG)
    items = read_trees(path)
    assert [i.line for i in items] == [2, 10]
    tree = preprocess(items[0].tree)
    assert tree_to_line(tree) == ("(S (NP (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (NP (NP (NN chairman)) "
                                  "(SBAR (S (VP (VBD said))))) (PP (IN of) (NP (NNP Elsevier)))) (. .))")
    assert preprocess(Tree.fromstring("( (S (-NONE- *)))")) is None


def test_strip_function_tags_keeps_dash_labels():
    assert [strip_function_tags(x) for x in ["NP-SBJ-1", "PP=2", "-NONE-", "-LRB-", "PRP$", "S"]] == \
        ["NP", "PP", "-NONE-", "-LRB-", "PRP$", "S"]


def test_wrapper_over_several_constituents_becomes_top():
    tree = preprocess(Tree.fromstring("( (S (NN a)) (. .))"))
    assert tree.label() == "TOP" and len(tree) == 2


@pytest.mark.parametrize("text, line, message", [
    ("(S (NN a))\n(S (NN b)\n", 2, "never closed"),
    ("(S (NN a))\n(S (NN b)))\n", 2, "closes nothing"),
    ("(S (NN a))\nhello (S (NN b))\n", 2, "outside any bracketed tree"),
    ("(S (NN a))\n\n(S (NN b) c)\n", 3, "mixes words and constituents"),
    ("(S (NN a))\n(S (NN b c))\n", 2, "several words"),
    ("(S ())\n", 1, "no children"),
])
def test_malformed_tree_files_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "trees.mrg"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"trees.mrg line {line}: .*{message}"):
        read_trees(path)


def test_one_tree_per_line_reader_names_the_line(tmp_path):
    path = tmp_path / "gold.trees"
    path.write_text("(S (NN a))\n(S (NN b)\n")
    with pytest.raises(DataError, match="gold.trees line 2"):
        read_tree_lines(path)
    with pytest.raises(DataError, match="not found"):
        read_trees(tmp_path / "missing.mrg")


def test_real_sample_file_reads(data_dir):
    items = read_trees(data_dir / "ptb-nltk-sample" / "combined" / "wsj_0001.mrg")
    assert len(items) == 2
    assert parse_tree(tree_to_line(preprocess(items[0].tree))).leaves()[:2] == ["Pierre", "Vinken"]
