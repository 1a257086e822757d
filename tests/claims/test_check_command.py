"""``repro check``: records, JSON output and exit codes."""

from __future__ import annotations

import json

from repro.cli import main

def empty(tmp_path):
    (tmp_path / "results").mkdir(exist_ok=True)
    return tmp_path / "results"


PASSING = """
[[claim]]
id = "t.scale"
source = "Section 3.4"
statement = "embeddings scaled by sqrt(d_model)"
kind = "equation"
scale = "local"
checker = "embedding.scale"
expected = 8.0
tolerance = { rel = 1e-5 }
params = { d_model = 64 }

[[claim]]
id = "t.metric"
source = "Table 2"
statement = "needs a run"
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 27.3
tolerance = { abs = 0.5 }
"""


def test_check_writes_records_and_passes(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(PASSING)
    out = tmp_path / "records.json"
    code = main(["check", "--claims-dir", str(tmp_path), "--json", str(out), "--results", str(empty(tmp_path))])
    records = {r["id"]: r for r in json.loads(out.read_text())}
    assert code == 0
    assert records["t.scale"]["status"] == "pass" and abs(records["t.scale"]["measured"] - 8.0) < 1e-6
    assert records["t.metric"]["status"] == "not run"
    assert all({"id", "status", "expected", "measured"} <= set(r) for r in records.values())
    assert "t.scale" in capsys.readouterr().out


def test_check_exits_non_zero_when_a_claim_fails(tmp_path):
    (tmp_path / "c.toml").write_text(PASSING.replace("expected = 8.0", "expected = 7.0"))
    assert main(["check", "--claims-dir", str(tmp_path), "--results", str(empty(tmp_path))]) == 1


def test_check_stores_measurements_with_provenance(tmp_path):
    (tmp_path / "c.toml").write_text(PASSING)
    store = tmp_path / "store"
    main(["check", "--claims-dir", str(tmp_path), "--store", str(store), "--results", str(empty(tmp_path))])
    (record,) = [json.loads(p.read_text()) for p in store.rglob("*.json")]
    assert record["claim_id"] == "t.scale" and record["provenance"]["commit"]
