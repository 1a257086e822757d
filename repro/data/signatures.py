"""Unknown-word classes for word-level vocabularies (Section 6.3's parser at small scale).

A word-level vocabulary keeps one token per whitespace word, so that a parser's source has as
many tokens as its tree has leaves. Words too rare to get their own entry are mapped to a class
built from their spelling, as the Berkeley parser does for unknown words (Petrov et al., 2006;
Petrov & Klein, 2007; the shape of ``getSignature`` at its English level): ``UNK`` with the
word's capitalisation, digits, dashes and one of a short list of English suffixes, e.g.
``Hudson`` -> ``UNK-INITC``, ``reorganizing`` -> ``UNK-LC-ing``, ``1.5-billion`` -> ``UNK-LC-NUM-DASH-ion``. The classes are data-side
pre-processing, as Vinyals & Kaiser et al. (2014) mapped rare words to an unknown token; the
model and the method are unchanged.

Per-word target tokens (:func:`repro.parsing.linearize.group_by_word`: ``)NP_(VP_(NP_XX``) come
in thousands of kinds, and the test split holds some that training never saw. Every tree token
of the training text stays in the vocabulary (:func:`always_whole`); an unseen one is not a word,
and its spelling class would stand for nothing the tree can use, so it backs off instead to a
nearer tree token that still holds the word's leaf (:func:`tree_backoffs`): its closing brackets
and ``XX`` (``)NP_XX``), else ``XX`` alone. The output keeps one token, and one leaf, per word and
loses brackets only. (Cutting such a token into known pieces loses nothing, but output i is then
no longer word i's, and that was measured far worse: README, "Constituency parsing".)
"""

from __future__ import annotations

from repro.parsing.linearize import JOIN, LEAF, is_closer

#: English suffixes that mark a part of speech, longest first (Berkeley's English signature list).
SUFFIXES = ("ing", "ion", "ity", "est", "ed", "er", "ly", "al", "ic", "y", "s")
#: The prefix of every class, so a class can never clash with a real PTB token.
PREFIX = "UNK"


def always_whole(token: str) -> bool:
    """Tokens a word-level vocabulary keeps however rare: the tree tokens of linearised trees
    (``(ADVP|PRT``, ``)INTJ``, per-word ``)NP_(VP_XX``). A rare label must stay decodable and a
    training target whole; PTB writes bracket words as ``-LRB-``."""
    return len(token) > 1 and token[0] in "()"


def signature(word: str) -> str:
    """The unknown-word class of ``word`` (``UNK`` plus features of its spelling)."""
    parts = [PREFIX]
    letters = [c for c in word if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        parts.append("CAPS")
    elif word[:1].isupper():
        parts.append("INITC")
    elif any(c.islower() for c in word):
        parts.append("LC")
    if any(c.isdigit() for c in word):
        parts.append("NUM")
    if "-" in word:
        parts.append("DASH")
    lower = word.lower()
    if len(letters) >= 3:
        for suffix in SUFFIXES:
            if lower.endswith(suffix) and len(lower) > len(suffix) + 1:
                parts.append(suffix)
                break
    return "-".join(parts)


def is_per_word_token(token: str) -> bool:
    """A per-word target token: several tree symbols joined with ``_`` (``(NP_XX``, ``)NP_)S``)."""
    return always_whole(token) and JOIN in token


def tree_backoffs(token: str) -> list[str]:
    """The tokens a word-level vocabulary may use for a per-word ``token`` it does not hold, nearest
    first: the closing brackets with the leaf, then the leaf alone (``)NP_(VP_XX`` -> ``)NP_XX``,
    ``XX``); for the last token of a tree (closers only), its shorter tails (``)NP_)VP_)S`` ->
    ``)VP_)S``, ``)S``). Empty for anything else."""
    if not is_per_word_token(token):
        return []
    parts = token.split(JOIN)
    closers = [p for p in parts if is_closer(p)]
    if parts[-1] != LEAF:
        return [JOIN.join(closers[i:]) for i in range(1, len(closers))]
    nearer = JOIN.join([*closers, LEAF])
    return [nearer, LEAF] if closers and nearer != token else [LEAF]
