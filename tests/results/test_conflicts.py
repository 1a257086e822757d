"""Issue 39, item 3: records that contradict each other are refused, never resolved silently.

Two records of one claim (or of one Table 3 row and seed) with the same date and different values
leave no way to say which counts: ``repro report`` and ``repro table3`` refuse them naming both
files (exit 2). A record of a Table 3 row that does not exist is named, not ignored.
"""

from __future__ import annotations

from pathlib import Path

from repro.report.newest import latest
from repro.results import Provenance, Result, ResultStore
from repro.results.store import disagree
from tests.scaled.conftest import write_row
from tests.cli_run import run
from tests.metric_claim import claims_dir  # noqa: F401  (claims_dir: a fixture)

DATE = "2026-01-01T00:00:00+00:00"


def _record(store: ResultStore, value: float, name: str, date: str = DATE, claim: str = "x.bleu",
            status: str | None = None, seed: int | None = None) -> Path:
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=date, scale="local: test")
    return store.write(Result(claim, value, prov, unit="BLEU", status=status,
                              extra={} if seed is None else {"seed": seed}), name)


def test_report_refuses_two_records_of_one_claim_and_date_that_disagree(tmp_path, claims_dir, capsys):
    store = ResultStore(tmp_path / "results")
    a, b = _record(store, 31.57, "a"), _record(store, 5.0, "b")
    rc, _, err = run(capsys, "report", "--results", str(store.root), "--claims-dir", str(claims_dir),
                     "--out", str(tmp_path / "out"), "--no-attention")
    line = [x for x in err.splitlines() if "error:" in x]
    assert rc == 2 and len(line) == 1 and str(a) in line[0] and str(b) in line[0], err
    assert not (tmp_path / "out" / "report.md").exists()


def test_report_refuses_two_records_of_one_value_and_date_with_other_verdicts(tmp_path, claims_dir, capsys):
    store = ResultStore(tmp_path / "results")
    a, b = _record(store, 31.57, "a", status="pass"), _record(store, 31.57, "b", status="fail")
    rc, _, err = run(capsys, "report", "--results", str(store.root), "--claims-dir", str(claims_dir),
                     "--out", str(tmp_path / "out"), "--no-attention")
    line = [x for x in err.splitlines() if "error:" in x]
    assert rc == 2 and len(line) == 1 and str(a) in line[0] and str(b) in line[0], err


def test_records_of_two_seeds_of_one_claim_and_date_are_no_conflict() -> None:
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=DATE, scale="local: test")
    one, two = (Result("x.bleu", value, prov, unit="BLEU", extra={"seed": seed}) for value, seed in ((31.0, 1), (30.2, 2)))
    assert not disagree(one, two)
    assert disagree(one, Result("x.bleu", 30.2, prov, unit="BLEU", extra={"seed": 1}))


def test_report_takes_the_newer_of_two_dates_and_equal_copies(tmp_path, claims_dir, capsys):
    store = ResultStore(tmp_path / "results")
    _record(store, 5.0, "a", date="2025-01-01T00:00:00+00:00")
    _record(store, 1.0, "b", date="2025-01-01T00:00:00+00:00")   # an older conflict, superseded
    _record(store, 31.57, "c")
    _record(store, 31.57, "d")   # the same value twice is no conflict
    assert latest(store)["x.bleu"].measured == 31.57
    rc, _, err = run(capsys, "report", "--results", str(store.root), "--claims-dir", str(claims_dir),
                     "--out", str(tmp_path / "out"), "--no-attention")
    assert rc == 0, err


def test_table3_refuses_two_records_of_one_seed_and_date_that_disagree(tmp_path, capsys):
    root = tmp_path / "results"
    write_row(root, "base", "bleu", [20.0, 21.0])
    first = root / "table3-small.bleu.base" / "seed-1-sig1.json"
    copy = root / "table3-small.bleu.base" / "seed-1-copy.json"
    copy.write_text(first.read_text().replace('"measured": 20.0', '"measured": 5.0'))
    assert '"measured": 5.0' in copy.read_text()
    rc, _, err = run(capsys, "table3", "--scale", "small", "--results", str(root))
    line = [x for x in err.splitlines() if "error:" in x]
    assert rc == 2 and len(line) == 1 and str(first) in line[0] and str(copy) in line[0], err


def test_table3_names_a_record_of_a_row_table3_does_not_have(tmp_path, capsys):
    root = tmp_path / "results"
    write_row(root, "base", "bleu", [20.0, 21.0])
    write_row(root, "Z-nope", "bleu", [20.0])
    rc, _, err = run(capsys, "table3", "--scale", "small", "--results", str(root))
    assert rc == 2 and "Z-nope" in err and "table3-small.bleu.Z-nope" in err


def test_report_refuses_records_that_disagree_across_two_results_folders(tmp_path, claims_dir, capsys):
    one, two = ResultStore(tmp_path / "one"), ResultStore(tmp_path / "two")
    _record(one, 31.57, "a")
    _record(two, 5.0, "a")
    rc, _, err = run(capsys, "report", "--results", str(one.root), "--results", str(two.root), "--claims-dir",
                     str(claims_dir), "--out", str(tmp_path / "out"), "--no-attention")
    line = [x for x in err.splitlines() if "error:" in x]
    assert rc == 2 and len(line) == 1 and str(one.root) in line[0] and str(two.root) in line[0], err

