"""repro data fetch: checksum verification, atomic outputs, offline errors (with local file:// archives)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from repro.data.fetch import download, fetch
from repro.data.downloads import RECIPES, Archive, Member, Output, Recipe
from repro.errors import DataError


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _archive(path: Path, *, sha256: str | None = None) -> Archive:
    digest = sha256 or hashlib.sha256(path.read_bytes()).hexdigest()
    return Archive(path.as_uri(), sha256=digest, size=path.stat().st_size)


def _recipe(tmp_path: Path, *, train_de: bytes = b"eins\n\nzwei\n", sha256: str | None = None) -> Recipe:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    train = _archive(_tar(src / "train.tgz", {
        "training/c.de-en.en": b"one\ntwo\n\n", "training/c.de-en.de": train_de,
        "g.en.gz": gzip.compress(b"three\n"), "g.de.gz": gzip.compress(b"drei\n"),
    }), sha256=sha256)
    test = _archive(_tar(src / "test.tgz", {
        "t/src.en.sgm": b'<srcset>\n<doc>\n<seg id="1"> Hello </seg>\n<seg id="2">A &amp; B</seg>\n</doc>\n',
        "t/ref.de.sgm": b'<refset>\n<doc>\n<seg id="1">Hallo</seg>\n<seg id="2">A &amp; B</seg>\n</doc>\n',
    }))
    return Recipe("toy", {
        "train": Output("toy/train.en", "toy/train.de", (
            (Member(train, "training/c.de-en.en"), Member(train, "training/c.de-en.de")),
            (Member(train, "g.en.gz", "gz"), Member(train, "g.de.gz", "gz")),
        )),
        "test": Output("toy/test.en", "toy/test.de",
                       ((Member(test, "t/src.en.sgm", "sgm"), Member(test, "t/ref.de.sgm", "sgm")),), drop_empty=False),
    })


def test_fetch_builds_splits_and_drops_empty_pairs(tmp_path):
    data = tmp_path / "data"
    report = fetch("toy", data, recipes={"toy": _recipe(tmp_path)}, log=lambda _: None)
    assert (data / "toy/train.en").read_text() == "one\nthree\n"
    assert (data / "toy/train.de").read_text() == "eins\ndrei\n"
    assert (data / "toy/test.en").read_text() == "Hello\nA &amp; B\n"  # SGM text kept as WMT released it
    assert report["train"] == {"pairs": 2, "dropped_empty": 2}
    manifest = json.loads((data / "toy/FETCHED.json").read_text())
    assert manifest["train"]["dropped_empty"] == 2
    assert not list(data.rglob("*.tmp")) and not list(data.rglob("*.part"))
    # Present splits are not fetched again.
    assert fetch("toy", data, recipes={"toy": _recipe(tmp_path)}, log=lambda _: None) == {}


def test_bad_checksum_is_refused_and_nothing_written(tmp_path):
    data = tmp_path / "data"
    with pytest.raises(DataError, match="sha256 .* does not match"):
        fetch("toy", data, recipes={"toy": _recipe(tmp_path, sha256="0" * 64)}, log=lambda _: None)
    assert not (data / "toy/train.en").exists()
    assert not list((data / ".downloads").glob("*"))   # the folder made for the download goes with it


def test_misaligned_members_leave_no_half_written_file(tmp_path):
    data = tmp_path / "data"
    with pytest.raises(DataError, match="different numbers of lines"):
        fetch("toy", data, recipes={"toy": _recipe(tmp_path, train_de=b"eins\nzwei\n")}, log=lambda _: None)
    assert not (data / "toy/train.en").exists() and not (data / "toy/train.de").exists()
    assert not list((data / "toy").glob(".*.tmp"))


def test_offline_download_says_where_to_put_the_file(tmp_path):
    archive = Archive("http://127.0.0.1:9/training-parallel-nc-v9.tgz", sha256="0" * 64)
    with pytest.raises(DataError, match=r"cannot download .*place it at .*training-parallel-nc-v9\.tgz"):
        download(archive, tmp_path, log=lambda _: None)


def test_hand_placed_archive_is_verified(tmp_path):
    path = _tar(tmp_path / "x.tgz", {"a": b"a\n"})
    ok = Archive("http://127.0.0.1:9/x.tgz", sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    assert download(ok, tmp_path, log=lambda _: None) == path  # no network needed
    with pytest.raises(DataError, match="does not match"):
        download(Archive("http://127.0.0.1:9/x.tgz", md5="0" * 32), tmp_path, log=lambda _: None)


def test_official_recipes_have_statmt_urls_and_checksums():
    de, fr = RECIPES["wmt14-en-de"], RECIPES["wmt14-en-fr"]
    names = {a.filename for a in de.archives}
    assert {"training-parallel-europarl-v7.tgz", "training-parallel-commoncrawl.tgz",
            "training-parallel-nc-v9.tgz", "dev.tgz", "test-full.tgz"} == names
    assert {"training-parallel-un.tgz", "training-giga-fren.tar"} <= {a.filename for a in fr.archives}
    for archive in de.archives + fr.archives:
        assert "statmt.org" in archive.url
        assert archive.sha256 or archive.md5
        assert archive.sha256 is None or len(archive.sha256) == 64
    assert de.outputs["test"].tgt_file == "wmt14-newstest2014/newstest2014.en-de.de"  # same layout as shared/data
