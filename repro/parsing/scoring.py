"""Score decoded parses with EVALB (COLLINS.prm), as Table 4 reports them (Section 6.3).

Every decoder output is repaired into a tree over its source words
(:mod:`repro.parsing.repair`), its pre-terminals take the gold POS tags (EVALB uses them only
to delete punctuation; see :mod:`repro.parsing.linearize`), and the trees are scored against the
gold trees of the split. Because repaired trees always have the gold words, no sentence is an
EVALB error and the F1 covers the whole test set. How many outputs needed repair is reported
alongside, since a high count says the model has not learned the bracket grammar; so is how
many outputs had exactly one ``XX`` per source word, fewer, or more, which tells a model that has
the grammar but not the alignment to the sentence (well-formed trees of the wrong size) apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from repro.errors import DataError
from repro.eval.evalb import EvalbResult, evalb_lines
from repro.eval.evalb_params import COLLINS, EvalbParams
from repro.parsing.linearize import LEAF, symbols
from repro.parsing.prepare import gold_trees_file
from repro.parsing.repair import repair
from repro.parsing.trees import read_tree_lines, tags, tree_to_line, words
from repro.data.text_lines import read_lines
from repro.files.writer import atomic_write_text

if TYPE_CHECKING:
    from repro.data.vocab import SharedVocab


@dataclass(frozen=True)
class ParseScore:
    evalb: EvalbResult
    repaired: int      # outputs that were not a well-formed tree over the source words
    sentences: int
    leaf_count: dict[str, int] = field(default_factory=dict)  # outputs with exact / too_few / too_many XX
    #: by sentence length (``LENGTH_BINS``): {"1-10": {"sentences": n, "exact": k, "too_few": .., "too_many": ..}}
    leaf_count_by_length: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def f1(self) -> float:
        """EVALB's "All" F-measure; 0 where EVALB prints nan (no bracket matched: P + R = 0)."""
        f1 = self.evalb.all.f1
        return 0.0 if f1 != f1 else f1

    def to_dict(self) -> dict:
        return {"f1": self.f1, "repaired": self.repaired, "sentences": self.sentences,
                "leaf_count": dict(self.leaf_count), "leaf_count_by_length": self.leaf_count_by_length,
                "evalb": self.evalb.to_dict()}


#: Sentence-length bins (words) for the leaf-count table: (label, shortest, longest).
LENGTH_BINS = (("1-10", 1, 10), ("11-20", 11, 20), ("21-30", 21, 30), ("31-40", 31, 40), ("41+", 41, 10**9))


def length_bin(n_words: int) -> str:
    return next(label for label, lo, hi in LENGTH_BINS if lo <= n_words <= hi)


def score_outputs(outputs: Sequence[str], gold_path: str | Path, params: EvalbParams = COLLINS,
                  write_trees: str | Path | None = None) -> ParseScore:
    """Repair ``outputs`` (linearised trees, one per gold tree), score them, optionally write the trees."""
    gold = read_tree_lines(gold_path)
    if len(outputs) != len(gold):
        raise DataError(f"{len(outputs)} parser outputs for {len(gold)} gold trees in {gold_path}")
    test_lines, repaired = [], 0
    leaf_count = {"exact": 0, "too_few": 0, "too_many": 0}
    by_length = {label: {"sentences": 0, **leaf_count} for label, _, _ in LENGTH_BINS}
    for output, tree in zip(outputs, gold):
        n_leaves, n_words = symbols(output).count(LEAF), len(words(tree))
        kind = "exact" if n_leaves == n_words else "too_few" if n_leaves < n_words else "too_many"
        leaf_count[kind] += 1
        row = by_length[length_bin(n_words)]
        row["sentences"] += 1
        row[kind] += 1
        fixed = repair(output, words(tree), tags(tree))
        repaired += fixed.was_malformed
        test_lines.append(tree_to_line(fixed.tree))
    if write_trees is not None:
        atomic_write_text(Path(write_trees), "".join(line + "\n" for line in test_lines))
    # Repaired trees always carry the gold words, so no EVALB error can occur: no MAX_ERROR stop.
    result = evalb_lines([tree_to_line(t) for t in gold], test_lines, params.replace(max_error=len(gold) + 1),
                         str(gold_path), "parser output")
    return ParseScore(result, repaired, len(gold), leaf_count,
                      {label: row for label, row in by_length.items() if row["sentences"]})


def score_split(outputs: Sequence[str], prepared_dir: str | Path, split: str = "test",
                write_trees: str | Path | None = None) -> ParseScore:
    """:func:`score_outputs` against ``{split}.trees`` of a directory made by :mod:`repro.parsing.prepare`."""
    return score_outputs(outputs, gold_trees_file(prepared_dir, split), write_trees=write_trees)


def vocabulary_ceiling(vocab: "SharedVocab", prepared_dir: str | Path, split: str = "test") -> dict[str, float | int]:
    """The best F1 a model with ``vocab`` could score on ``split``: its gold targets as the vocabulary
    writes them (a per-word tree token it lacks backs off and loses brackets,
    :mod:`repro.data.tree_tokens`), scored as outputs. 100 when the vocabulary holds every target token."""
    targets = read_lines(Path(prepared_dir) / f"{split}.tgt")
    written = [vocab.decode(vocab.encode(t)) for t in targets]
    changed = sum(a != b for t, w in zip(targets, written) for a, b in zip(t.split(), w.split()))
    score = score_split(written, prepared_dir, split)
    return {"f1": round(score.f1, 2), "tokens_backed_off": changed, "tokens": sum(len(t.split()) for t in targets)}
