"""Table 4's metric, EVALB with COLLINS.prm (Section 6.3), rule by rule, on the scorer Table 4's F1 runs.

The F1 of the parser (:mod:`repro.parsing.scoring`, ``repro evalb``, the ``f1.evalb`` measurement)
is repro's port of ``evalb.c`` (:mod:`repro.eval.evalb`). The checker sets it against two
references that share no code with it:

- **the reference tool's own outputs** on EVALB's sample (``evalb-sample`` in the data directory:
  ``sample.collins.rsl`` made by ``evalb.c`` with COLLINS.prm, ``sample.rsl.current_evalb`` with
  sample.prm), compared line by line: the per-sentence rows and both summaries (all sentences and
  length <= 40), and the error messages;
- **cases built for each rule** of EVALB's README and COLLINS.prm, whose counts are worked out by
  hand below (:data:`CASES`, :data:`CUTOFF`): label equivalence (``EQ_LABEL ADVP PRT``, both ways),
  function tags cut, punctuation pre-terminals deleted with their word before spans are taken
  (each of COLLINS.prm's five ``DELETE_LABEL`` tags, and a tag it does not list), ``-NONE-``
  deleted and the constituent it leaves empty not scored, ``TOP`` not scored, a gold bracket (and a
  test bracket) matched at most once, labels compared, crossing brackets, the length cut-off
  (``CUTOFF_LEN 40``: at most 40 words, the length counting punctuation but not ``-NONE-``), and
  error and skipped sentences left out of the totals.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.corpora import resolve_data_dir
from repro.files.reader import read_text
from repro.eval.evalb import evalb_files, evalb_lines, score_sentence
from repro.eval.evalb_params import COLLINS, SAMPLE
from repro.eval.evalb_report import format_report

#: The folder of EVALB's sample in the data directory, and its references: (params, output file).
SAMPLE_DIR = "evalb-sample"
SAMPLE_REFERENCES = ((COLLINS, "sample.collins.rsl"), (SAMPLE, "sample.rsl.current_evalb"))


@dataclass(frozen=True)
class Case:
    """One gold/test pair scored with COLLINS.prm and what EVALB gives for it, by hand:
    (matched, gold brackets, test brackets), and where the rule needs it the crossing count and
    the sentence length."""

    rule: str
    gold: str
    test: str
    counts: tuple[int, int, int]
    crossing: int | None = None
    length: int | None = None


def _punctuation(tag: str) -> Case:
    # Deleted with its word before spans are taken: both sides are over "a b", S [0,2], NP [0,1],
    # VP [1,2] on both sides: 3 matched of 3 and 3. Kept, gold NP would span [0,2] (a and the mark)
    # and test NP [0,1]: 2 matched.
    return Case(f"DELETE_LABEL {tag}: deleted with its word before spans are taken",
                f"(S (NP (NN a) ({tag} {tag})) (VP (VB b)))", f"(S (NP (NN a)) ({tag} {tag}) (VP (VB b)))", (3, 3, 3))


CASES: tuple[Case, ...] = (
    # S [0,2], ADVP~PRT [0,1], VP [1,2]: all three match.
    Case("EQ_LABEL ADVP PRT", "(S (ADVP (RB up)) (VP (VB go)))", "(S (PRT (RB up)) (VP (VB go)))", (3, 3, 3)),
    Case("EQ_LABEL ADVP PRT, the other way", "(S (PRT (RB up)) (VP (VB go)))", "(S (ADVP (RB up)) (VP (VB go)))",
         (3, 3, 3)),
    # ADJP is equal to nothing but itself: S and VP match, ADVP/ADJP does not.
    Case("no other label is equal", "(S (ADVP (RB up)) (VP (VB go)))", "(S (ADJP (RB up)) (VP (VB go)))", (2, 3, 3)),
    # NP-SBJ-1 -> NP, VP=2 -> VP: 3 of 3.
    Case("labels cut at the first - or =", "(S (NP-SBJ-1 (NN it)) (VP=2 (VBZ is)))", "(S (NP (NN it)) (VP (VBZ is)))",
         (3, 3, 3)),
    # S [0,1] and VP [0,1] labelled differently from NP/VP swapped: only S matches.
    Case("labelled brackets", "(S (NP (NN a)) (VP (VB b)))", "(S (VP (NN a)) (NP (VB b)))", (1, 3, 3)),
    # TOP is a DELETE_LABEL: gold scores S, NP, VP only.
    Case("TOP not scored", "(TOP (S (NP (NN it)) (VP (VBZ is))))", "(S (NP (NN it)) (VP (VBZ is)))", (3, 3, 3)),
    # -NONE- goes with its word, so both sides are over "go now"; the gold NP-SBJ is left empty
    # ([0,0]) and is not scored: gold S, VP, ADVP against the same three. The length (Len.) does
    # not count the -NONE- word (DELETE_LABEL_FOR_LENGTH): 2.
    Case("-NONE- deleted, the empty constituent not scored",
         "(S (NP-SBJ (-NONE- *)) (VP (VB go) (ADVP (RB now))))", "(S (VP (VB go) (ADVP (RB now))))", (3, 3, 3),
         length=2),
    *(_punctuation(tag) for tag in (",", ":", "``", "''", ".")),
    # '$' is not in COLLINS.prm's DELETE_LABELs: it stays, so gold NP spans [0,2], test NP [0,1]:
    # S [0,3] and VP [2,3] match, NP does not. The length counts it: 3.
    Case("a tag COLLINS.prm does not delete is scored", "(S (NP (NN a) ($ $)) (VP (VB b)))",
         "(S (NP (NN a)) ($ $) (VP (VB b)))", (2, 3, 3), length=3),
    # Gold S [0,2], NP [0,2]; test S, NP, NP (the same span twice): the gold NP matches one test NP
    # only, so 2 matched of 2 gold and 3 test (recall 100, precision 66.67).
    Case("a gold bracket matched at most once", "(S (NP (NN a) (NN b)))", "(S (NP (NP (NN a) (NN b))))", (2, 2, 3)),
    # The mirror: two gold NPs over [0,2], one test NP: 2 matched of 3 gold and 2 test.
    Case("a test bracket matched at most once", "(S (NP (NP (NN a) (NN b))))", "(S (NP (NN a) (NN b)))", (2, 3, 2)),
    # Gold S [0,4], NP [0,2], VP [2,4]; test S [0,4], X [1,3]: S matches; X crosses NP (0 < 1 < 2 < 3),
    # so one crossing test bracket.
    Case("crossing brackets", "(S (NP (DT a) (NN b)) (VP (VB c) (NN d)))", "(S (DT a) (X (NN b) (VB c)) (NN d))",
         (1, 3, 2), crossing=1),
)


def _flat(words: int, extra: str = "") -> str:
    """A sentence of ``words`` words, (S (NP first half) (VP second half) extra): 3 brackets."""
    half = words // 2
    np = " ".join(f"(NN w{i})" for i in range(half))
    vp = " ".join(f"(VB w{i})" for i in range(half, words))
    return f"(S (NP {np}) (VP {vp}){extra})"


#: The length cut-off (CUTOFF_LEN 40): (gold = test sentence, its length). 40 words: in; 41: out;
#: 40 words and a -NONE- element: length 40, in; 40 words and a full stop: length 41 (punctuation
#: is deleted from the brackets but counts in the length), out. Each sentence has 3 brackets.
CUTOFF: tuple[tuple[str, int], ...] = (
    (_flat(40), 40),
    (_flat(41), 41),
    (_flat(40, " (-NONE- *T*)"), 40),
    (_flat(40, " (. .)"), 41),
)
#: All four sentences, 12 brackets; at most 40 words: two of them, 6 brackets.
CUTOFF_EXPECTED = {"all": (4, 12), "cutoff": (2, 6)}

#: Error and skipped sentences leave the totals: a word mismatch (error), an empty test line (skipped)
#: and one valid sentence of 3 brackets: 3 sentences, 1 error, 1 skipped, 1 valid, 3 gold brackets.
LEFT_OUT = (["(S (NP (NN it)) (VP (VBZ is)))"] * 3,
            ["(S (NP (NN it)) (VP (VBZ is)))", "(S (NP (NN that)) (VP (VBZ is)))", ""])
LEFT_OUT_EXPECTED = (3, 1, 1, 1, 3)


def _rule_cases() -> list[str]:
    """Every rule case whose counts differ from the hand-worked ones, described."""
    wrong = []
    for case in CASES:
        row, messages = score_sentence(case.gold, case.test, COLLINS)
        got = (row.matched, row.gold_brackets, row.test_brackets)
        if row.status != 0:
            wrong.append(f"{case.rule}: an error sentence ({'; '.join(messages)}), expected a valid one")
        elif got != case.counts:
            wrong.append(f"{case.rule}: matched/gold/test {got}, EVALB gives {case.counts}")
        if case.crossing is not None and row.crossing != case.crossing:
            wrong.append(f"{case.rule}: {row.crossing} crossing, EVALB gives {case.crossing}")
        if case.length is not None and row.length != case.length:
            wrong.append(f"{case.rule}: length {row.length}, EVALB gives {case.length}")
    lines = [gold for gold, _ in CUTOFF]
    result = evalb_lines(lines, lines, COLLINS)
    lengths = [r.length for r in result.rows]
    if lengths != [n for _, n in CUTOFF]:
        wrong.append(f"length cut-off: sentence lengths {lengths}, EVALB gives {[n for _, n in CUTOFF]}")
    for name, summary in (("all", result.all), ("cutoff", result.cutoff)):
        got = (summary.sentences, summary.gold_brackets)
        if got != CUTOFF_EXPECTED[name]:
            wrong.append(f"length cut-off ({name}): sentences/gold brackets {got}, EVALB gives {CUTOFF_EXPECTED[name]}")
    total = evalb_lines(*LEFT_OUT, COLLINS).all
    got = (total.sentences, total.error_sentences, total.skipped_sentences, total.valid_sentences, total.gold_brackets)
    if got != LEFT_OUT_EXPECTED:
        wrong.append(f"error and skipped sentences: sentences/errors/skipped/valid/gold {got}, EVALB gives "
                     f"{LEFT_OUT_EXPECTED}")
    return wrong


def _sample(folder) -> tuple[list[str], str]:
    """Lines of the port's reports (and messages) on EVALB's sample that differ from evalb.c's."""
    if not (folder / "sample.gld").is_file():
        return [], f"EVALB's sample not compared ({folder} has none)"
    wrong, lines = [], 0
    for params, reference in SAMPLE_REFERENCES:
        result = evalb_files(folder / "sample.gld", folder / "sample.tst", params)
        ours = format_report(result).splitlines() + result.messages
        theirs = read_text(folder / reference, "evalb.c's report").splitlines() + \
            read_text(folder / f"{reference}.stderr", "evalb.c's messages").splitlines()
        lines += len(theirs)
        if len(ours) != len(theirs):
            wrong.append(f"{reference}: {len(ours)} lines, evalb.c wrote {len(theirs)}")
        wrong += [f"{reference} line {i + 1}: {a.strip()!r}, evalb.c: {b.strip()!r}"
                  for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    return wrong, f"EVALB's sample: {lines} lines of evalb.c's reports and messages compared"


@checker("evalb.rules", audits=False)
def evalb_rules(claim: Claim, ctx: CheckContext) -> Measurement:
    """Disagreements between repro's EVALB and the reference: the hand-worked counts of each
    rule's cases and, where the data directory has EVALB's sample, evalb.c's own output lines."""
    wrong = _rule_cases()
    sample_wrong, compared = _sample(resolve_data_dir() / SAMPLE_DIR)
    wrong += sample_wrong
    return Measurement(len(wrong), detail=(
        f"{len(CASES)} rule cases, the length cut-off and left-out sentences with COLLINS.prm; {compared}"
        + (f"; differ: {'; '.join(wrong[:4])}" if wrong else "; all agree")))
