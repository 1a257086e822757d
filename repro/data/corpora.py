"""Named parallel corpora and where their splits live in a data directory (Section 5.1).

A data directory is laid out like ``../shared/data``: one folder per corpus, e.g.
``multi30k/train.en``, ``wmt14-newstest2014/newstest2014.en-de.de``. ``repro data fetch NAME``
writes the WMT 2014 training sets into the same layout (``wmt14-en-de/train.{en,de}``), so a
registered dataset resolves to the same paths whether its files were fetched or supplied.

Any other folder of parallel files (``{split}.{lang}`` or OpenNMT's ``src-{split}.txt`` /
``tgt-{split}.txt``) is a dataset too: ``get_dataset("my-folder", data_dir)`` infers its splits.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from repro.errors import DataError, MissingSplit
from repro.files.reader import inspect

ENV_DATA_DIR = "REPRO_DATA_DIR"
#: Section 6.3's parsing corpora, folders made by ``python -m repro.parsing.prepare``.
WSJ_PARSING = "wsj-parsing"
SEMI_PARSING = "wsj-parsing-semi"


def default_data_dir() -> Path:
    """``$REPRO_DATA_DIR`` if set, else ``../shared/data`` beside the repository root."""
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory a command should use: ``--data-dir``, else the environment, else the default."""
    return Path(data_dir) if data_dir is not None else default_data_dir()


@dataclass(frozen=True)
class Dataset:
    """A parallel corpus: split name -> (source file, target file).

    ``tokenized`` is True when the text is already Moses-tokenized (with Moses's XML escapes such
    as ``&apos;``) rather than raw; such text must be unescaped and detokenized before sacreBLEU.
    """

    name: str
    splits: dict[str, tuple[Path, Path]]
    src_lang: str
    tgt_lang: str
    tokenized: bool = False
    description: str = ""
    fetchable: bool = False  # ``repro data fetch NAME`` knows how to download the missing splits

    def split(self, name: str) -> tuple[Path, Path]:
        """The (src, tgt) paths of one split; a clear DataError if it is unknown or not on disk."""
        if name not in self.splits:
            raise MissingSplit(f"dataset '{self.name}' has no split '{name}' (it has: {', '.join(self.splits)})")
        src, tgt = self.splits[name]
        for path in (src, tgt):
            if not os.path.lexists(path):
                hint = f"; run `repro data fetch {self.name}`" if self.fetchable else ""
                raise MissingSplit(f"dataset '{self.name}' split '{name}': file {path} not found{hint}")
            inspect(path, f"file of split '{name}' of dataset '{self.name}'", error=DataError)   # a device, a folder
        return src, tgt

    def available_splits(self) -> list[str]:
        """The splits whose files are there (a file that is not a regular one counts: reading it names it)."""
        return [s for s, (a, b) in self.splits.items() if os.path.lexists(a) and os.path.lexists(b)]


@dataclass(frozen=True)
class _Layout:
    """A registered dataset before it is bound to a data directory: paths are relative."""

    name: str
    splits: dict[str, tuple[str, str]]
    src_lang: str
    tgt_lang: str
    tokenized: bool = False
    description: str = ""
    fetchable: bool = False

    def bind(self, data_dir: Path) -> Dataset:
        return Dataset(
            name=self.name,
            splits={s: (data_dir / a, data_dir / b) for s, (a, b) in self.splits.items()},
            src_lang=self.src_lang, tgt_lang=self.tgt_lang, tokenized=self.tokenized,
            description=self.description, fetchable=self.fetchable,
        )


_REGISTRY: dict[str, _Layout | Dataset] = {}


def register(dataset: Dataset | _Layout, *, overwrite: bool = False) -> None:
    """Add a dataset (other areas register theirs, e.g. parsing). A Dataset keeps its absolute paths."""
    if dataset.name in _REGISTRY and not overwrite:
        raise ValueError(f"dataset '{dataset.name}' is already registered")
    _REGISTRY[dataset.name] = dataset


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def get_dataset(name: str, data_dir: str | os.PathLike[str] | None = None, *, src_lang: str | None = None) -> Dataset:
    """Resolve ``name`` in ``data_dir``: a registered dataset, else a folder ``data_dir/name`` (or a path)."""
    root = resolve_data_dir(data_dir)
    entry = _REGISTRY.get(name)
    if isinstance(entry, _Layout):
        return entry.bind(root)
    if isinstance(entry, Dataset):
        return entry
    folder = Path(name) if Path(name).is_dir() else root / name
    if folder.is_dir():
        return infer_dataset(folder, src_lang=src_lang)
    raise DataError(
        f"unknown dataset '{name}': not registered ({', '.join(registered_names())}) "
        f"and no folder {folder} in data directory {root}"
    )


_LANG_FILE = re.compile(r"^(?P<split>.+)\.(?P<lang>[a-z]{2,3})$")
_ONMT_FILE = re.compile(r"^(?P<side>src|tgt)-(?P<split>.+)\.txt$")
_NOT_LANGS = {"md", "txt", "gz", "tgz", "bz2", "xz", "zip", "sgm", "xml", "json", "csv", "tsv", "py", "sh", "log",
              "tok", "bpe", "mrg", "gld", "tst", "rsl", "prm"}
_SPLIT_ALIASES = {"val": "dev", "valid": "dev", "validation": "dev", "dev": "dev", "test": "test", "train": "train"}


def infer_dataset(folder: Path, *, src_lang: str | None = None) -> Dataset:
    """A dataset from a folder of line-aligned files: ``{split}.{lang}`` or ``src-{split}.txt``/``tgt-{split}.txt``.

    ``val``/``valid`` become ``dev``; other split names are kept. With two languages and no
    ``src_lang``, English is the source (the paper translates from English).
    """
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    onmt: dict[str, dict[str, Path]] = {}
    by_split: dict[str, dict[str, Path]] = {}
    for fname in files:
        if m := _ONMT_FILE.match(fname):
            onmt.setdefault(m["split"], {})[m["side"]] = folder / fname
        elif (m := _LANG_FILE.match(fname)) and m["lang"] not in _NOT_LANGS:
            by_split.setdefault(m["split"], {})[m["lang"]] = folder / fname
    splits: dict[str, tuple[Path, Path]] = {}
    if onmt:
        for split, sides in onmt.items():
            if set(sides) == {"src", "tgt"}:
                splits[_SPLIT_ALIASES.get(split, split)] = (sides["src"], sides["tgt"])
        langs = (src_lang or "src", "tgt")
    else:
        langs_seen = sorted({lang for sides in by_split.values() if len(sides) > 1 for lang in sides})
        if len(langs_seen) != 2:
            raise DataError(
                f"{folder}: cannot infer a language pair from file names (languages found: {langs_seen or 'none'}); "
                "expected files like train.en / train.de or src-train.txt / tgt-train.txt"
            )
        src = src_lang or ("en" if "en" in langs_seen else langs_seen[0])
        if src not in langs_seen:
            raise DataError(f"{folder}: source language '{src}' not among {langs_seen}")
        tgt = next(lang for lang in langs_seen if lang != src)
        for split, sides in by_split.items():
            if src in sides and tgt in sides:
                splits[_SPLIT_ALIASES.get(split, split)] = (sides[src], sides[tgt])
        langs = (src, tgt)
    if not splits:
        raise DataError(f"{folder}: no parallel file pairs found")
    return Dataset(name=folder.name, splits=splits, src_lang=langs[0], tgt_lang=langs[1],
                   description=f"parallel files in {folder}")


def with_splits(dataset: Dataset, **paths: tuple[Path, Path]) -> Dataset:
    """A copy of ``dataset`` with some splits replaced (explicit --train-src/--train-tgt style overrides)."""
    return replace(dataset, splits={**dataset.splits, **paths})


def _builtin() -> list[_Layout]:
    nt13, nt14 = "wmt14-newstest2013/newstest2013", "wmt14-newstest2014/newstest2014"
    m30k = {s: (f"multi30k/{f}.en", f"multi30k/{f}.de") for s, f in {
        "train": "train", "dev": "val", "test": "test_2016_flickr", "test_2017_flickr": "test_2017_flickr",
        "test_2017_mscoco": "test_2017_mscoco", "test_2018_flickr": "test_2018_flickr"}.items()}
    onmt = {s: (f"opennmt-wmt-ende-sample/src-{f}.txt", f"opennmt-wmt-ende-sample/tgt-{f}.txt")
            for s, f in {"train": "train", "dev": "val", "test": "test"}.items()}
    wsj = {s: (f"{WSJ_PARSING}/{s}.src", f"{WSJ_PARSING}/{s}.tgt") for s in ("train", "dev", "test")}
    semi = {**wsj, "train": (f"{SEMI_PARSING}/train.src", f"{SEMI_PARSING}/train.tgt")}
    return [
        _Layout("wmt14-en-de", {
            "train": ("wmt14-en-de/train.en", "wmt14-en-de/train.de"),
            "dev": (f"{nt13}.en-de.en", f"{nt13}.en-de.de"),
            "test": (f"{nt14}.en-de.en", f"{nt14}.en-de.de"),
        }, "en", "de", description="WMT 2014 English-German (Section 5.1): Europarl v7 + CommonCrawl + "
           "News Commentary v9 (~4.5M pairs); dev newstest2013 (Table 3), test newstest2014 full, 3003 (Table 2)",
           fetchable=True),
        _Layout("wmt14-en-fr", {
            "train": ("wmt14-en-fr/train.en", "wmt14-en-fr/train.fr"),
            "dev": (f"{nt13}.en-fr.en", f"{nt13}.en-fr.fr"),
            "test": (f"{nt14}.en-fr.en", f"{nt14}.en-fr.fr"),
        }, "en", "fr", description="WMT 2014 English-French (Section 5.1): Europarl, CommonCrawl, UN, "
           "News Commentary v9, giga-fren (~36M pairs); dev newstest2013, test newstest2014 full (3003)",
           fetchable=True),
        _Layout("multi30k-en-de", m30k, "en", "de",
                description="Multi30k task 1 EN-DE, raw text (29000 train pairs); test = test_2016_flickr"),
        _Layout("opennmt-wmt-ende-sample", onmt, "en", "de", tokenized=True,
                description="10000 WMT EN-DE training pairs, newstest2012 dev, 2737 filtered newstest2014 test; "
                "Moses-tokenized with Moses XML escapes (&apos; &quot; &amp;), applied inconsistently"),
        _Layout(WSJ_PARSING, wsj, "words", "tree", tokenized=True,
                description="Penn Treebank WSJ 02-21/22/23 as sentence -> linearised tree (Section 6.3); "
                            "prepared from the user's treebank with `python -m repro.parsing.prepare`"),
        _Layout(SEMI_PARSING, semi, "words", "tree", tokenized=True,
                description="semi-supervised parsing corpus (~17M sentences; user-supplied, not obtainable "
                            "here) with WSJ 22/23 as dev/test (Section 6.3)"),
    ]


for _layout in _builtin():
    register(_layout)
