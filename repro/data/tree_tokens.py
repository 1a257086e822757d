"""The tokens of linearised trees (Section 6.3), as a vocabulary has to know them.

The parser's target side is a tree written as tokens (:mod:`repro.parsing.linearize`): ``XX`` for
each leaf, ``(NP`` and ``)NP`` for the brackets, and, with per-word target units, runs of these
joined with ``_`` (``)NP_(VP_XX``). The vocabulary (:mod:`repro.data.vocab`) sits below the parser
and must keep these tokens whole and know which tree token may stand in for an unseen one, so the
alphabet lives here and the parser imports it.

Per-word target tokens come in thousands of kinds, and the test split holds some that training
never saw. Every tree token of the training text stays in the vocabulary (:func:`always_whole`);
an unseen one is not a word, and a spelling class would stand for nothing the tree can use, so it
backs off instead to a nearer tree token that still holds the word's leaf (:func:`tree_backoffs`):
its closing brackets and ``XX`` (``)NP_XX``), else ``XX`` alone. The output keeps one token, and
one leaf, per word and loses brackets only. (Cutting such a token into known pieces loses nothing,
but output i is then no longer word i's, and that was measured far worse:
reports/notes/2026-11-24-parser-issue18.md, item 10.)
"""

from __future__ import annotations

#: A leaf: a pre-terminal with its word (Vinyals & Kaiser et al. normalise POS tags to XX).
LEAF = "XX"
#: Joins the symbols of one per-word target token (no label or ``XX`` holds it).
JOIN = "_"


def is_opener(token: str) -> bool:
    """An opening bracket with its label, ``(NP``."""
    return len(token) > 1 and token[0] == "(" and "(" not in token[1:] and ")" not in token[1:]


def is_closer(token: str) -> bool:
    """A closing bracket with its label, ``)NP``."""
    return token[:1] == ")" and "(" not in token and ")" not in token[1:]


def always_whole(token: str) -> bool:
    """Tokens a word-level vocabulary keeps however rare: the tree tokens of linearised trees
    (``(ADVP|PRT``, ``)INTJ``, per-word ``)NP_(VP_XX``). A rare label must stay decodable and a
    training target whole; PTB writes bracket words as ``-LRB-``."""
    return len(token) > 1 and token[0] in "()"


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
