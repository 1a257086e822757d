"""``repro data list|show|fetch``."""

from __future__ import annotations

import json

from repro.cli import main


def test_list_json_reports_present_splits(data_dir, capsys):
    assert main(["data", "--data-dir", str(data_dir), "list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in out["datasets"]}
    assert set(rows["multi30k-en-de"]["present"]) >= {"train", "dev", "test"}
    assert rows["wmt14-en-de"]["present"] == ["dev", "test"] and rows["wmt14-en-de"]["fetchable"]
    assert rows["opennmt-wmt-ende-sample"]["tokenized"] is True


def test_show_counts_pairs_and_over_long(data_dir, capsys):
    assert main(["data", "--data-dir", str(data_dir), "show", "wmt14-en-de", "--max-len", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["splits"]["test"]["pairs"] + out["splits"]["test"]["over_long"] == 3003
    assert out["splits"]["dev"]["pairs"] + out["splits"]["dev"]["over_long"] == 3000
    assert out["missing"] == ["train"]


def test_fetch_offline_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["data", "--data-dir", str(tmp_path), "fetch", "wmt14-en-de"]) == 2
    err = capsys.readouterr().err
    assert "cannot download http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz (no network)" in err
    assert f"place it at {tmp_path}/.downloads/training-parallel-europarl-v7.tgz" in err
    assert not list((tmp_path / ".downloads").glob("*.part"))
