"""``repro bleu HYP REF --protocol ... --json``."""

from __future__ import annotations

import json

from repro.cli import main


def test_json_output_keys(tmp_path, capsys):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Das Max-Planck-Zentrum liegt in der Stadt.\nEin Hund läuft.\n", encoding="utf-8")
    ref.write_text("Das Max-Planck-Institut liegt in der Stadt.\nEin Hund läuft.\n", encoding="utf-8")
    for protocol in ("sacrebleu", "paper"):
        assert main(["bleu", str(hyp), str(ref), "--protocol", protocol, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert {"score", "signature", "protocol", "precisions", "brevity_penalty", "hyp_len", "ref_len"} <= set(out)
        assert out["protocol"] == protocol and f"protocol:{protocol}" in out["signature"]
        assert 0 < out["score"] < 100
    assert main(["bleu", str(hyp), str(ref), "--protocol", "paper", "--nltk"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("BLEU = ") and "protocol:paper" in text and "nltk corpus_bleu" in text


def test_unequal_files_exit_2_naming_them(tmp_path, capsys):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("a\nb\n")
    ref.write_text("a\n")
    assert main(["bleu", str(hyp), str(ref), "--protocol", "paper"]) == 2
    err = capsys.readouterr().err
    assert f"{hyp} has 2 lines but {ref} has 1" in err and "line 2 has no partner" in err
