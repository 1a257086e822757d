"""The audit zoo (``repro audit --zoo``): adapters for other implementations, side by side.

Small on purpose: a handful of claims, each at the small sizes it names, so that CI (which
installs the ``[zoo]`` extra) runs it in seconds. The committed example in reports/audit/ is the
full run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.audit.audit import auditable_claims
from repro.audit.side_by_side import run_zoo
from repro.audit.side_by_side_render import to_markdown, write_zoo
from repro.audit.zoo import NOT_INSTALLABLE, ZOO, installed_entries
from repro.cli import main

pytest.importorskip("transformers", reason="the [zoo] extra is not installed (pip install -e .[zoo])")
pytest.importorskip("x_transformers", reason="the [zoo] extra is not installed (pip install -e .[zoo])")

CLAIMS = ("sec3.decoder.causal-mask", "sec3.pe.layout", "sec3.pe.wavelengths", "sec3.embedding.shared",
          "sec3.eq1.scaled-dot-product", "sec5.eq3.peak-step")


@pytest.fixture(scope="module")
def zoo():
    claims = [c for c in auditable_claims() if c.id in CLAIMS]
    return run_zoo(installed_entries(), claims)


def cell(zoo, key: str, claim_id: str):
    column = next(c for c in zoo.columns if c.entry.key == key)
    assert not column.error, column.error
    return column.cells[claim_id]


def test_every_registered_adapter_loads_and_runs(zoo) -> None:
    assert {c.entry.key for c in zoo.columns} == {e.key for e in ZOO}
    for column in zoo.columns:
        assert not column.error, column.error
        assert {c.category for c in column.cells.values()} <= {"pass", "departure", "not applicable", "paper inconsistent"}


def test_fsmt_called_without_labels_builds_no_causal_mask(zoo) -> None:
    leak = cell(zoo, "fsmt", "sec3.decoder.causal-mask")
    assert leak.category == "departure" and leak.measured > 0
    assert cell(zoo, "fsmt-no-cache", "sec3.decoder.causal-mask").category == "pass"
    for key in ("repro", "torch", "marian", "x-transformers"):
        assert cell(zoo, key, "sec3.decoder.causal-mask").category == "pass"


def test_layout_is_its_own_fact_and_the_set_of_sinusoids_is_checked_apart(zoo) -> None:
    for key in ("marian", "fsmt", "x-transformers"):
        assert cell(zoo, key, "sec3.pe.layout").measured == "sines-then-cosines"
    assert cell(zoo, "marian", "sec3.pe.wavelengths").category == "pass"
    assert cell(zoo, "x-transformers", "sec3.pe.wavelengths").category == "pass"
    # fairseq's frequencies run to exactly 10000 * 2pi, not the formula's 10000^((d-2)/d) * 2pi
    assert cell(zoo, "fsmt", "sec3.pe.wavelengths").category == "departure"
    assert cell(zoo, "torch", "sec3.pe.layout").category == "not applicable"


def test_hugging_face_trainer_runs_its_first_update_at_rate_zero(zoo) -> None:
    peak = cell(zoo, "marian", "sec5.eq3.peak-step")
    assert peak.category == "departure" and peak.measured == 4001


def test_departures_not_applicable_and_errors_are_told_apart_in_every_format(zoo, tmp_path: Path) -> None:
    paths = write_zoo(zoo, tmp_path)
    assert [p.name for p in paths] == ["zoo.md", "zoo.html", "zoo.json"]
    data = json.loads(paths[2].read_text())
    assert [c["key"] for c in data["columns"]] == [e.key for e in ZOO]
    row = next(r for r in data["claims"] if r["id"] == "sec3.decoder.causal-mask")
    assert row["cells"]["fsmt"]["category"] == "departure" and row["cells"]["fsmt"]["reason"]
    assert set(data["not_installable"]) == set(NOT_INSTALLABLE)
    text = to_markdown(zoo)
    assert "**DEPARTURE**: 36 vs paper 0" in text and "n/a:" in text
    page = paths[1].read_text()
    assert "<table>" in page and "class='departure'" in page and "class='not-applicable'" in page


def test_cli_zoo_writes_the_report_into_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit"
    code = main(["audit", "--zoo", "--zoo-only", "torch", "--zoo-only", "marian", "--only", "sec3.pe.layout",
                 "--out", str(out)])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["zoo.html", "zoo.json", "zoo.md"]
    assert "marian" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["audit"], "give a TARGET (module:factory) or --zoo"),
    (["audit", "--zoo", "repro.audit.torch_adapter:adapter"], "takes no TARGET"),
    (["audit", "--zoo", "--zoo-only", "nope"], "unknown column nope"),
    (["audit", "repro.audit.torch_adapter:adapter", "--out", "x"], "--out and --zoo-only go with --zoo"),
])
def test_cli_usage_errors_exit_2(argv, message, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err
