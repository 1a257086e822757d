"""Turn any decoder output into a well-formed tree over the source words (Section 6.3).

A sequence-to-sequence parser can emit unbalanced brackets, mismatched closing labels, stray
tokens, or too many / too few ``XX``. EVALB counts a tree with the wrong number of words as an
error sentence and leaves it out of the score, which would flatter a bad model; so every output is
repaired into a tree over exactly the source words, and the score covers every sentence.

The repair, in one left-to-right pass:

- ``(L`` opens a constituent; any ``)`` or ``)L`` closes the innermost open one (its label is
  kept; a mismatched closing label is counted as a fix); a ``)`` with nothing open is dropped;
- ``XX`` becomes the next word; ``XX`` beyond the last word is dropped; other tokens are dropped;
- at the end, open constituents are closed; missing words are appended to the last top-level
  item holding words when that is a constituent (so a single root still spans the sentence);
  constituents without words are removed;
- several top-level constituents, or words outside any, are put under one ``TOP`` node, a label
  that COLLINS.prm deletes, so the wrapper itself is never scored. An empty output becomes the
  flat tree ``(TOP (XX w1) ... (XX wn))``.

Per-word tokens (``(NP_XX``) are read as their symbols. A well-formed output is returned
unchanged (``fixes`` empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nltk import Tree

from repro.parsing.linearize import LEAF, is_closer, is_opener, symbols

WRAPPER = "TOP"


@dataclass(eq=False)
class _Node:
    label: str
    children: list["_Node | int"] = field(default_factory=list)  # int: index of a word


def _post_order(root: _Node) -> list[_Node]:
    """Every node below and including ``root``, children before parents (no recursion: a decoder can
    nest a few hundred brackets, deeper than Python's recursion limit)."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(c for c in node.children if isinstance(c, _Node))
    return order[::-1]


def _with_words(root: _Node) -> set[int]:
    """``id`` of every node that spans at least one word."""
    found: set[int] = set()
    for node in _post_order(root):
        if any(isinstance(c, int) or id(c) in found for c in node.children):
            found.add(id(node))
    return found


@dataclass(frozen=True)
class Repaired:
    tree: Tree
    fixes: tuple[str, ...]

    @property
    def was_malformed(self) -> bool:
        return bool(self.fixes)


def _build(root: _Node, words: Sequence[str], tags: Sequence[str] | None, keep: set[int]) -> Tree:
    """The nltk tree of ``root``, without the constituents that span no word (not in ``keep``)."""
    built: dict[int, Tree] = {}
    for node in _post_order(root):
        children = []
        for child in node.children:
            if isinstance(child, int):
                children.append(Tree(tags[child] if tags is not None else LEAF, [words[child]]))
            elif id(child) in keep:
                children.append(built.pop(id(child)))
        built[id(node)] = Tree(node.label, children)
    return built[id(root)]


def repair(target: str | Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None) -> Repaired:
    """A tree over exactly ``words`` from any token sequence (symbols or per-word tokens), and the
    list of fixes it needed."""
    if not words:
        raise ValueError("cannot build a tree over an empty sentence")
    tokens = symbols(target)
    fixes: list[str] = []
    top = _Node(WRAPPER)
    stack = [top]
    n = 0
    for pos, token in enumerate(tokens):
        if token == LEAF:
            if n < len(words):
                stack[-1].children.append(n)
                n += 1
            else:
                fixes.append(f"token {pos}: dropped {LEAF} beyond the {len(words)} words")
        elif is_opener(token):
            node = _Node(token[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif is_closer(token):
            if len(stack) == 1:
                fixes.append(f"token {pos}: dropped {token!r} that closes nothing")
                continue
            node = stack.pop()
            if len(token) > 1 and token[1:] != node.label:
                fixes.append(f"token {pos}: {token!r} taken to close ({node.label}")
        else:
            fixes.append(f"token {pos}: dropped unknown token {token!r}")
    if len(stack) > 1:
        fixes.append(f"closed {len(stack) - 1} open constituent(s)")
    if n < len(words):
        fixes.append(f"appended {len(words) - n} missing word(s)")
        # The last top-level item holding words ends the sentence; appending there keeps word order.
        spanning = _with_words(top)
        last = next((c for c in reversed(top.children) if isinstance(c, int) or id(c) in spanning), None)
        home = last if isinstance(last, _Node) else top
        home.children.extend(range(n, len(words)))
    spanning = _with_words(top)
    empty = sum(id(node) not in spanning for node in _post_order(top))
    if empty:
        fixes.append(f"removed {empty} constituent(s) without words")
    roots = [c for c in top.children if isinstance(c, int) or id(c) in spanning]
    if len(roots) == 1 and isinstance(roots[0], _Node):
        return Repaired(_build(roots[0], words, tags, spanning), tuple(fixes))
    if tokens:
        fixes.append(f"wrapped {len(roots)} top-level item(s) in ({WRAPPER}")
    return Repaired(_build(top, words, tags, spanning), tuple(fixes))
