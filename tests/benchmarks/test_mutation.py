"""The mutation benchmark's own pieces (repro/benchmarks/mutation*.py): where a mutant lies, which
mutants are equivalent by construction, and how the summary scores a group."""

from repro.benchmarks.mutation import annotation_spans, enclosing_function
from repro.benchmarks.mutation_summary import _tally

SOURCE = '''from __future__ import annotations

LIMIT = 3


class Beam:
    size: int | None = None

    def step(self, x: int | float) -> float:
        def inner(y):
            return y + 1
        return inner(x) * LIMIT


def top(a: list[int] = [1, 2]) -> int:
    return a[0] - 1
'''


def test_a_line_belongs_to_the_innermost_function_whose_body_holds_it():
    assert enclosing_function(SOURCE, 3) is None              # a module constant
    assert enclosing_function(SOURCE, 7) is None              # a class attribute
    assert enclosing_function(SOURCE, 9) is None              # a signature runs in the scope around
    assert enclosing_function(SOURCE, 11) == "Beam.step.<locals>.inner"
    assert enclosing_function(SOURCE, 12) == "Beam.step"
    assert enclosing_function(SOURCE, 16) == "top"


def test_annotations_are_spans_only_when_postponed():
    spans = annotation_spans(SOURCE)
    inside = lambda line, col: any(s <= (line, col) < e for s, e in spans)  # noqa: E731
    assert inside(7, 14)                                      # `|` of `int | None`
    assert inside(9, 28)                                      # `|` of `int | float`
    assert not inside(15, 25)                                 # a default is evaluated
    assert annotation_spans(SOURCE.replace("from __future__ import annotations\n", "")) == []


def _row(outcome, diff="-a = 1\n+a = 2", tests=None):
    return {"file": "repro/x.py", "outcome": outcome, "diff": diff, "tests_outcome": tests}


def test_the_runner_scores_what_is_on_the_path_and_the_tests_score_what_is_off_it():
    classified = [{"file": "repro/x.py", "old": "a = 1", "new": "a = 2", "kind": "equivalent", "reason": "r"},
                  {"file": "repro/x.py", "old": "b = 1", "new": "b = 3", "kind": "off-path", "reason": "r"},
                  {"file": "repro/x.py", "function": "f", "kind": "off-path", "reason": "r"}]
    rows = [_row("killed"), _row("timeout"), _row("survived"), _row("survived", "-c = 1\n+c = 2"),
            _row("survived", "-b = 1\n+b = 3", tests="killed"), _row("survived", "-d = 1\n+d = 2") | {"function": "f"}]
    tally = _tally(rows, classified)
    assert (tally["equivalent"], tally["survived"], tally["off-path"], tally["off-path killed by tests"]) == (1, 1, 2, 1)
    assert tally["score"] == round(2 / 3, 3)       # killed and timed out of the 3 on the path, not equivalent
    assert tally["off_path_score"] == 0.5
