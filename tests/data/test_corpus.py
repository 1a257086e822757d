"""read_parallel: malformed files give errors naming file and line; over-long pairs are counted."""

from __future__ import annotations

import pytest

from repro.data.corpus import read_parallel
from repro.errors import DataError


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_reads_real_multi30k(data_dir):
    c = read_parallel(data_dir / "multi30k/val.en", data_dir / "multi30k/val.de")
    assert len(c) == 1014 and c.filtered == 0
    assert c.pairs[0][0].startswith("A group of men")


def test_unequal_length_names_file_and_line(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "two", "three"])
    tgt = _write(tmp_path / "a.de", ["eins", "zwei"])
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    msg = str(err.value)
    assert f"{src}:3" in msg and "has 2 lines" in msg and "has 3" in msg
    short = _write(tmp_path / "b.en", ["one", "two"])
    tgt = _write(tgt, ["eins", "zwei", "drei"])
    with pytest.raises(DataError, match=rf"{tgt}:3: line has no partner: {short} has 2 lines but {tgt} has 3"):
        read_parallel(short, tgt)


def test_empty_line_names_file_and_line(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "two", "three", "four"])
    tgt = _write(tmp_path / "a.de", ["eins", "   ", "drei", ""])
    with pytest.raises(DataError, match=rf"{tgt}:2: empty line \(1 more empty lines after it\)"):
        read_parallel(src, tgt)


def test_missing_and_non_utf8_files(tmp_path):
    src = _write(tmp_path / "a.en", ["one", "two"])
    with pytest.raises(DataError, match="not found"):
        read_parallel(src, tmp_path / "missing.de")
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"eins\nzw\xffei\n")
    with pytest.raises(DataError, match=rf"{bad}:2: not valid UTF-8"):
        read_parallel(src, bad)


def test_over_long_pairs_are_filtered_and_counted(tmp_path):
    src = _write(tmp_path / "a.en", ["a b", "a b c d e", "a", "x y z"])
    tgt = _write(tmp_path / "a.de", ["a b", "a", "a b c d e f", "x y z"])
    c = read_parallel(src, tgt, max_len=3)
    assert c.pairs == [("a b", "a b"), ("x y z", "x y z")]
    assert c.filtered == 2 and c.filtered_lines == [2, 3]
    assert len(c.pairs) + c.filtered == 4  # nothing lost without a count
    c = read_parallel(src, tgt, max_len=3, length=len)  # a custom length (characters)
    assert c.filtered_lines == [2, 3, 4]


def test_crlf_is_not_part_of_the_text(tmp_path):
    (tmp_path / "a.en").write_bytes(b"one\r\ntwo\r\n")
    (tmp_path / "a.de").write_bytes(b"eins\nzwei\n")
    assert read_parallel(tmp_path / "a.en", tmp_path / "a.de").pairs == [("one", "eins"), ("two", "zwei")]
