"""Issue 39, item 6: text read as the reference tools read it (:mod:`repro.data.text_lines`).

A UTF-8 BOM is not text (an identical hypothesis scores 100, not 93.66); a line ends at ``\\n``
only, as ``wc -l`` and sacreBLEU count (U+0085 or U+2028 inside a sentence is part of it); an
empty file is refused with exit 2 naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.data.text_lines import read_lines
from repro.files.text_decoding import split_lines
from tests.cli_run import run

SENTENCES = ["Ein Mann fährt Fahrrad auf der Straße .", "Zwei Hunde spielen im Schnee vor dem Haus .",
             "Eine Frau liest ein Buch im Garten ."]


def bleu(capsys, hyp: Path, ref: Path) -> tuple[int, dict | None, str]:
    rc, out, err = run(capsys, "bleu", str(hyp), str(ref), "--json")
    return rc, json.loads(out) if rc == 0 else None, err


def test_split_lines_splits_at_newline_only():
    assert split_lines("a\u0085b\u2028c\x0cd\n") == ["a\u0085b\u2028c\x0cd"]
    assert split_lines("\ufeffa\r\nb\n") == ["a", "b"]
    assert split_lines("a\n\nb") == ["a", "", "b"]


def test_a_bom_does_not_cost_the_first_sentence(tmp_path, capsys):
    ref = tmp_path / "ref.de"
    ref.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    hyp = tmp_path / "hyp.de"
    hyp.write_text("\ufeff" + "".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    rc, out, err = bleu(capsys, hyp, ref)
    assert rc == 0, err
    assert out["score"] == pytest.approx(100.0)


def test_u0085_inside_a_line_is_part_of_it(tmp_path, capsys):
    text = [SENTENCES[0], SENTENCES[1].replace("im Schnee", "im\u0085Schnee"), SENTENCES[2]]
    ref, hyp = tmp_path / "ref.de", tmp_path / "hyp.de"
    ref.write_text("".join(s + "\n" for s in text), encoding="utf-8")
    hyp.write_text("".join(s + "\n" for s in text), encoding="utf-8")
    assert len(read_lines(ref)) == 3 == ref.read_bytes().count(b"\n")   # as wc -l counts
    rc, out, err = bleu(capsys, hyp, ref)
    assert rc == 0, err
    assert out["score"] == pytest.approx(100.0)


def test_u2028_in_the_hypothesis_only_is_no_line_mismatch(tmp_path, capsys):
    ref, hyp = tmp_path / "ref.de", tmp_path / "hyp.de"
    ref.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    hyp.write_text("".join(s.replace("Hunde", "Hunde\u2028") + "\n" for s in SENTENCES), encoding="utf-8")
    rc, out, err = bleu(capsys, hyp, ref)
    assert rc == 0, err   # three lines each: no "has 4 lines but ... has 3"


@pytest.mark.parametrize("empty", ["hyp", "ref", "both"])
def test_empty_files_are_refused_naming_them(tmp_path, capsys, empty):
    ref, hyp = tmp_path / "ref.de", tmp_path / "hyp.de"
    ref.write_text("" if empty in ("ref", "both") else SENTENCES[0] + "\n")
    hyp.write_text("" if empty in ("hyp", "both") else SENTENCES[0] + "\n")
    rc, _, err = bleu(capsys, hyp, ref)
    lines = [x for x in err.splitlines() if "error:" in x]
    assert rc == 2 and len(lines) == 1 and "empty" in lines[0], err
    assert str(hyp if empty in ("hyp", "both") else ref) in lines[0]


def test_empty_bleu_files_are_refused_by_the_confidence_path_too(tmp_path, capsys):
    ref, hyp = tmp_path / "ref.de", tmp_path / "hyp.de"
    ref.write_text("")
    hyp.write_text("")
    rc, _, err = run(capsys, "bleu", str(hyp), str(ref), "--confidence")
    assert rc == 2 and "Traceback" not in err and str(hyp) in err


def test_evalb_reads_a_bom_as_no_part_of_the_tree(tmp_path, capsys):
    tree = "(S (NP (DT The) (NN dog)) (VP (VBZ runs)))\n"
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(tree, encoding="utf-8")
    test.write_text("\ufeff" + tree, encoding="utf-8")
    rc, out, err = run(capsys, "evalb", str(gold), str(test))
    assert rc == 0, err
    assert "100.00" in out
