"""One metric claim (``x.bleu``: BLEU of at least 30 at local scale), the claims folder the tests of
the results store, the report and bad records read."""

from __future__ import annotations

from pathlib import Path

import pytest

METRIC_CLAIM = """part = "x"
[[claim]]
id = "x.bleu"
source = "test"
statement = "a metric"
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 30.0
bound = "at_least"
unit = "BLEU"
"""


def write_claims_dir(folder: Path) -> Path:
    """``folder`` made, holding ``x.toml`` with :data:`METRIC_CLAIM`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x.toml").write_text(METRIC_CLAIM)
    return folder


@pytest.fixture()
def claims_dir(tmp_path: Path) -> Path:
    return write_claims_dir(tmp_path / "claims")
