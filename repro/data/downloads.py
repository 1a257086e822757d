"""Download recipes for the paper's WMT 2014 data (Section 5.1), from the official statmt.org sources.

Section 5.1: "We trained on the standard WMT 2014 English-German dataset consisting of about
4.5 million sentence pairs ... For English-French, we used the significantly larger WMT 2014
English-French dataset consisting of 36M sentences". Table 3 is measured on newstest2013,
Table 2 on newstest2014.

Checksums. ``sha256`` values and sizes are the ones TensorFlow Datasets pins for the same URLs
(tensorflow/datasets, ``tensorflow_datasets/url_checksums/wmt14_translate.txt`` and
``wmt15_translate.txt``; the europarl and commoncrawl values agree with an independent copy in
stagedml/stagedml). ``md5`` values for the test tarball are sacreBLEU's (``sacrebleu.dataset``,
``wmt14/full``). A download with no published checksum would be refused: every archive below has one.

The training corpora are the ones tensor2tensor and fairseq's prepare-wmt14en2de.sh /
prepare-wmt14en2fr.sh concatenate: EN-DE = Europarl v7 + CommonCrawl + News Commentary v9;
EN-FR adds the UN corpus and the 10^9 French-English (giga-fren) corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Archive:
    """One file to download, with the checksums that identify it."""

    url: str
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Member:
    """A text inside an archive. ``fmt``: ``text``, ``gz`` (gzip inside the tar) or ``sgm`` (WMT's <seg> files)."""

    archive: Archive
    path: str
    fmt: str = "text"


@dataclass(frozen=True)
class Output:
    """One parallel file pair to produce: the concatenation of ``parts`` (each a (src, tgt) member pair)."""

    src_file: str  # relative to the data directory
    tgt_file: str
    parts: tuple[tuple[Member, Member], ...]
    drop_empty: bool = True  # training corpora hold empty lines; drop such pairs (and count them)


@dataclass(frozen=True)
class Recipe:
    name: str
    outputs: dict[str, Output] = field(default_factory=dict)  # split -> output

    @property
    def archives(self) -> list[Archive]:
        seen: dict[str, Archive] = {}
        for out in self.outputs.values():
            for src, tgt in out.parts:
                seen.setdefault(src.archive.url, src.archive)
                seen.setdefault(tgt.archive.url, tgt.archive)
        return list(seen.values())


EUROPARL_V7 = Archive(
    "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7", size=657632379)
COMMONCRAWL = Archive(
    "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5", size=918311367)
NEWS_COMMENTARY_V9 = Archive(
    "http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485", size=80418416)
UN = Archive(
    "http://www.statmt.org/wmt13/training-parallel-un.tgz",
    sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47", size=2365634246)
GIGA_FREN = Archive(
    "http://www.statmt.org/wmt10/training-giga-fren.tar",
    sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a", size=2595102720)
# newstest2013 (plain text) lives in the WMT dev tarball; TFDS pins the wmt19 copy, which holds it unchanged.
DEV = Archive(
    "http://data.statmt.org/wmt19/translation-task/dev.tgz",
    sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7", size=38654961)
# newstest2014 "full" (3003 sentences), the version tensor2tensor evaluated on; sacreBLEU's "wmt14/full".
TEST_FULL = Archive("http://statmt.org/wmt14/test-full.tgz", md5="a8cd784e006feb32ac6f3d9ec7eb389a")


def _pair(archive: Archive, prefix: str, src: str, tgt: str, fmt: str = "text") -> tuple[Member, Member]:
    return Member(archive, f"{prefix}.{src}", fmt), Member(archive, f"{prefix}.{tgt}", fmt)


def _newstest2014(pair: str, tgt: str) -> tuple[Member, Member]:
    base = f"test-full/newstest2014-{pair}"
    return Member(TEST_FULL, f"{base}-src.en.sgm", "sgm"), Member(TEST_FULL, f"{base}-ref.{tgt}.sgm", "sgm")


WMT14_EN_DE = Recipe("wmt14-en-de", {
    "train": Output("wmt14-en-de/train.en", "wmt14-en-de/train.de", (
        _pair(EUROPARL_V7, "training/europarl-v7.de-en", "en", "de"),
        _pair(COMMONCRAWL, "commoncrawl.de-en", "en", "de"),
        _pair(NEWS_COMMENTARY_V9, "training/news-commentary-v9.de-en", "en", "de"),
    )),
    "dev": Output("wmt14-newstest2013/newstest2013.en-de.en", "wmt14-newstest2013/newstest2013.en-de.de",
                  (_pair(DEV, "dev/newstest2013", "en", "de"),), drop_empty=False),
    "test": Output("wmt14-newstest2014/newstest2014.en-de.en", "wmt14-newstest2014/newstest2014.en-de.de",
                   (_newstest2014("deen", "de"),), drop_empty=False),
})

WMT14_EN_FR = Recipe("wmt14-en-fr", {
    "train": Output("wmt14-en-fr/train.en", "wmt14-en-fr/train.fr", (
        _pair(EUROPARL_V7, "training/europarl-v7.fr-en", "en", "fr"),
        _pair(COMMONCRAWL, "commoncrawl.fr-en", "en", "fr"),
        _pair(UN, "un/undoc.2000.fr-en", "en", "fr"),
        _pair(NEWS_COMMENTARY_V9, "training/news-commentary-v9.fr-en", "en", "fr"),
        _pair(GIGA_FREN, "giga-fren.release2.fixed", "en.gz", "fr.gz", "gz"),
    )),
    "dev": Output("wmt14-newstest2013/newstest2013.en-fr.en", "wmt14-newstest2013/newstest2013.en-fr.fr",
                  (_pair(DEV, "dev/newstest2013", "en", "fr"),), drop_empty=False),
    "test": Output("wmt14-newstest2014/newstest2014.en-fr.en", "wmt14-newstest2014/newstest2014.en-fr.fr",
                   (_newstest2014("fren", "fr"),), drop_empty=False),
})

RECIPES: dict[str, Recipe] = {r.name: r for r in (WMT14_EN_DE, WMT14_EN_FR)}
