"""BLEU (Section 6.1): multi-bleu.perl's algorithm, t2t's compound splitting, sacreBLEU, NLTK cross-check."""

from __future__ import annotations

import math
import random

import pytest
from sacrebleu.metrics import BLEU

from repro.eval.bleu import (compound_split, moses_tokenize, multi_bleu, nltk_bleu, paper_bleu, paper_tokens,
                             sacre_bleu, score)
from repro.errors import DataError


def test_perfect_hypothesis_scores_100():
    lines = ["Der Hund läuft über die Straße .", "Ein Max-Planck-Institut in Köln ."]
    assert multi_bleu(lines, [lines])[0] == pytest.approx(100)
    assert paper_bleu(lines, lines).score == pytest.approx(100)
    assert sacre_bleu(lines, lines).score == pytest.approx(100)


def test_hand_computed_precisions():
    # p1..p4 = 4/5, 3/4, 2/3, 1/2; BP = 1  ->  (0.8 * 0.75 * 2/3 * 0.5) ** 0.25 = 0.2 ** 0.25
    bleu, precisions, bp = multi_bleu(["a b c d e"], [["a b c d f"]])
    assert precisions == pytest.approx([80, 75, 200 / 3, 50])
    assert bp == 1 and bleu == pytest.approx(100 * 0.2 ** 0.25)


def test_hand_computed_brevity_penalty():
    # c = 4 < r = 6: BP = exp(1 - 6/4); all precisions 1.
    bleu, _, bp = multi_bleu(["a b c d"], [["a b c d e f"]])
    assert bp == pytest.approx(math.exp(-0.5)) and bleu == pytest.approx(100 * math.exp(-0.5))


def test_clipping_and_zero_precision():
    # "the" x7 vs a reference with two "the": clipped unigram precision 2/7, no bigram matches -> 0.
    bleu, precisions, _ = multi_bleu(["the the the the the the the"], [["the cat is on the mat"]])
    assert precisions[0] == pytest.approx(100 * 2 / 7) and precisions[1] == 0 and bleu == 0
    # Clipping matters in a corpus: an unclipped count would give 5/5 unigrams here, not 3/5.
    _, precisions, _ = multi_bleu(["a a a b c"], [["a b c d e"]])
    assert precisions[0] == pytest.approx(60)


def test_closest_reference_length_ties_go_to_the_shorter():
    # hyp length 5; references of length 4 and 6 are equally close: multi-bleu takes 4 (BP = 1).
    _, _, bp = multi_bleu(["a b c d e"], [["a b c d"], ["a b c d e f"]])
    assert bp == 1
    _, _, bp = multi_bleu(["a b c d e"], [["a b c d e f g"], ["a b c d e f"]])  # closest is 6: BP < 1
    assert bp == pytest.approx(math.exp(1 - 6 / 5))


def test_compound_split_matches_perl_substitution():
    assert compound_split("Max-Planck-Institut") == "Max ##AT##-##AT## Planck ##AT##-##AT## Institut"
    assert compound_split("a - b") == "a - b"  # a free-standing dash is no compound
    # Perl's s{(\S)-(\S)}{...}g never overlaps matches: the 'b' of the first is consumed.
    assert compound_split("a-b-c") == "a ##AT##-##AT## b-c"
    assert compound_split("E-Mail-Adresse") == "E ##AT##-##AT## Mail ##AT##-##AT## Adresse"


def test_compound_splitting_gives_partial_credit_on_hyphenated_german():
    ref = ["Das Max-Planck-Institut für Physik liegt in der Stadt ."]
    hyp = ["Das Max-Planck-Zentrum für Physik liegt in der Stadt ."]
    plain = multi_bleu([moses_tokenize(h) for h in hyp], [[moses_tokenize(r) for r in ref]])[0]
    paper = paper_bleu(hyp, ref).score
    # Unsplit: 9 tokens, the compound is one wrong token -> p = 8/9, 6/8, 5/7, 4/6.
    assert plain == pytest.approx(100 * (8 / 9 * 6 / 8 * 5 / 7 * 4 / 6) ** 0.25)
    # Split: 13 tokens, "Max", "Planck" and both ##AT## joints match, only "Zentrum" is wrong
    # -> p = 12/13, 10/12, 8/11, 6/10: partial credit for the compound.
    assert paper == pytest.approx(100 * (12 / 13 * 10 / 12 * 8 / 11 * 6 / 10) ** 0.25)
    assert paper > plain
    # And the reverse: a hypothesis that drops the hyphens loses the ##AT##-##AT## tokens.
    unhyphenated = paper_bleu(["Das Max Planck Institut für Physik liegt in der Stadt ."], ref).score
    assert unhyphenated < 100 and paper_bleu(ref, ref).score == pytest.approx(100)


def test_paper_protocol_moses_tokenizes_with_escaping():
    assert moses_tokenize('Er sagte: "Ja, 3,5 % & mehr."') == "Er sagte : &quot; Ja , 3,5 % &amp; mehr . &quot;"
    ref_tok = ['Er sagte : &quot; Ja , 3,5 % &amp; mehr . &quot;']
    assert paper_bleu(['Er sagte: "Ja, 3,5 % & mehr."'], ref_tok, refs_tokenized=True).score == pytest.approx(100)


@pytest.fixture(scope="module")
def newstest(data_dir):
    refs = (data_dir / "wmt14-newstest2014/newstest2014.en-de.de").read_text(encoding="utf-8").splitlines()[:300]
    rng = random.Random(0)
    hyps = []
    for r in refs:  # a plausible "system": drops and swaps some words
        words = [w for w in r.split() if rng.random() > 0.15]
        if len(words) > 3 and rng.random() < 0.5:
            k = rng.randrange(len(words) - 1)
            words[k], words[k + 1] = words[k + 1], words[k]
        hyps.append(" ".join(words))
    return hyps, refs


def test_paper_protocol_equals_sacrebleu_on_the_same_tokens(newstest):
    hyps, refs = newstest
    ours = paper_bleu(hyps, refs)
    h, r = paper_tokens(hyps), paper_tokens(refs)
    theirs = BLEU(tokenize="none", force=True, smooth_method="none").corpus_score(h, [r])
    assert ours.score == pytest.approx(theirs.score, abs=1e-9)
    assert (ours.hyp_len, ours.ref_len) == (theirs.sys_len, theirs.ref_len)
    assert 20 < ours.score < 90


def test_nltk_cross_check_agrees_on_sentences_of_four_or_more_tokens(newstest):
    hyps, refs = newstest
    h, r = paper_tokens(hyps), paper_tokens(refs)
    keep = [i for i in range(len(h)) if len(h[i].split()) >= 4]
    h, r = [h[i] for i in keep], [r[i] for i in keep]
    assert nltk_bleu(h, r) == pytest.approx(multi_bleu(h, [r])[0], abs=1e-9)


def test_sacrebleu_protocol_has_signature_and_differs_from_paper(newstest):
    hyps, refs = newstest
    res = sacre_bleu(hyps, refs)
    assert res.signature.startswith("protocol:sacrebleu|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert res.score == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)
    paper = paper_bleu(hyps, refs)
    assert "protocol:paper" in paper.signature and "tok:moses-de" in paper.signature and "sacremoses:" in paper.signature
    assert paper.score != pytest.approx(res.score, abs=0.01)  # different protocols, different numbers


def test_unequal_lengths_and_unknown_protocol():
    with pytest.raises(DataError, match="2 hypotheses but 1 references"):
        paper_bleu(["a", "b"], ["a"])
    with pytest.raises(DataError, match="unknown BLEU protocol"):
        score(["a"], ["a"], "bleurt")
