"""Parallel sentence / linearised-tree files, split by file (Section 6.3)."""

from __future__ import annotations

import json

import pytest

from repro.data.corpora import get_dataset
from repro.errors import DataError
from repro.parsing.linearize import delinearize
from repro.parsing.prepare import (SAMPLE_FOLDER, main, prepare_wsj, register_prepared, sample_groups,
                                   split_files, wsj_groups)
from repro.parsing.trees import read_tree_lines, tags


@pytest.fixture(scope="module")
def prepared(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ptb-sample")
    assert main([str(out), "--data-dir", str(data_dir)]) == 0
    return out


def test_sample_split_is_by_file_and_disjoint(data_dir, prepared):
    manifest = json.loads((prepared / "manifest.json").read_text())["splits"]
    assert {k: v["sentences"] for k, v in manifest.items()} == {"train": 3396, "dev": 273, "test": 245}
    files = {k: set(v["files"]) for k, v in manifest.items()}
    assert not (files["train"] & files["dev"] or files["train"] & files["test"] or files["dev"] & files["test"])
    assert len(files["train"] | files["dev"] | files["test"]) == 199
    assert max(files["train"]) < min(files["dev"]) and max(files["dev"]) < min(files["test"])
    assert {k: len(v) for k, v in sample_groups(data_dir).items()} == {"train": 159, "dev": 20, "test": 20}


def test_sample_files_are_aligned_and_invert(prepared):
    for split in ("dev", "test"):
        src = (prepared / f"{split}.src").read_text().splitlines()
        tgt = (prepared / f"{split}.tgt").read_text().splitlines()
        gold = read_tree_lines(prepared / f"{split}.trees")
        assert len(src) == len(tgt) == len(gold)
        for s, t, g in zip(src, tgt, gold):
            assert s.split() == g.leaves()
            assert delinearize(t, s.split(), tags(g)) == g
            assert "-NONE-" not in str(g) and "-SBJ" not in str(g)


def test_prepared_directory_is_a_dataset(prepared):
    dataset = get_dataset(str(prepared))
    assert dataset.splits["train"] == split_files(prepared)["train"]
    register_prepared(prepared, "ptb-sample-parsing-test")
    assert get_dataset("ptb-sample-parsing-test").split("test")[1].name == "test.tgt"


def test_wsj_sections(tmp_path, data_dir):
    """A stand-in treebank in the LDC layout (parsed/mrg/wsj/SS/wsj_SSNN.mrg) with sample trees."""
    text = (data_dir / SAMPLE_FOLDER / "wsj_0003.mrg").read_text()
    for section in range(0, 25):
        folder = tmp_path / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(text)
    groups = wsj_groups(tmp_path / "wsj")
    assert [p.parent.name for p in groups["train"]] == [f"{s:02d}" for s in range(2, 22)]
    assert [p.parent.name for p in groups["dev"]] == ["22"] and [p.parent.name for p in groups["test"]] == ["23"]
    infos = prepare_wsj(tmp_path / "wsj", tmp_path / "out")
    n = infos["dev"].sentences
    assert infos["train"].sentences == 20 * n and infos["test"].sentences == n
    (tmp_path / "wsj" / "23" / "wsj_2301.mrg").unlink()
    with pytest.raises(DataError, match="section\\(s\\) 23 of split 'test'"):
        wsj_groups(tmp_path / "wsj")


def test_missing_inputs_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="PTB sample not found"):
        sample_groups(tmp_path)
    with pytest.raises(DataError, match="train.src not found"):
        split_files(tmp_path)


def test_cluster_dataset_names_resolve(tmp_path, prepared, capsys):
    """``wsj-parsing`` / ``wsj-parsing-semi`` (repro submit table4-*) resolve in a data directory."""
    data = tmp_path / "data"
    wsj = data / "wsj-parsing"
    wsj.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        for suffix in ("src", "tgt", "trees"):
            (wsj / f"{split}.{suffix}").write_text((prepared / f"{split}.{suffix}").read_text())
    assert get_dataset("wsj-parsing", data).split("test")[0] == wsj / "test.src"
    semi_src, semi_tgt = tmp_path / "semi.src", tmp_path / "semi.tgt"
    semi_src.write_text("a b\nc\n")
    semi_tgt.write_text("(S XX XX )S\n")
    args = [str(data / "wsj-parsing-semi"), "--semi", str(semi_src), str(semi_tgt), "--wsj-prepared", str(wsj)]
    assert main(args) == 2
    assert "has 2 lines but" in capsys.readouterr().err
    semi_tgt.write_text("(S_XX XX )S\n(S_XX )S\n")  # per-word trees, but WSJ was prepared with symbols
    assert main(args) == 2
    assert f"{semi_tgt}:1: a tree in 'per-word' target tokens" in capsys.readouterr().err
    semi_tgt.write_text("(S XX XX )S\n(S XX )S\n")
    assert main(args) == 0
    assert json.loads((data / "wsj-parsing-semi" / "manifest.json").read_text())["targets"] == "symbols"
    dataset = get_dataset("wsj-parsing-semi", data)
    assert dataset.split("train")[0].read_text() == "a b\nc\n"
    assert dataset.split("dev")[1].read_text() == (prepared / "dev.tgt").read_text()
