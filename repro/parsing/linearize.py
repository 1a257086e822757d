"""Trees as token sequences, after Vinyals & Kaiser et al. (2014), "Grammar as a Foreign Language".

Section 6.3 treats parsing as sequence transduction. The source side is the sentence (PTB tokens,
space separated); the target side is the tree linearised depth-first:

    (S (NP (DT the) (NN cat)) (VP (VBZ sleeps)))  ->  (S (NP XX XX )NP (VP XX )VP )S

- an opening bracket carries its label, ``(NP``; the closing bracket repeats it, ``)NP``, as in
  Vinyals & Kaiser et al.;
- every pre-terminal with its word becomes ``XX``: the target holds neither words nor POS tags.
  Vinyals & Kaiser et al. normalised POS tags to XX, since F1 does not score them; words are not
  needed because the i-th ``XX`` is the i-th source word. The model cannot change the words, so
  EVALB never sees a word mismatch.

Target units (a data-side choice of how the same linearisation is cut into tokens, made with
``python -m repro.parsing.prepare --targets``): ``symbols``, one token per bracket or ``XX``, as
Vinyals & Kaiser et al. wrote it; or ``per-word``, one token per source word, each the run of
symbols that ends in that word's ``XX``, joined with ``_`` (:func:`group_by_word`), plus the
closing brackets after the last word::

    (S_(NP_XX XX )NP_(VP_XX )VP_)S

The string is the same tree; only the vocabulary differs. With ``per-word`` targets the decoder's
i-th output is the i-th word's, so the alignment of leaves to words is by position, as in a copy
task; with ``symbols`` the decoder has to count the ``XX`` it has written (issue 18).

:func:`delinearize` is the strict inverse: it rejects any malformed sequence. Model output goes
through :func:`repro.parsing.repair.repair` instead, which always returns a tree. Pre-terminal
labels are ``XX`` unless tags are given; pass the gold tags when scoring with EVALB, which uses
them only to delete punctuation (COLLINS.prm) and for the unreported tagging accuracy — without
them gold and test would delete different words and every sentence would be a length error.
"""

from __future__ import annotations

from collections.abc import Sequence

from nltk import Tree

from repro.data.tree_tokens import JOIN, LEAF, is_closer, is_opener

__all__ = ["JOIN", "LEAF", "TARGET_UNITS", "LinearizationError", "delinearize", "group_by_word", "is_closer",
           "is_opener", "linearize", "source_sentence", "symbols"]

#: The ways a linearised tree is cut into target tokens (see the module docstring).
TARGET_UNITS = ("symbols", "per-word")


class LinearizationError(ValueError):
    """A token sequence that is not the linearisation of a tree over the given words."""


def linearize(tree: Tree) -> str:
    """The target sequence of ``tree`` (pre-terminals -> ``XX``)."""
    out: list[str] = []

    def walk(node: Tree) -> None:
        if len(node) == 1 and isinstance(node[0], str):
            out.append(LEAF)
            return
        out.append("(" + node.label())
        for child in node:
            walk(child)
        out.append(")" + node.label())

    walk(tree)
    return " ".join(out)


def group_by_word(target: str) -> str:
    """``target`` (symbols) as per-word tokens: each run of symbols up to an ``XX`` joined into one."""
    tokens, run = [], []
    for symbol in target.split():
        run.append(symbol)
        if symbol == LEAF:
            tokens.append(JOIN.join(run))
            run = []
    if run:
        tokens.append(JOIN.join(run))
    return " ".join(tokens)


def symbols(target: str | Sequence[str]) -> list[str]:
    """The symbols of a target in either unit (per-word tokens are split at ``_``)."""
    tokens = target.split() if isinstance(target, str) else list(target)
    return [symbol for token in tokens for symbol in token.split(JOIN) if symbol]


def source_sentence(tree: Tree) -> str:
    """The source sequence: the tree's words, space separated."""
    return " ".join(tree.leaves())


def delinearize(target: str | Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None) -> Tree:
    """Rebuild the tree of a well-formed target sequence over ``words`` (strict inverse of :func:`linearize`).

    Raises :class:`LinearizationError` on an unknown token, a closing label that differs from its
    opening one, unbalanced brackets, an empty constituent, more than one root, or a number of
    ``XX`` different from ``len(words)``. Per-word targets are read as their symbols.
    """
    tokens = symbols(target)
    if tags is not None and len(tags) != len(words):
        raise ValueError(f"{len(tags)} tags for {len(words)} words")
    stack: list[Tree] = []
    root: Tree | None = None
    n_leaves = 0
    for pos, token in enumerate(tokens):
        if token == LEAF:
            if not stack:
                raise LinearizationError(f"token {pos}: {LEAF} outside any constituent")
            if n_leaves >= len(words):
                raise LinearizationError(f"token {pos}: more {LEAF} than the {len(words)} words")
            tag = tags[n_leaves] if tags is not None else LEAF
            stack[-1].append(Tree(tag, [words[n_leaves]]))
            n_leaves += 1
        elif is_opener(token):
            if root is not None and not stack:
                raise LinearizationError(f"token {pos}: a second root {token!r}")
            node = Tree(token[1:], [])
            if stack:
                stack[-1].append(node)
            else:
                root = node
            stack.append(node)
        elif is_closer(token):
            if not stack:
                raise LinearizationError(f"token {pos}: {token!r} closes nothing")
            node = stack.pop()
            if len(token) > 1 and token[1:] != node.label():
                raise LinearizationError(f"token {pos}: {token!r} closes ({node.label()}")
            if len(node) == 0:
                raise LinearizationError(f"token {pos}: empty constituent ({node.label()}")
        else:
            raise LinearizationError(f"token {pos}: unknown token {token!r}")
    if stack:
        raise LinearizationError(f"{len(stack)} constituent(s) never closed, first ({stack[0].label()}")
    if root is None:
        raise LinearizationError("no constituent")
    if n_leaves != len(words):
        raise LinearizationError(f"{n_leaves} {LEAF} for {len(words)} words")
    return root
