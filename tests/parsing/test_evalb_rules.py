"""The rules of evalb.c one at a time, each against the value EVALB gives by hand."""

from __future__ import annotations

import math

import pytest
from nltk import Tree

from repro.cli import main
from repro.errors import ConfigError, DataError
from repro.eval.evalb import EvalbAborted, evalb_lines, score_sentence
from repro.eval.evalb_params import COLLINS, EvalbParams, parse_prm_text, read_prm, to_prm_text
from repro.parsing.trees import tree_to_line


def f1_of(gold: str, test: str, params: EvalbParams = COLLINS) -> float:
    return evalb_lines([gold], [test], params).all.f1


GOLD = "(S (NP (DT the) (NN cat)) (VP (VBZ sits) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"


def test_tree_against_itself_is_100():
    assert f1_of(GOLD, GOLD) == 100.0


def test_perturbed_copy_scores_what_evalb_gives():
    # Relabel PP as ADJP: 5 gold brackets (S, NP, VP, PP, NP), 5 test, 4 matched -> R = P = F = 80.
    test = GOLD.replace("(PP", "(ADJP")
    row, _ = score_sentence(GOLD, test)
    assert (row.matched, row.gold_brackets, row.test_brackets) == (4, 5, 5)
    assert f1_of(GOLD, test) == pytest.approx(80.0)
    # Flatten the VP's PP: 4 test brackets, all correct -> R 80, P 100, F 88.89.
    flat = "(S (NP (DT the) (NN cat)) (VP (VBZ sits) (IN on) (NP (DT the) (NN mat))) (. .))"
    assert f1_of(GOLD, flat) == pytest.approx(2 * 80 * 100 / 180)


def test_punctuation_is_deleted_before_spans_are_computed():
    """COLLINS.prm deletes ',' with its word, so where a parser attaches a comma does not matter."""
    gold = "(S (NP (NNP John)) (, ,) (VP (VBZ runs)))"
    test = "(S (NP (NNP John) (, ,)) (VP (VBZ runs)))"
    assert f1_of(gold, test) == 100.0
    # Teeth: without deleting ',' the NP spans differ (John vs John ,) and F drops to 2/3.
    keep_comma = COLLINS.replace(delete_labels=("TOP", "-NONE-"))
    assert f1_of(gold, test, keep_comma) == pytest.approx(100 * 2 / 3)


def test_function_tags_equivalences_and_top():
    assert f1_of("(S (NP-SBJ-1 (NN it)) (VP (VBZ is)))", "(S (NP (NN it)) (VP (VBZ is)))") == 100.0
    assert f1_of("(S (ADVP (RB up)) (VP (VBZ go)))", "(S (PRT (RB up)) (VP (VBZ go)))") == 100.0
    assert f1_of("(S (NP (NN it)) (VP (VBZ is)))", "(TOP (S (NP (NN it)) (VP (VBZ is))))") == 100.0
    # ADJP and ADVP are not equivalent
    assert f1_of("(S (ADVP (RB up)) (VP (VBZ go)))", "(S (ADJP (RB up)) (VP (VBZ go)))") < 100.0


def test_length_and_word_mismatch_are_error_sentences_and_empty_lines_skipped():
    gold = ["(S (NP (NN it)) (VP (VBZ is)))"] * 3
    test = ["(S (NP (NN it)) (VP (VBZ is) (RB not)))", "(S (NP (NN that)) (VP (VBZ is)))", ""]
    result = evalb_lines(gold, test)
    assert (result.all.error_sentences, result.all.skipped_sentences, result.all.valid_sentences) == (2, 1, 0)
    assert result.messages == ["1 : Length unmatch (2|3)", "2 : Words unmatch (it|that)"]
    assert math.isnan(result.all.f1) and result.all.to_dict()["f1"] is None


def test_quote_reinsertion_when_only_one_side_deletes_the_quote():
    gold = "(S (NP (NN a) ('' ')) (VP (VB b)))"
    test = "(S (NP (NN a) (POS ')) (VP (VB b)))"
    with_quotes = COLLINS.replace(quote_labels=("''", "POS"))
    assert f1_of(gold, test, with_quotes) == 100.0
    assert evalb_lines([gold], [test], COLLINS).all.error_sentences == 1  # COLLINS.prm has no QUOTE_LABEL


def test_only_the_quote_at_the_same_word_is_put_back():
    # Both sides delete the second quote (''), only the gold deletes the first: the first is put
    # back in the gold (and the second's index moves past it); the second, at another word, stays out.
    gold = "(S (NP (NN a) ('' ')) (VP (VB b) ('' ')))"
    test = "(S (NP (NN a) (POS ')) (VP (VB b) ('' ')))"
    result = evalb_lines([gold], [test], COLLINS.replace(quote_labels=("''", "POS")))
    assert (result.all.error_sentences, result.all.f1) == (0, 100.0), result.messages


def test_max_error_stops_like_evalb():
    gold = ["(S (NN a))"] * 13
    test = ["(S (NN b))"] * 13
    with pytest.raises(EvalbAborted, match="line 12 of test.*MAX_ERROR=10"):
        evalb_lines(gold, test)
    assert evalb_lines(gold, test, COLLINS.replace(max_error=100)).all.error_sentences == 13


def test_line_count_mismatch_is_reported():
    result = evalb_lines(["(S (NN a))", "(S (NN a))"], ["(S (NN a))"])
    assert result.messages == ["2 : Number of lines unmatch (too many lines in gold file)"]
    assert result.all.sentences == 1
    result = evalb_lines(["(S (NN a))", "(S (NN a))", "(S (NN a))"], ["(S (NN a))"] * 5)
    assert result.messages == ["4 : Number of lines unmatch (too many lines in test file)"]
    assert result.all.sentences == 3


def test_unbalanced_test_tree_is_an_error_sentence():
    result = evalb_lines(["(S (NP (NN a)) (VP (VB b)))"], ["(S (NP (NN a)) (VP (VB b))"])
    assert result.all.error_sentences == 1
    assert "too many open bracket" in result.messages[0]


def test_unreadable_line_names_file_and_line(tmp_path, capsys):
    gold, test = tmp_path / "gold.txt", tmp_path / "test.txt"
    gold.write_text("(S (NN a))\n(S (NN a) (NN b))\n")
    test.write_text("(S (NN a))\n(S (NN a b) (NN b))\n")
    assert main(["evalb", str(gold), str(test)]) == 2
    err = capsys.readouterr().err
    assert f"{test} line 2" in err and "more than two elements" in err


def test_prm_parser(tmp_path):
    text = "# comment\nDEBUG 0\nMAX_ERROR 3\nCUTOFF_LEN 20\nLABELED 0\nDELETE_LABEL TOP\nDELETE_LABEL ,\n" \
           "DELETE_LABEL_FOR_LENGTH -NONE-\nQUOTE_LABEL POS\nEQ_LABEL ADVP PRT\nEQ_WORD  This this\n\n"
    params = parse_prm_text(text)
    assert params == EvalbParams(0, 3, 20, False, ("TOP", ","), ("-NONE-",), ("POS",), (("ADVP", "PRT"),),
                                 (("This", "this"),))
    assert parse_prm_text(to_prm_text(COLLINS)) == COLLINS
    bad = tmp_path / "bad.prm"
    bad.write_text("DEBUG 0\nDELETE_LABELS TOP\n")
    with pytest.raises(ConfigError, match=r"bad.prm line 2: unknown keyword 'DELETE_LABELS'"):
        read_prm(bad)
    with pytest.raises(ConfigError, match="line 1: EQ_LABEL requires two values"):
        parse_prm_text("EQ_LABEL ADVP\n")
    with pytest.raises(ConfigError, match="not found|cannot read"):
        read_prm(tmp_path / "missing.prm")
    # a setting given twice: evalb.c takes the last silently; here the second names the first's line
    with pytest.raises(ConfigError, match=r"line 3: LABELED 0 contradicts LABELED 1 on line 1"):
        parse_prm_text("LABELED 1\nDEBUG 0\nLABELED 0\n")
    assert parse_prm_text("LABELED 0\nLABELED 0\n").labeled is False   # repeated, not contradicted


def test_evalb_reads_nltk_trees_like_ours():
    tree = Tree.fromstring(GOLD)
    assert f1_of(tree_to_line(tree), GOLD) == 100.0
