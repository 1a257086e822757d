"""EVALB's own sample scored by our port must reproduce today's evalb.c output (Table 4's metric)."""

from __future__ import annotations

import json
import re

import pytest

from repro.cli import main
from repro.eval.evalb import evalb_files
from repro.eval.evalb_report import format_report
from repro.eval.evalb_params import COLLINS, SAMPLE, to_prm_text

FIELDS = {
    "Number of sentence": "sentences", "Number of Error sentence": "error_sentences",
    "Number of Skip  sentence": "skipped_sentences", "Number of Valid sentence": "valid_sentences",
    "Bracketing Recall": "recall", "Bracketing Precision": "precision", "Bracketing FMeasure": "f1",
    "Complete match": "complete_match", "Average crossing": "average_crossing", "No crossing": "no_crossing",
    "2 or less crossing": "two_or_less_crossing", "Tagging accuracy": "tagging_accuracy",
}


def summary_blocks(text: str) -> dict[str, dict[str, float]]:
    """The ``-- All --`` and ``-- len<=N --`` blocks of an EVALB report, as numbers."""
    blocks: dict[str, dict[str, float]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"^-- (.+) --$", line):
            current = blocks.setdefault(m[1], {})
        elif current is not None and "=" in line:
            key, value = (s.strip() for s in line.split("="))
            current[FIELDS[key]] = float(value)
    return blocks


@pytest.fixture(scope="module")
def sample(data_dir):
    return data_dir / "evalb-sample"


@pytest.mark.parametrize("params, reference, f1", [(COLLINS, "sample.collins.rsl", 88.65),
                                                   (SAMPLE, "sample.rsl.current_evalb", 89.12)])
def test_sample_summary_matches_evalb(sample, params, reference, f1):
    expected = summary_blocks((sample / reference).read_text())
    assert expected["All"]["f1"] == f1  # the reference file is the one we think it is
    result = evalb_files(sample / "sample.gld", sample / "sample.tst", params)
    for title, summary in (("All", result.all.to_dict()), ("len<=40", result.cutoff.to_dict())):
        for key, value in expected[title].items():
            assert round(summary[key], 2) == value, (title, key)


@pytest.mark.parametrize("params, reference", [(COLLINS, "sample.collins.rsl"),
                                               (SAMPLE, "sample.rsl.current_evalb")])
def test_sample_report_and_messages_are_evalbs_byte_for_byte(sample, params, reference):
    result = evalb_files(sample / "sample.gld", sample / "sample.tst", params)
    assert format_report(result) == (sample / reference).read_text()
    assert result.messages == (sample / f"{reference}.stderr").read_text().splitlines()


def test_wrong_settings_do_not_reproduce_the_sample(sample):
    """Teeth: not deleting '.' (sample.prm) or unlabelled scoring give other numbers than COLLINS.prm."""
    expected = summary_blocks((sample / "sample.collins.rsl").read_text())["All"]
    for wrong in (SAMPLE, COLLINS.replace(labeled=False), COLLINS.replace(eq_words=(("This", "this"),))):
        got = evalb_files(sample / "sample.gld", sample / "sample.tst", wrong).all.to_dict()
        assert any(round(got[k], 2) != v for k, v in expected.items())


def test_cli_json_default_is_collins(sample, capsys):
    # EVALB's sample leaves 8 sentences out of the scores on purpose: exit 2 unless accepted
    assert main(["evalb", str(sample / "sample.gld"), str(sample / "sample.tst"), "--json"]) == 2
    refused = json.loads(capsys.readouterr().out)
    assert main(["evalb", str(sample / "sample.gld"), str(sample / "sample.tst"), "--json", "--allow-mismatch"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == refused
    assert round(out["f1"], 2) == 88.65 and round(out["recall"], 2) == 87.23
    assert round(out["precision"], 2) == 90.11 and round(out["complete_match"], 2) == 50.00
    assert round(out["tagging_accuracy"], 2) == 97.12
    assert (out["valid_sentences"], out["error_sentences"], out["skipped_sentences"]) == (16, 6, 2)


def test_cli_with_sample_prm_file(sample, tmp_path, capsys):
    prm = tmp_path / "sample.prm"
    prm.write_text("# EVALB sample.prm equivalent\n" + to_prm_text(SAMPLE))
    assert main(["evalb", str(sample / "sample.gld"), str(sample / "sample.tst"), "-p", str(prm),
                 "--allow-mismatch"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (sample / "sample.rsl.current_evalb").read_text()
    assert "20 : Words unmatch (this|That)" in captured.err
