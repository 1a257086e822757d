"""claims/table3.toml is generated from Table 3's rows (repro/model/table3.py): the two cannot drift."""

from __future__ import annotations

import dataclasses

import pytest

from repro.checks import CHECKERS
from repro.claims import load_claims
from repro.claims import table3_claims
from repro.claims.table3_claims import PRINTED, default_path, main, render
from repro.model.presets import get_preset
from repro.model.table3 import ROWS, Row


def test_the_committed_file_is_the_generators_output():
    assert default_path().read_text(encoding="utf-8") == render(), \
        "claims/table3.toml differs from Table 3's rows: run python -m repro.claims.table3_claims"


def _claims(tmp_path, text):
    (tmp_path / "table3.toml").write_text(text, encoding="utf-8")
    return {c.id: c for c in load_claims(tmp_path, checkers=CHECKERS)}


def test_every_row_has_its_metrics_and_the_paper_figures(tmp_path):
    claims = _claims(tmp_path, render())
    for row in ROWS:
        assert claims[f"table3.ppl.{row.name}"].expected == PRINTED[row.name].ppl
        assert claims[f"table3.bleu.{row.name}"].expected == PRINTED[row.name].bleu
        assert claims[f"table3.ppl.{row.name}"].params == {"preset": row.name, "measure": "perplexity.wordpiece",
                                                           "split": "dev"}
        assert claims[f"table3.bleu.{row.name}"].params == {"preset": row.name,
                                                            "measure": "bleu.tokenized-compound-split", "split": "dev"}
        if PRINTED[row.name].params is not None:
            assert claims[f"table3.params.{row.name}"].expected == PRINTED[row.name].params
    assert len(claims) == 101   # and table3.params.what-trains; 18 of them observed.table3.* (on a run's records)


def test_dimension_claims_agree_with_the_presets_built_from_the_rows(tmp_path):
    """A second path to the same numbers: the preset each row's job builds (repro.model.presets)."""
    dims = [c for c in _claims(tmp_path, render()).values() if c.checker == "run.job_dimensions"]
    assert len(dims) == 14
    for claim in dims:
        m = get_preset(claim.id.removeprefix("table3.dimensions.")).model
        assert claim.expected == {"N_encoder": m.n_layers, "N_decoder": m.n_layers, "d_model": m.d_model,
                                  "d_ff": m.d_ff, "h": m.n_heads, "d_k": m.d_k, "d_v": m.d_v}


def test_a_changed_row_changes_the_claims_and_check_fails(tmp_path, monkeypatch, capsys):
    out = tmp_path / "table3.toml"
    assert main(["--out", str(out)]) == 0 and main(["--out", str(out), "--check"]) == 0
    rows = tuple(dataclasses.replace(r, cells={**r.cells, "N": 3}) if r.name == "C-N2" else r for r in ROWS)
    monkeypatch.setattr(table3_claims, "ROWS", rows)
    monkeypatch.setattr(table3_claims, "ROW", {r.name: r for r in rows})
    assert 'id = "table3.dimensions.C-N2"' in render() and "N_encoder = 3" in render()
    assert main(["--out", str(out), "--check"]) == 1
    assert "differs from Table 3's rows" in capsys.readouterr().err


def test_a_row_without_the_papers_figures_is_refused(monkeypatch):
    monkeypatch.setattr(table3_claims, "ROWS", (*ROWS, Row("F-new", "F", "a row the paper does not print")))
    with pytest.raises(ValueError, match="F-new"):
        render()
