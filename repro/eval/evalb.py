"""Labelled bracket F1 as EVALB computes it (Sekine & Collins, 1997) — the metric of Table 4.

A line-for-line port of ``evalb.c`` (the version shipped with nikitakit/self-attentive-parser):

- each line holds one tree; pre-terminals whose label is a ``DELETE_LABEL`` (punctuation,
  ``-NONE-``) are removed with their word *before* spans are computed, so punctuation never
  shifts a span; non-terminals with a ``DELETE_LABEL`` (``TOP``) and empty spans are not scored;
- labels are cut at the first ``-`` or ``=`` (``NP-SBJ-1`` -> ``NP``); ``EQ_LABEL`` pairs are equal;
- a test line without words is *skipped*; a different number of words (after an optional
  quote re-insertion) or a different word is an *error* sentence; neither counts in the scores;
- recall = matched / gold brackets, precision = matched / test brackets, over valid sentences,
  F = 2PR / (P + R); crossing brackets are counted per test bracket.

Where evalb.c has undefined behaviour it is replaced by a clear outcome: a surplus ``)`` is an
error sentence, and a line evalb.c cannot read at all (a word outside a ``(label word)`` pair,
on which it loops until MAX_ERROR kills it) is a :class:`DataError` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro.files.reader import read_text
from repro.limits import TREE_DEPTH
from repro.errors import DataError
from repro.eval.evalb_params import COLLINS, EvalbParams

_C_SPACE = " \t\n\v\f\r"


class EvalbAborted(DataError):
    """More than MAX_ERROR error sentences: evalb.c exits without a summary, and so do we."""


class _Unreadable(Exception):
    pass


@dataclass
class _Bracket:
    start: int
    end: int
    label: str
    result: int = 9  # evalb.c: 0 unmatched, 1 matched, 5 deleted


@dataclass
class _QuoteTerm:
    word: str
    label: str
    index: int
    bracket: int
    ends: list[int]


@dataclass
class _Sentence:
    terminals: list[tuple[str, str]] = field(default_factory=list)  # (word, label)
    brackets: list[_Bracket] = field(default_factory=list)
    quotes: list[_QuoteTerm] = field(default_factory=list)
    length: int = 0  # words not in DELETE_LABEL_FOR_LENGTH (the "Len." column)
    errors: list[str] = field(default_factory=list)


def _read_line(text: str, params: EvalbParams) -> _Sentence:
    """evalb.c ``read_line``: terminals, brackets as word spans, length for the cut-off."""
    sent = _Sentence()
    stack: list[int] = []
    n, i = len(text), 0

    def token_end(j: int) -> int:
        while j < n and text[j] not in _C_SPACE and text[j] not in "()":
            j += 1
        return j

    while i < n:
        ch = text[i]
        if ch in _C_SPACE:
            i += 1
        elif ch == "(":
            p = token_end(i + 1)
            label = text[i + 1:p]
            if p < n and text[p] in _C_SPACE:
                q = p + 1
                while q < n and text[q] in _C_SPACE:
                    q += 1
                k = token_end(q)
                word, q = text[q:k], k
                closes = q < n and text[q] == ")"
                if closes and label not in params.delete_labels_for_length:
                    sent.length += 1
                if closes and label in params.quote_labels and word in ("'", '"', "/"):
                    sent.quotes.append(_QuoteTerm(word, label, len(sent.terminals), len(sent.brackets), list(stack)))
                if closes:
                    if label not in params.delete_labels:
                        sent.terminals.append((word, label))
                    i = q + 1
                    continue
                if not (q < n and text[q] == "("):
                    if word:  # evalb.c loops on the stray word until MAX_ERROR stops it
                        raise _Unreadable(f"more than two elements in a bracket: ({label} {word} ...")
                    sent.errors.append("More than two elements in a bracket")
            sent.brackets.append(_Bracket(len(sent.terminals), -1, label))
            stack.append(len(sent.brackets) - 1)
            if len(stack) > TREE_DEPTH.hard:   # bounded up front: matching is quadratic in the brackets
                raise _Unreadable(f"brackets nested more than {TREE_DEPTH.hard} deep ({TREE_DEPTH.why})")
            i = p
        elif ch == ")":
            if stack:
                sent.brackets[stack.pop()].end = len(sent.terminals)
            else:
                sent.errors.append("Bracketing unbalance (too many close bracket)")
            i += 1
        else:
            raise _Unreadable(f"word {text[i:token_end(i)]!r} outside a (label word) pair")
    if stack:
        sent.errors.append("Bracketing is unbalanced (too many open bracket)")
    return sent


def _reinsert(quote: _QuoteTerm, sent: _Sentence) -> None:
    """evalb.c ``reinsert_term``: put a deleted quote word back and widen the spans around it."""
    sent.terminals.insert(quote.index, (quote.word, quote.label))
    for k, bracket in enumerate(sent.brackets):
        if k >= quote.bracket:
            bracket.start += 1
            bracket.end += 1
    for k in quote.ends:
        sent.brackets[k].end += 1


def _fix_quote(gold: _Sentence, test: _Sentence, params: EvalbParams) -> None:
    """evalb.c ``fix_quote``: when only one side deleted a quote pre-terminal, re-insert it."""
    deleted = params.delete_labels
    for q2_pos, q2 in enumerate(test.quotes):
        ind = q2.index
        for q1_pos, q1 in enumerate(gold.quotes):
            if q1.index != ind or q1.label == q2.label:
                continue
            if q1.label in deleted and q2.label not in deleted:
                _reinsert(q1, gold)
                for later in gold.quotes[q1_pos:]:
                    later.index += 1
            elif q2.label in deleted and q1.label not in deleted:
                _reinsert(q2, test)
                for later in test.quotes[q2_pos:]:
                    later.index += 1


def _massage(sent: _Sentence, params: EvalbParams) -> int:
    """evalb.c ``massage_data``: mark empty and deleted brackets; return the scored count."""
    for b in sent.brackets:
        b.result = 0
        if b.start == b.end:
            b.result = 5
            continue
        b.label = _cut_label(b.label)
        if any(params.label_equal(b.label, d) for d in params.delete_labels):
            b.result = 5
    return sum(b.result != 5 for b in sent.brackets)


def _cut_label(label: str) -> str:
    """evalb.c ``modify_label``: cut at the first '-' or '=' (``NP-SBJ-1`` -> ``NP``)."""
    for pos, ch in enumerate(label):
        if ch in "-=":
            return label[:pos]
    return label


@dataclass(frozen=True)
class SentenceResult:
    """One row of EVALB's per-sentence table. ``status``: 0 valid, 1 error, 2 skipped."""

    line: int
    length: int
    status: int
    matched: int = 0
    gold_brackets: int = 0
    test_brackets: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0


def score_sentence(gold_line: str, test_line: str, params: EvalbParams = COLLINS, line: int = 1
                   ) -> tuple[SentenceResult, list[str]]:
    """Score one gold/test pair as evalb.c ``calc_result`` does; returns the row and error messages.

    Raises ``ValueError`` for a line evalb.c cannot read (see the module docstring).
    """
    try:
        gold = _read_line(gold_line, params)
    except _Unreadable as err:
        raise ValueError(f"gold: {err}") from None
    try:
        test = _read_line(test_line, params)
    except _Unreadable as err:
        raise ValueError(f"test: {err}") from None
    errors = gold.errors + test.errors
    status = 1 if errors else 0
    if not test.terminals:
        return SentenceResult(line, gold.length, 2), errors
    if len(gold.terminals) != len(test.terminals):
        _fix_quote(gold, test, params)
        if len(gold.terminals) != len(test.terminals):
            errors.append(f"Length unmatch ({len(gold.terminals)}|{len(test.terminals)})")
            return SentenceResult(line, gold.length, 1), errors
    for (w1, _), (w2, _) in zip(gold.terminals, test.terminals):
        if not params.word_equal(w1, w2):
            errors.append(f"Words unmatch ({w1}|{w2})")
            return SentenceResult(line, gold.length, 1), errors
    n_gold, n_test = _massage(gold, params), _massage(test, params)
    matched = 0
    for g in gold.brackets:
        for t in test.brackets:
            if g.result != 5 and t.result == 0 and (g.start, g.end) == (t.start, t.end):
                if not params.labeled or params.label_equal(g.label, t.label):
                    g.result = t.result = 1
                    matched += 1
                    break
    crossing = 0
    for t in test.brackets:  # "crossing is counted based on the brackets in test" (Collins)
        for g in gold.brackets:
            if g.result != 5 and t.result != 5 and (
                    g.start < t.start < g.end < t.end or t.start < g.start < t.end < g.end):
                crossing += 1
                break
    tags = sum(params.label_equal(l1, l2) for (_, l1), (_, l2) in zip(gold.terminals, test.terminals))
    return SentenceResult(line, gold.length, status, matched, n_gold, n_test, crossing,
                          len(gold.terminals), tags), errors


@dataclass(frozen=True)
class Summary:
    """One ``=== Summary ===`` block of EVALB (``-- All --`` or ``-- len<=40 --``)."""

    sentences: int
    error_sentences: int
    skipped_sentences: int
    matched: int
    gold_brackets: int
    test_brackets: int
    crossing: int
    complete: int
    no_crossing: int
    two_or_less_crossing: int
    words: int
    correct_tags: int

    @classmethod
    def of(cls, rows: list[SentenceResult]) -> "Summary":
        valid = [r for r in rows if r.status == 0]
        return cls(len(rows), sum(r.status == 1 for r in rows), sum(r.status == 2 for r in rows),
                   sum(r.matched for r in valid), sum(r.gold_brackets for r in valid),
                   sum(r.test_brackets for r in valid), sum(r.crossing for r in valid),
                   sum(r.gold_brackets == r.test_brackets == r.matched for r in valid),
                   sum(r.crossing == 0 for r in valid), sum(r.crossing <= 2 for r in valid),
                   sum(r.words for r in valid), sum(r.correct_tags for r in valid))

    @property
    def valid_sentences(self) -> int:
        return self.sentences - self.error_sentences - self.skipped_sentences

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0

    @property
    def f1(self) -> float:
        """2PR/(P+R); NaN when P + R = 0, where evalb.c prints nan."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else float("nan")

    def _per_valid(self, count: float, scale: float = 100.0) -> float:
        return scale * count / self.valid_sentences if self.valid_sentences > 0 else 0.0

    @property
    def complete_match(self) -> float:
        return self._per_valid(self.complete)

    @property
    def average_crossing(self) -> float:
        return self._per_valid(self.crossing, 1.0)

    @property
    def no_crossing_pct(self) -> float:
        return self._per_valid(self.no_crossing)

    @property
    def two_or_less_crossing_pct(self) -> float:
        return self._per_valid(self.two_or_less_crossing)

    @property
    def tagging_accuracy(self) -> float:
        return 100.0 * self.correct_tags / self.words if self.words else 0.0

    def to_dict(self) -> dict:
        f1 = self.f1
        return {
            "recall": self.recall, "precision": self.precision, "f1": None if f1 != f1 else f1,
            "complete_match": self.complete_match, "tagging_accuracy": self.tagging_accuracy,
            "sentences": self.sentences, "valid_sentences": self.valid_sentences,
            "error_sentences": self.error_sentences, "skipped_sentences": self.skipped_sentences,
            "average_crossing": self.average_crossing, "no_crossing": self.no_crossing_pct,
            "two_or_less_crossing": self.two_or_less_crossing_pct,
            "matched_brackets": self.matched, "gold_brackets": self.gold_brackets,
            "test_brackets": self.test_brackets, "words": self.words, "correct_tags": self.correct_tags,
        }


@dataclass(frozen=True)
class EvalbResult:
    rows: list[SentenceResult]
    messages: list[str]  # what evalb.c writes to stderr, e.g. "12 : Words unmatch (is|was)"
    params: EvalbParams

    @property
    def all(self) -> Summary:
        return Summary.of(self.rows)

    @property
    def cutoff(self) -> Summary:
        return Summary.of([r for r in self.rows if r.length <= self.params.cutoff_len])

    def to_dict(self) -> dict:
        return {**self.all.to_dict(), "cutoff_len": self.params.cutoff_len,
                "cutoff": self.cutoff.to_dict(), "messages": list(self.messages)}


def _lines(text: str) -> list[str]:
    """Lines split at ``\n`` only, as EVALB's reader splits them."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def evalb_lines(gold: list[str], test: list[str], params: EvalbParams = COLLINS,
                gold_name: str = "gold", test_name: str = "test") -> EvalbResult:
    """Score parallel lists of one-tree-per-line brackets; names are for error messages."""
    rows: list[SentenceResult] = []
    messages: list[str] = []
    error_count = 0

    def error(line: int, text: str) -> None:
        nonlocal error_count
        messages.append(f"{line} : {text}")
        if error_count > params.max_error:
            raise EvalbAborted(
                f"EVALB stops at line {line} of {test_name}: more than MAX_ERROR={params.max_error} "
                f"errors ({text}); fix the trees or raise MAX_ERROR (--max-error)")
        error_count += 1

    for number, gold_line in enumerate(gold, start=1):
        if number > len(test):
            error(number, "Number of lines unmatch (too many lines in gold file)")
            break
        try:
            row, errs = score_sentence(gold_line, test[number - 1], params, number)
        except ValueError as err:
            side, _, what = str(err).partition(": ")
            name = gold_name if side == "gold" else test_name
            raise DataError(f"{name} line {number}: EVALB cannot read this tree: {what}") from None
        for text in errs:
            error(number, text)
        rows.append(row)
    if len(test) > len(gold):
        error(len(gold) + 1, "Number of lines unmatch (too many lines in test file)")
    return EvalbResult(rows, messages, params)


def evalb_files(gold_path: str | Path, test_path: str | Path, params: EvalbParams = COLLINS) -> EvalbResult:
    """``evalb -p PARAMS GOLD TEST``: score two files of one-tree-per-line brackets."""
    texts = [read_text(path, "tree file", stream=True, error=DataError, undecodable="keep")   # bytes, as EVALB
             for path in (gold_path, test_path)]
    return evalb_lines(_lines(texts[0]), _lines(texts[1]), params, str(gold_path), str(test_path))
