"""A result record must not contradict its claim's unit: sacreBLEU on detokenized text stored for the
paper's tokenized BLEU (0.7-1.5 lower on the same output), a perplexity for a BLEU, a test-set
perplexity for Table 3's dev PPL. Refused naming the record's file and field, by ``repro check`` and
``repro report`` alike, through the claims' units (:func:`repro.claims.loader.known_values`)."""

from __future__ import annotations

import json

import pytest

from repro.claims.loader import known_values
from repro.errors import ResultError
from repro.results import Provenance, Result, ResultStore
from tests.cli_run import refusal, run

DATE = "2026-01-01T00:00:00+00:00"
PROV = Provenance(commit="c0ffee", config_hash="h", hardware="8 x P100", dataset="newstest2014", date=DATE,
                  scale="cluster: paper")


def _record(tmp_path, claim_id: str, unit: str, measured: float = 27.0):
    path = tmp_path / "results" / claim_id / "r.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(Result(claim_id, measured, PROV, unit=unit).to_dict()))
    return path


@pytest.mark.parametrize("claim_id, unit, why", [
    ("table2.bleu.base-ende", "sacreBLEU (detokenized)", "another score"),
    ("table2.bleu.base-enfr", "BLEU (detokenized)", "another BLEU protocol"),
    ("table2.bleu.base-ende", "PPL per wordpiece (test)", "another score"),
    ("table3.ppl.base", "PPL per wordpiece (test)", "another split"),
])
def test_a_record_in_another_unit_than_its_claim_is_refused_naming_file_and_field(tmp_path, capsys, claim_id, unit,
                                                                                   why):
    path = _record(tmp_path, claim_id, unit, 5.0 if unit.startswith("PPL") else 27.0)
    with pytest.raises(ResultError, match=rf"{path.name}: field 'unit': .*'{claim_id}'.*: {why}"):
        ResultStore(tmp_path / "results", expected=known_values()).read_all()
    rc, _, err = run(capsys, "check", "--results", str(tmp_path / "results"), "--only", "local.eq3.peak.local")
    assert rc == 2 and "field 'unit'" in refusal(err) and str(path) in err


@pytest.mark.parametrize("claim_id, unit", [
    ("table2.bleu.base-ende", "BLEU (tokenized, compound splitting)"),   # what the job's measurement writes
    ("table3.bleu.base", "BLEU (tokenized, compound splitting)"),        # the claim says "BLEU (dev)"
    ("table3.ppl.base", "PPL per wordpiece (dev)"),
    ("table2.bleu.base-ende", None),
])
def test_a_record_in_its_claims_unit_is_read(tmp_path, claim_id, unit):
    _record(tmp_path, claim_id, unit, 5.0 if unit and unit.startswith("PPL") else 27.0)
    assert len(ResultStore(tmp_path / "results", expected=known_values()).read_all()) == 1
