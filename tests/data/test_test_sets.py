"""The identity of a scored file, and the paper's test sets by content (issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.data.test_sets import PAPER_TEST_SETS, identity, paper_test_set


def test_the_content_hash_is_the_sentences_whatever_their_order_or_line_endings(tmp_path: Path) -> None:
    a, b, c, d = (tmp_path / n for n in "abcd")
    a.write_text("Ein Hund .\nZwei Katzen .\n", encoding="utf-8")
    b.write_text("Zwei Katzen .  \r\nEin Hund .\r\n", encoding="utf-8")
    c.write_text("Ein Hund .\nZwei Katzen !\n", encoding="utf-8")
    d.write_text("Ein Hund .\n", encoding="utf-8")
    ia, ib, ic, id_ = identity(a), identity(b), identity(c), identity(d)
    assert ia["content_sha256"] == ib["content_sha256"] and ia["sha256"] != ib["sha256"]
    assert ic["content_sha256"] != ia["content_sha256"] and (ia["lines"], id_["lines"]) == (2, 1)


@pytest.mark.parametrize("key, files", [
    (("wmt14-en-de", "test"), ("wmt14-newstest2014/newstest2014.en-de.en", "wmt14-newstest2014/newstest2014.en-de.de")),
    (("wmt14-en-fr", "test"), ("wmt14-newstest2014/newstest2014.en-fr.en", "wmt14-newstest2014/newstest2014.en-fr.fr")),
    (("wmt14-en-de", "dev"), ("wmt14-newstest2013/newstest2013.en-de.en", "wmt14-newstest2013/newstest2013.en-de.de")),
])
def test_the_paper_s_test_sets_are_the_shared_copies(data_dir: Path, key, files) -> None:
    scored = {"source": identity(data_dir / files[0]), "reference": identity(data_dir / files[1])}
    assert PAPER_TEST_SETS[key].differences(scored) == []
    other = {**scored, "reference": identity(data_dir / "multi30k" / "test_2016_flickr.de")}
    assert any("1000 lines" in why for why in PAPER_TEST_SETS[key].differences(other))


def test_the_filtered_newstest2014_is_not_the_full_one(data_dir: Path) -> None:
    """The 2737-sentence filtered release (sacreBLEU's wmt14 default) is not Table 2's test set."""
    sample = data_dir / "opennmt-wmt-ende-sample"
    scored = {"source": identity(sample / "src-test.txt"), "reference": identity(sample / "tgt-test.txt")}
    assert paper_test_set("wmt14-en-de", "test").differences(scored)
    assert paper_test_set("multi30k-en-de", "test") is None
