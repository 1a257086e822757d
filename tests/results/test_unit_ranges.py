"""A result record whose number no scorer can give (BLEU above 100 or below 0, F1 likewise, a
perplexity below 1) is corrupt: refused naming its file and field, never certified by a one-sided
bound ("at least 30" and BLEU 1.7e308)."""

from __future__ import annotations

import json

import pytest

from repro.errors import ResultError
from repro.results import Provenance, Result, ResultStore

DATE = "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize("unit, measured, ci95", [
    ("BLEU", 1.7e308, None), ("sacreBLEU (detokenized)", -0.5, None), ("BLEU (dev)", 31.0, [30.0, 100.5]),
    ("F1 (EVALB, COLLINS.prm)", 101.0, None), ("PPL per wordpiece (dev)", 0.9, None),
])
def test_a_record_outside_what_its_unit_can_be_is_refused_naming_the_field(tmp_path, unit, measured, ci95):
    store = ResultStore(tmp_path / "results")
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=DATE, scale="local: test")
    result = Result("x.bleu", measured, prov, unit=unit, ci95=tuple(ci95) if ci95 else None)
    with pytest.raises(ResultError, match=r"x.bleu: field '(measured|ci95)': .* lies in \["):
        store.write(result, "r")
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.json"))
    path = tmp_path / "results" / "x.bleu" / "r.json"   # written by another tool: refused where it is read
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(result.to_dict()))
    with pytest.raises(ResultError, match=rf"{path.name}: field '(measured|ci95)': .* lies in \["):
        ResultStore(tmp_path / "results").read_all()


@pytest.mark.parametrize("unit, measured", [("BLEU", 0.0), ("BLEU", 100.0), ("BLEU", float("nan")),
                                            ("PPL per wordpiece (dev)", 1.0), ("10^6 parameters", 1e9)])
def test_a_record_inside_its_unit_or_without_a_range_is_read(tmp_path, unit, measured):
    store = ResultStore(tmp_path / "results")
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=DATE, scale="local: test")
    store.write(Result("x.bleu", measured, prov, unit=unit), "r")
    assert len(ResultStore(tmp_path / "results").read_all()) == 1


@pytest.mark.parametrize("unit", ["BLEU difference from case-sensitive sacreBLEU", "BLEU above the best earlier model",
                                  "F1 difference", "PPL ratio"])
def test_a_difference_of_scores_may_have_either_sign(tmp_path, unit):
    store = ResultStore(tmp_path / "results")
    prov = Provenance(commit="c0ffee", config_hash="h", hardware="cpu", dataset="d", date=DATE, scale="local: test")
    store.write(Result("x.bleu", -0.7, prov, unit=unit), "r")
    assert ResultStore(tmp_path / "results").read_all()[0].measured == -0.7
