"""``repro report`` end to end on synthetic result sets: statuses, escaping, refusal, atomicity."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from repro.cli import main as cli
from repro.errors import ResultError
from repro.report import OUTPUTS, generate, render_html
from repro.report.build import build_rows
from repro.claims import load_claims
from repro.results import Result

XSS = "<script>alert(1)</script>"  # the value tests/report/conftest.py puts in a claim and a result


def test_every_status_in_every_output(claims_dir, results_dir, tmp_path, expected_status):
    EXPECTED_STATUS = expected_status
    out = tmp_path / "out"
    generate([results_dir], out, claims_dir=claims_dir)
    assert all((out / name).is_file() for name in OUTPUTS)
    payload = json.loads((out / "report.json").read_text())
    assert {c["id"]: c["status"] for c in payload["claims"]} == EXPECTED_STATUS
    csv = pd.read_csv(out / "report.csv")
    assert dict(zip(csv["id"], csv["status"])) == EXPECTED_STATUS
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for status in set(EXPECTED_STATUS.values()):
        assert f"| {status} " in md.replace("  ", " ") or status in md
        assert f">{status}</td>" in html
    # Provenance travels with every measured row; the scale of each figure is printed.
    row = next(c for c in payload["claims"] if c["id"] == "t.cluster-with-local-result")
    assert row["measured"] == 4.92 and row["run scale"] == "local: 2-core CPU" and row["commit"] == "0123456789abcdef"
    assert "local: 2-core CPU" in md and "nrefs:1|tok:13a".replace("|", "\\|") in md


def test_values_are_escaped(claims_dir, results_dir, tmp_path):
    out = tmp_path / "out"
    generate([results_dir], out, claims_dir=claims_dir)
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    assert XSS not in html and "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert XSS not in md and "&lt;script&gt;" in md
    # The JSON keeps the raw value: machines get data, not markup.
    assert XSS in json.loads((out / "report.json").read_text())["claims"][-1]["measured"]


def test_unescaped_renderer_would_be_caught(claims_dir, results_dir, tmp_path, monkeypatch):
    """Teeth: with escaping switched off the page carries the raw script tag."""
    monkeypatch.setattr(render_html, "escape", lambda s, quote=True: s)
    out = tmp_path / "out"
    generate([results_dir], out, claims_dir=claims_dir)
    assert XSS in (out / "report.html").read_text()


def test_result_without_provenance_is_refused(claims_dir, results_dir, tmp_path):
    bad = results_dir / "t.within" / "20990101T000000-nopro.json"
    bad.write_text(json.dumps({"claim_id": "t.within", "measured": 27.3}))
    out = tmp_path / "out"
    with pytest.raises(ResultError, match=r"20990101T000000-nopro\.json.*provenance"):
        generate([results_dir], out, claims_dir=claims_dir)
    assert not out.exists()


def test_result_object_without_provenance_is_refused(claims_dir):
    claims = load_claims(claims_dir)
    with pytest.raises(ResultError, match="t.within.*no provenance"):
        build_rows(claims, {"t.within": Result("t.within", 27.3, provenance=None)})  # type: ignore[arg-type]


def test_provenance_missing_a_field_is_refused(claims_dir, results_dir, tmp_path):
    path = next((results_dir / "t.deviates").glob("*.json"))
    record = json.loads(path.read_text())
    record["provenance"]["commit"] = ""
    path.write_text(json.dumps(record))
    with pytest.raises(ResultError, match=rf"{path.name}.*commit"):
        generate([results_dir], tmp_path / "out", claims_dir=claims_dir)


def _previous_report(out: Path) -> dict[str, str]:
    out.mkdir(parents=True)
    old = {name: f"previous {name}\n" for name in OUTPUTS}
    for name, text in old.items():
        (out / name).write_text(text)
    return old


def test_malformed_result_names_the_file_and_writes_nothing(claims_dir, results_dir, tmp_path):
    bad = results_dir / "t.deviates" / "20990101T000000-broken.json"
    bad.write_text('{"claim_id": "t.deviates", "measured": ')
    out = tmp_path / "out"
    old = _previous_report(out)
    with pytest.raises(ResultError, match=r"20990101T000000-broken\.json:1: not valid JSON"):
        generate([results_dir], out, claims_dir=claims_dir)
    assert {p.name: p.read_text() for p in out.iterdir()} == old


def test_missing_results_dir_is_named(claims_dir, tmp_path):
    with pytest.raises(ResultError, match="nowhere.*does not exist"):
        generate([tmp_path / "nowhere"], tmp_path / "out", claims_dir=claims_dir)


def test_a_failing_renderer_leaves_the_previous_report(claims_dir, results_dir, tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = _previous_report(out)

    def broken(doc):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(render_html, "render", broken)
    with pytest.raises(RuntimeError):
        generate([results_dir], out, claims_dir=claims_dir)
    assert {p.name: p.read_text() for p in out.iterdir()} == old  # no temp file left either


def test_a_failing_write_leaves_the_previous_report(claims_dir, results_dir, tmp_path, monkeypatch):
    import importlib

    writer = importlib.import_module("repro.files.writer")   # the one writer stages the report's files
    out = tmp_path / "out"
    old = _previous_report(out)
    real, calls = writer.temporary_file, []

    def stage_then_fail(path):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(path)

    monkeypatch.setattr(writer, "temporary_file", stage_then_fail)
    with pytest.raises(OSError):
        generate([results_dir], out, claims_dir=claims_dir)
    assert {p.name: p.read_text() for p in out.iterdir()} == old


def test_newest_result_across_stores_wins(claims_dir, results_dir, tmp_path, make_provenance):
    from repro.results import ResultStore

    later = ResultStore(tmp_path / "cluster-results")
    later.write(Result("t.deviates", 27.3, make_provenance("cluster: 8 GPUs", date="2026-06-01T00:00:00+00:00"),
                       ci95=(27.1, 27.5)))
    out = tmp_path / "out"
    doc = generate([results_dir, later.root], out, claims_dir=claims_dir)
    assert doc.data.row("t.deviates").status == "reproduced"


def test_cli(claims_dir, results_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli(["report", "--results", str(results_dir), "--out", str(out), "--claims-dir", str(claims_dir)])
    assert code == 0 and (out / "report.html").is_file()
    (results_dir / "t.within" / "bad.json").write_text("[1, 2")
    code = cli(["report", "--results", str(results_dir), "--out", str(out), "--claims-dir", str(claims_dir)])
    assert code == 2 and "bad.json" in capsys.readouterr().err


def test_figures_of_absent_runs_are_kept_and_only_own_figures_pruned(claims_dir, results_dir, tmp_path):
    from repro.report.previous import kept_figures

    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 16
    (out / "figures" / "curves-parser.png").write_bytes(png)  # drawn by the previous report, run now absent
    (out / "figures" / "by-hand.png").write_bytes(png)  # never written by a report
    (out / "report.json").write_text(json.dumps({"figures": [
        {"name": "curves-parser", "title": "Training loss (parser)", "caption": "c", "file": "figures/curves-parser.png"},
        {"name": "gone", "title": "g", "caption": "", "file": "figures/gone.png"}]}))
    assert [f.name for f in kept_figures(out, set())] == ["curves-parser"]
    doc = generate([results_dir], out, claims_dir=claims_dir)
    kept = [f for f in doc.figures.figures if f.name == "curves-parser"]
    assert kept and "not on this machine" in kept[0].caption
    assert (out / "figures" / "curves-parser.png").read_bytes() == png and (out / "figures" / "by-hand.png").exists()
    assert "figures/curves-parser.png" in (out / "report.md").read_text()


def test_basis_and_target_in_every_rendering(claims_dir, results_dir, tmp_path):
    (claims_dir / "target.toml").write_text('''
[[claim]]
id = "t.target"
source = "Project target"
statement = "The project's own local target of 30 BLEU."
kind = "metric"
scale = "local"
checker = "metric.result"
expected = 30.0
bound = "at_least"
target = true
''', encoding="utf-8")
    out = tmp_path / "out"
    generate([results_dir], out, claims_dir=claims_dir)
    data = json.loads((out / "report.json").read_text())
    rows = {r["id"]: r for r in data["claims"]}
    assert rows["t.target"]["paper"] is None and rows["t.target"]["target"] == 30.0
    assert rows["t.escape"]["basis"] == "setting" and rows["t.within"]["basis"] == "result"
    assert data["summary_by_basis"]["reproduced"]["setting"] >= 1
    assert sum(sum(v.values()) for v in data["summary_by_basis"].values()) == len(rows)
    csv = (out / "report.csv").read_text()
    assert "basis" in csv.splitlines()[0] and "ci95" in csv.splitlines()[0]
    for name in ("report.md", "report.html"):
        text = (out / name).read_text()
        assert "target: 30" in text and re.search(r"\d+ reproduced \(\d+ setting, \d+ behaviour, \d+ result, \d+ paper arithmetic\)",
                                                 text)
        assert "paper: 30" not in text
