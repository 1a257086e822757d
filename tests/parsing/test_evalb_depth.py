"""Issue 39, item 7: EVALB's input is bounded up front: a tree nested 40,000 brackets deep is refused
at once (exit 2, naming the file and line), not scored for minutes nor ended in a RecursionError."""

from __future__ import annotations

import time

from repro.cli import build_parser, main
from repro.limits import TREE_DEPTH


def _deep(depth: int) -> str:
    return "(X " * depth + "(NN w)" + ")" * depth + "\n"


def test_a_40000_deep_tree_is_refused_quickly(tmp_path, capsys):
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(_deep(40_000))
    test.write_text(_deep(40_000))
    build_parser()   # the commands imported first: the bound is timed, not the imports
    began = time.monotonic()
    rc = main(["evalb", str(gold), str(test)])
    err = capsys.readouterr().err
    assert time.monotonic() - began < 5
    assert rc == 2 and f"{TREE_DEPTH.hard} deep" in err and "line 1" in err and "Traceback" not in err


def test_a_tree_within_the_bound_is_scored(tmp_path, capsys):
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(_deep(200))
    test.write_text(_deep(200))
    assert main(["evalb", str(gold), str(test)]) == 0
