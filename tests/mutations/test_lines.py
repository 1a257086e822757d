"""The mutation record stays runnable: every mutation's line is in the source exactly once, and
names are unique (a refactoring that moves a line must move its mutation with it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402


def test_names_are_unique() -> None:
    names = [m.name for m in run.MUTATIONS + run.SUITE_MUTATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("mutation", run.MUTATIONS + run.SUITE_MUTATIONS, ids=lambda m: m.name)
def test_each_line_is_in_the_source_once_and_the_mistake_changes_it(mutation) -> None:
    text = (run.ROOT / mutation.file).read_text(encoding="utf-8")
    assert text.split("\n").count(mutation.old) == 1, f"{mutation.file}: the line of {mutation.name} moved"
    assert mutation.new != mutation.old


@pytest.mark.parametrize("mutation", run.SUITE_MUTATIONS, ids=lambda m: m.name)
def test_each_machinery_mistake_names_test_files_that_exist(mutation) -> None:
    assert mutation.tests and all((run.ROOT / t).is_file() for t in mutation.tests), mutation.tests
