"""Penn Treebank trees for English constituency parsing (Section 6.3, Table 4).

Trees are read with :mod:`nltk` from ``.mrg`` files (one tree over many lines, wrapped in an
unlabelled ``( ... )``) or from one-tree-per-line files. :func:`preprocess` applies the usual
pre-processing of WSJ parsing work before training and before EVALB scoring:

1. strip function tags and co-indices (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``), keeping
   labels that start with ``-`` (``-LRB-``, ``-RRB-``, ``-NONE-``) whole;
2. remove ``-NONE-`` pre-terminals (traces, empty elements) and every constituent left empty;
3. drop the outer wrapper (an unlabelled, ``ROOT`` or ``TOP`` node over a single child).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nltk import Tree

from repro.errors import DataError
from repro.files.reader import read_text

WRAPPER_LABELS = ("", "ROOT", "TOP")
EMPTY_TAG = "-NONE-"


@dataclass(frozen=True)
class SourcedTree:
    """A tree and where it came from (``file`` line ``line`` is where its first bracket opens)."""

    tree: Tree
    file: str
    line: int


def _split_trees(text: str, name: str, first_line: int = 1) -> Iterator[tuple[str, int]]:
    """Yield each top-level bracketed expression of ``text`` with its starting line."""
    depth, start, start_line, line = 0, -1, 0, first_line
    for pos, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "(":
            if depth == 0:
                start, start_line = pos, line
            depth += 1
        elif ch == ")":
            if depth == 0:
                raise DataError(f"{name} line {line}: unbalanced brackets: ')' closes nothing")
            depth -= 1
            if depth == 0:
                yield text[start:pos + 1], start_line
        elif depth == 0 and not ch.isspace():
            raise DataError(f"{name} line {line}: text {ch!r} outside any bracketed tree")
    if depth:
        raise DataError(f"{name} line {start_line}: unbalanced brackets: tree opened here is never "
                        f"closed ({depth} bracket(s) open at end of file)")


def _check_shape(tree: Tree, name: str, line: int) -> None:
    """Every node is a pre-terminal ``(TAG word)`` or has only subtrees as children."""
    for sub in tree.subtrees():
        kinds = {isinstance(child, Tree) for child in sub}
        if not kinds:
            raise DataError(f"{name} line {line}: constituent ({sub.label()}) has no children")
        if kinds == {True, False} or (False in kinds and len(sub) != 1):
            raise DataError(f"{name} line {line}: constituent ({sub.label()} ...) mixes words and "
                            f"constituents or holds several words: {tree_to_line(sub)[:80]}")


def parse_tree(text: str, name: str = "<string>", line: int = 1) -> Tree:
    """Parse one bracketed tree; a malformed one is a :class:`DataError` naming ``name`` and ``line``."""
    chunks = list(_split_trees(text, name, line))
    if len(chunks) != 1:
        raise DataError(f"{name} line {line}: expected one tree, found {len(chunks)}")
    try:
        tree = Tree.fromstring(chunks[0][0])
    except ValueError as err:
        raise DataError(f"{name} line {line}: malformed tree: {err}") from None
    _check_shape(tree, name, line)
    return tree


def read_trees(path: str | Path) -> list[SourcedTree]:
    """All trees of an ``.mrg`` or one-tree-per-line file, with their starting lines."""
    path = Path(path)
    text = read_text(path, "tree file", error=DataError)
    out = []
    for chunk, line in _split_trees(text, str(path)):
        try:
            tree = Tree.fromstring(chunk)
        except ValueError as err:
            raise DataError(f"{path} line {line}: malformed tree: {err}") from None
        _check_shape(tree, str(path), line)
        out.append(SourcedTree(tree, str(path), line))
    return out


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``; ``NP=2`` -> ``NP``; ``-NONE-``/``-LRB-`` stay whole."""
    if label.startswith("-"):
        return label
    for pos, ch in enumerate(label):
        if ch in "-=":
            return label[:pos] or label
    return label


def _clean(tree: Tree) -> Tree | None:
    if isinstance(tree[0], str):
        return None if tree.label() == EMPTY_TAG else Tree(strip_function_tags(tree.label()), [tree[0]])
    children = [c for c in (_clean(child) for child in tree) if c is not None]
    return Tree(strip_function_tags(tree.label()), children) if children else None


def preprocess(tree: Tree) -> Tree | None:
    """Steps 1-3 of the module docstring; ``None`` when nothing but empty elements is left."""
    cleaned = _clean(tree)
    while cleaned is not None and cleaned.label() in WRAPPER_LABELS and len(cleaned) == 1 \
            and isinstance(cleaned[0], Tree) and not isinstance(cleaned[0][0], str):
        cleaned = cleaned[0]
    if cleaned is not None and isinstance(cleaned[0], str):
        cleaned = Tree("TOP", [cleaned])  # a one-word tree keeps a constituent over its pre-terminal
    elif cleaned is not None and cleaned.label() == "":
        cleaned.set_label("TOP")  # a wrapper over several constituents; EVALB ignores TOP
    return cleaned


def tree_to_line(tree: Tree) -> str:
    """One-line bracketing as EVALB reads it: ``(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)))``.

    Written without recursion: a decoder can nest a few hundred brackets (input length + 300
    tokens), deeper than Python's recursion limit allows a recursive writer to go.
    """
    parts: list[str] = []
    stack: list[Tree | str] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, Tree):
            parts.append(f"({item.label()} ")
            stack.append(")")
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(" ")
        else:
            parts.append(item)
    return "".join(parts)


def words(tree: Tree) -> list[str]:
    return list(tree.leaves())


def tags(tree: Tree) -> list[str]:
    return [tag for _, tag in tree.pos()]


def read_tree_lines(path: str | Path) -> list[Tree]:
    """A one-tree-per-line file (e.g. a ``.gold`` file written by :mod:`repro.parsing.prepare`)."""
    path = Path(path)
    lines = read_text(path, "tree file", error=DataError).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [parse_tree(text, str(path), number) for number, text in enumerate(lines, start=1)]


def write_tree_lines(trees: Iterable[Tree]) -> str:
    return "".join(tree_to_line(t) + "\n" for t in trees)
