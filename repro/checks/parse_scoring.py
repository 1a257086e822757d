"""Table 4's F1 as the parser job scores its decoder's outputs (Section 6.3): the outputs repaired into
trees over the sentence's words, given the gold pre-terminals and scored by EVALB with COLLINS.prm
(:func:`repro.parsing.scoring.score_outputs`, what the ``f1.evalb`` measurement calls).

A parser that writes every tree's own target exactly must score 100 on every sentence: no EVALB
error (a length or word mismatch sets a sentence aside, and the F1 then covers fewer sentences than the
test set), every gold bracket matched and no other, in both target units. A scoring that loses the gold
tags (so that EVALB deletes the gold's punctuation but not the output's), the words, or a bracket
does not.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from repro.checks.linearization import TREES, sample_trees
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.files.writer import atomic_write_text
from repro.parsing.linearize import group_by_word, linearize
from repro.parsing.scoring import score_outputs
from repro.parsing.trees import parse_tree, write_tree_lines


@checker("parse.scoring", audits=False)
def perfect_outputs_scored(claim: Claim, ctx: CheckContext) -> Measurement:
    """The gold trees' own targets (symbols, then per-word tokens) scored as the parser job scores its
    outputs, against the gold trees: hand-built trees and, where the data directory has it, the NLTK
    Penn Treebank sample's. Measured: the sentences not scored as a perfect parse (an EVALB error or
    skip, a gold bracket unmatched or an extra one), over both units."""
    sample, where = sample_trees()
    trees = [parse_tree(text) for text in TREES] + sample
    wrong, shown = 0, []
    with tempfile.TemporaryDirectory(prefix="repro-parse-scoring-") as tmp:
        gold = Path(tmp) / "test.gold"
        atomic_write_text(gold, write_tree_lines(trees), within=tmp)
        for unit, outputs in (("symbols", [linearize(t) for t in trees]),
                              ("per-word", [group_by_word(linearize(t)) for t in trees])):
            result = score_outputs(outputs, gold)
            bad = [r for r in result.evalb.rows
                   if r.status != 0 or r.matched != r.gold_brackets or r.matched != r.test_brackets]
            wrong += len(bad) + max(len(trees) - len(result.evalb.rows), 0)
            if bad:
                first = bad[0]
                shown.append(f"{unit}: {len(bad)}, the first line {first.line} (status {first.status}, "
                             f"{first.matched} of {first.gold_brackets} gold brackets matched, {first.test_brackets} "
                             f"in the output){'; ' + result.evalb.messages[0] if result.evalb.messages else ''}")
    return Measurement(wrong, detail=(f"the gold targets of {len(trees)} trees ({len(TREES)} built, {where}) "
                                      "scored as the parser's outputs, in both units: "
                                      + ("; ".join(shown) if shown else "every sentence a perfect parse")))
