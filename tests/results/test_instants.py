"""Issue 45, item 3: a record's date is an instant; no record is shown in another's place.

Dates are parsed timezone-aware and compared as moments (``13:00+02:00`` is older than ``12:00Z``
of the same day), a date in the future or without a time zone is refused naming the file and
field, records of several seeds are all shown (their mean and spread), and a claim folder that is
a symbolic link is named, never passed over as "not run".
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from repro.errors import ResultError
from repro.instants import FUTURE_SKEW_S, checked_instant, instant
from repro.report.newest import latest
from repro.results import Provenance, Result, ResultStore
from tests.cli_run import refusal, run
from tests.metric_claim import claims_dir  # noqa: F401  (claims_dir: a fixture)



def _write(store: ResultStore, value, name: str, date: str, **extra) -> Path:
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=date, scale="local: test")
    return store.write(Result("x.bleu", value, prov, unit="BLEU", extra=extra), name)


def _reported(capsys, tmp_path: Path, claims_dir: Path, results: Path, *flags: str) -> tuple[int, dict | None, str]:
    out = tmp_path / "report"
    rc, _, err = run(capsys, "report", "--results", str(results), "--claims-dir", str(claims_dir), "--out", str(out),
                     "--no-attention", *flags)
    if rc != 0:
        return rc, None, err
    row = next(r for r in json.loads((out / "report.json").read_text())["claims"] if r["id"] == "x.bleu")
    return rc, row, err


def test_dates_compare_as_instants_not_as_text():
    assert instant("2026-01-31T13:00:00+02:00") < instant("2026-01-31T12:00:00Z")
    assert "2026-01-31T13:00:00+02:00" > "2026-01-31T12:00:00Z"   # as text, the older one sorts last
    assert instant("2026-01-31") == instant("2026-01-31T00:00:00+00:00")


def test_the_newer_instant_wins_whatever_its_text(tmp_path):
    store = ResultStore(tmp_path / "results")
    _write(store, 30.0, "older", "2026-01-31T13:00:00+02:00")
    _write(store, 31.0, "newer", "2026-01-31T12:00:00Z")
    assert latest(store)["x.bleu"].measured == 31.0


@pytest.mark.parametrize("date, named", [("2099-01-01T00:00:00+00:00", "lies in the future"),
                                         ("2026-01-31T12:00:00", "names no time zone"),
                                         ("31/01/2026", "is not an ISO 8601 date")])
def test_a_date_that_is_no_past_instant_is_refused_naming_file_and_field(tmp_path, capsys, claims_dir, date, named):
    results = tmp_path / "results"
    store = ResultStore(results)
    _write(store, 30.0, "good", "2026-01-01T00:00:00+00:00")
    bad = _write(store, 99.0, "bad", date)
    rc, _, err = _reported(capsys, tmp_path, claims_dir, results)
    line = refusal(err)
    assert rc == 2 and str(bad) in line and "provenance.date" in line and named in line
    rc, row, err = _reported(capsys, tmp_path, claims_dir, results, "--skip-invalid")
    assert rc == 0 and row["measured"] == 30.0 and str(bad) in err   # left out, and said so


def test_a_small_clock_skew_is_no_future_date():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    checked_instant((now + dt.timedelta(seconds=FUTURE_SKEW_S / 2)).isoformat(), now)
    with pytest.raises(ValueError, match="future"):
        checked_instant((now + dt.timedelta(seconds=2 * FUTURE_SKEW_S)).isoformat(), now)


@pytest.mark.parametrize("dates", [("2026-01-01T00:00:00+00:00",) * 2,
                                   ("2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00")])
def test_records_of_several_seeds_are_all_shown(tmp_path, capsys, claims_dir, dates):
    results = tmp_path / "results"
    store = ResultStore(results)
    _write(store, 30.0, "seed1", dates[0], seed=1)
    _write(store, 32.0, "seed2", dates[1], seed=2)
    shown = latest(store)["x.bleu"]
    assert shown.measured == pytest.approx(31.0)
    assert shown.extra["seeds"] == [1, 2] and shown.extra["over_seeds"]["seeds"] == {"1": 30.0, "2": 32.0}
    assert "seed 1: 30.0" in shown.detail and "seed 2: 32.0" in shown.detail
    low, high = shown.ci95
    assert low < 30.0 and high > 32.0   # two seeds 2 apart: Student's t with one degree of freedom
    rc, row, err = _reported(capsys, tmp_path, claims_dir, results)
    assert rc == 0, err
    assert row["measured"] == pytest.approx(31.0) and row["ci95"] == [pytest.approx(low), pytest.approx(high)]


def test_each_seed_counts_its_own_newest_record(tmp_path):
    store = ResultStore(tmp_path / "results")
    _write(store, 10.0, "seed1-old", "2026-01-01T00:00:00+00:00", seed=1)
    _write(store, 30.0, "seed1-new", "2026-01-03T00:00:00+00:00", seed=1)
    _write(store, 32.0, "seed2", "2026-01-02T00:00:00+00:00", seed=2)
    assert latest(store)["x.bleu"].extra["over_seeds"]["seeds"] == {"1": 30.0, "2": 32.0}


def test_seeds_that_measure_different_words_are_refused(tmp_path):
    store = ResultStore(tmp_path / "results")
    _write(store, "interleaved", "seed1", "2026-01-01T00:00:00+00:00", seed=1)
    _write(store, "concatenated", "seed2", "2026-01-01T00:00:00+00:00", seed=2)
    with pytest.raises(ResultError, match="seeds measure different values.*seed 1.*seed 2"):
        latest(store)


def test_a_claim_folder_that_is_a_symbolic_link_is_named(tmp_path, capsys, claims_dir):
    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    _write(ResultStore(elsewhere), 31.0, "r", "2026-01-01T00:00:00+00:00")
    results.mkdir()
    (results / "x.bleu").symlink_to(elsewhere / "x.bleu")
    rc, _, err = _reported(capsys, tmp_path, claims_dir, results)
    line = refusal(err)
    assert rc == 2 and str(results / "x.bleu") in line and "symbolic link" in line
