"""The corpora registry (repro.data.corpora) resolves the shared data directory; folder inference; register()."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.data.corpora import Dataset, get_dataset, infer_dataset, register, registered_names
from repro.errors import DataError


def test_builtin_names_registered():
    assert {"wmt14-en-de", "wmt14-en-fr", "multi30k-en-de", "opennmt-wmt-ende-sample"} <= set(registered_names())


def test_multi30k_splits_in_shared_data(data_dir):
    ds = get_dataset("multi30k-en-de", data_dir)
    assert (ds.src_lang, ds.tgt_lang, ds.tokenized) == ("en", "de", False)
    assert ds.split("train") == (data_dir / "multi30k/train.en", data_dir / "multi30k/train.de")
    assert ds.split("dev")[0].name == "val.en"
    assert ds.split("test")[1].name == "test_2016_flickr.de"
    assert {"test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"} <= set(ds.available_splits())


def test_wmt14_dev_and_test_are_newstest2013_and_2014(data_dir):
    ds = get_dataset("wmt14-en-de", data_dir)
    assert ds.split("dev")[1] == data_dir / "wmt14-newstest2013/newstest2013.en-de.de"
    assert ds.split("test")[0] == data_dir / "wmt14-newstest2014/newstest2014.en-de.en"
    fr = get_dataset("wmt14-en-fr", data_dir)
    assert fr.split("test")[1].name == "newstest2014.en-fr.fr"


def test_missing_training_data_says_how_to_fetch(data_dir):
    ds = get_dataset("wmt14-en-de", data_dir)
    assert "train" not in ds.available_splits()  # the full WMT corpora are not in shared/data
    with pytest.raises(DataError, match=r"train\.en not found; run `repro data fetch wmt14-en-de`"):
        ds.split("train")


def test_opennmt_sample_is_marked_tokenized(data_dir):
    ds = get_dataset("opennmt-wmt-ende-sample", data_dir)
    assert ds.tokenized and "&apos;" in ds.description
    assert ds.split("dev")[0].name == "src-val.txt"


def test_env_variable_sets_default_data_dir(data_dir, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(data_dir))
    assert get_dataset("multi30k-en-de").split("train")[0] == data_dir / "multi30k/train.en"


def test_folder_inference_by_name_and_path(data_dir):
    ds = get_dataset("multi30k", data_dir)  # a folder, not a registered name
    assert (ds.src_lang, ds.tgt_lang) == ("en", "de")
    assert ds.splits["dev"][0].name == "val.en" and "test_2016_flickr" in ds.splits
    onmt = get_dataset(str(data_dir / "opennmt-wmt-ende-sample"))
    assert onmt.splits["dev"] == (data_dir / "opennmt-wmt-ende-sample/src-val.txt",
                                  data_dir / "opennmt-wmt-ende-sample/tgt-val.txt")
    assert get_dataset("multi30k", data_dir, src_lang="de").src_lang == "de"


def test_folder_with_three_languages_is_refused(tmp_path: Path):
    for lang in ("en", "de", "fr"):
        (tmp_path / f"train.{lang}").write_text("x\n")
    with pytest.raises(DataError, match="cannot infer a language pair"):
        infer_dataset(tmp_path)


def test_unknown_name_lists_known(tmp_path):
    with pytest.raises(DataError, match="unknown dataset 'nope'.*multi30k-en-de"):
        get_dataset("nope", tmp_path)


def test_register_other_areas_dataset(tmp_path):
    ds = Dataset("test-only-ptb", {"train": (tmp_path / "a", tmp_path / "b")}, "words", "trees")
    register(ds, overwrite=True)
    assert get_dataset("test-only-ptb", tmp_path) is ds
    with pytest.raises(ValueError):
        register(ds)
