"""Unknown-word classes for word-level vocabularies (Section 6.3's parser at small scale).

A word-level vocabulary keeps one token per whitespace word, so that a parser's source has as
many tokens as its tree has leaves. Words too rare to get their own entry are mapped to a class
built from their spelling, as the Berkeley parser does for unknown words (Petrov et al., 2006;
Petrov & Klein, 2007; the shape of ``getSignature`` at its English level): ``UNK`` with the
word's capitalisation, digits, dashes and one of a short list of English suffixes, e.g.
``Hudson`` -> ``UNK-INITC``, ``reorganizing`` -> ``UNK-LC-ing``, ``1.5-billion`` -> ``UNK-LC-NUM-DASH-ion``. The classes are data-side
pre-processing, as Vinyals & Kaiser et al. (2014) mapped rare words to an unknown token; the
model and the method are unchanged.

The tokens of linearised trees are never classed: :mod:`repro.data.tree_tokens` says which they are
and what an unseen one backs off to.
"""

from __future__ import annotations

#: English suffixes that mark a part of speech, longest first (Berkeley's English signature list).
SUFFIXES = ("ing", "ion", "ity", "est", "ed", "er", "ly", "al", "ic", "y", "s")
#: The prefix of every class, so a class can never clash with a real PTB token.
PREFIX = "UNK"


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
