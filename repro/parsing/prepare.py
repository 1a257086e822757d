"""Parallel source/target files for constituency parsing as sequence transduction (Section 6.3).

For each split, :func:`prepare` writes into an output directory

- ``{split}.src``   one sentence per line (PTB tokens, space separated),
- ``{split}.tgt``   its linearised tree (:func:`repro.parsing.linearize.linearize`),
- ``{split}.trees`` the pre-processed gold tree, one per line, for EVALB and for the POS tags
  that put punctuation back into decoded trees,
- ``manifest.json`` the split, the files each split came from, and the sentence counts.

The directory is a dataset for :func:`repro.data.corpora.get_dataset` by folder inference
(``{split}.src`` / ``{split}.tgt``), and :func:`register_prepared` registers it under a name.

Splits, always by file (whole documents), never by sentence:

- WSJ (:func:`prepare_wsj`, for users who hold the treebank): the standard sections 02-21 train,
  22 dev, 23 test, as in Table 4 (~40K training sentences).
- The NLTK 10% sample of WSJ sections 00-01 in ``ptb-nltk-sample`` (:func:`prepare_ptb_sample`),
  for the local run: ``wsj_0001``-``wsj_0159`` train (3396 trees), ``wsj_0160``-``wsj_0179`` dev
  (273), ``wsj_0180``-``wsj_0199`` test (245). It contains none of the standard sections, so its
  F1 is not comparable with Table 4.

The cluster experiments (``repro submit table4-wsj`` / ``table4-semi``) name the datasets
``wsj-parsing`` and ``wsj-parsing-semi``: folders of that name in the data directory, made by

    python -m repro.parsing.prepare $DATA_DIR/wsj-parsing --wsj TREEBANK_DIR
    python -m repro.parsing.prepare $DATA_DIR/wsj-parsing-semi --semi SRC TGT --wsj-prepared $DATA_DIR/wsj-parsing

(the semi-supervised corpus is the user's: it is not obtainable here). Both names are registered
in :mod:`repro.data.corpora`.
The local sample: ``python -m repro.parsing.prepare OUT_DIR [--data-dir DIR]``. ``--targets per-word``
cuts each target into one token per word (:mod:`repro.parsing.linearize`); the default is
Vinyals & Kaiser et al.'s one token per symbol.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from repro.argtypes import OneLineParser
from repro.files import reader
from repro.data.corpora import Dataset, register, resolve_data_dir
from repro.data.tree_tokens import is_per_word_token
from repro.errors import ConfigError, DataError, ReproError
from repro.parsing.linearize import TARGET_UNITS, group_by_word, linearize, source_sentence
from repro.parsing.trees import preprocess, read_trees, tree_to_line
from repro.files.reader import iter_lines, opened, read_text
from repro.files.writer import atomic_symlink, atomic_write_text, make_dirs

SPLITS = ("train", "dev", "test")
SAMPLE_FOLDER = "ptb-nltk-sample/combined"
#: File-number ranges (inclusive) of wsj_NNNN.mrg in the NLTK sample.
SAMPLE_SPLIT = {"train": (1, 159), "dev": (160, 179), "test": (180, 199)}
#: The standard WSJ sections (Table 4: results on section 23).
WSJ_SPLIT = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}
_WSJ_FILE = re.compile(r"^wsj_([0-9]{2})([0-9]{2})\.mrg$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitInfo:
    name: str
    files: list[str]
    sentences: int
    dropped: int  # trees with nothing left after removing empty elements


def _write_split(out_dir: Path, name: str, files: list[Path], targets: str) -> SplitInfo:
    src, tgt, gold = [], [], []
    dropped = 0
    for path in files:
        for item in read_trees(path):
            tree = preprocess(item.tree)
            if tree is None:
                dropped += 1
                continue
            src.append(source_sentence(tree) + "\n")
            target = linearize(tree)
            tgt.append((group_by_word(target) if targets == "per-word" else target) + "\n")
            gold.append(tree_to_line(tree) + "\n")
    if not src:
        raise DataError(f"split '{name}': no trees in {len(files)} file(s)")
    for suffix, lines in (("src", src), ("tgt", tgt), ("trees", gold)):
        atomic_write_text(out_dir / f"{name}.{suffix}", "".join(lines))
    return SplitInfo(name, [p.name for p in files], len(src), dropped)


def prepare(groups: dict[str, list[Path]], out_dir: str | Path, source: str,
            targets: str = "symbols") -> dict[str, SplitInfo]:
    """Write the three files of every split in ``groups`` and the manifest; returns the split summaries.
    ``targets`` cuts the linearised trees into tokens (:data:`repro.parsing.linearize.TARGET_UNITS`)."""
    if targets not in TARGET_UNITS:
        raise DataError(f"unknown target units {targets!r}; expected one of {', '.join(TARGET_UNITS)}")
    out_dir = Path(out_dir)
    infos = {name: _write_split(out_dir, name, files, targets) for name, files in groups.items()}
    manifest = {
        "source": source,
        "format": "src: words; tgt: linearised tree (Vinyals & Kaiser et al. 2014, POS tags as XX); "
                  "trees: pre-processed gold tree per line",
        "targets": targets,
        "splits": {name: asdict(info) for name, info in infos.items()},
    }
    atomic_write_text(out_dir / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return infos


def prepared_targets(out_dir: str | Path) -> str:
    """The target units a prepared folder holds (its manifest's ``targets``; ``symbols`` for a folder
    without a manifest or from before the field)."""
    path = Path(out_dir) / "manifest.json"
    if not path.exists():
        return "symbols"
    manifest = reader.read_json(path, "prepared folder's manifest", error=DataError)
    targets = manifest.get("targets", "symbols") if isinstance(manifest, dict) else None
    if targets not in TARGET_UNITS:
        raise DataError(f"{path}: field 'targets' must be one of {', '.join(TARGET_UNITS)}, got {targets!r}")
    return targets


def require_targets(prepared: str | Path, targets: str, who: str) -> None:
    """Refuse a prepared folder whose target units are not ``targets`` (what ``who``, a recipe or a
    job, trains on): the vocabulary and the model would silently learn other tokens."""
    held = prepared_targets(prepared)
    if held != targets:
        raise ConfigError(f"{Path(prepared) / 'manifest.json'}: the folder holds '{held}' target tokens, {who} "
                          f"trains on '{targets}' (python -m repro.parsing.prepare --targets)")


def _mrg_files(root: Path) -> dict[tuple[int, int], Path]:
    found = {}
    for path in sorted(root.rglob("*")):
        m = _WSJ_FILE.match(path.name)
        if m and path.is_file():
            found[(int(m[1]), int(m[2]))] = path
    return found


def sample_groups(data_dir: str | Path) -> dict[str, list[Path]]:
    """The by-file split of the NLTK PTB sample (see the module docstring)."""
    root = Path(data_dir) / SAMPLE_FOLDER
    if not root.is_dir():
        raise DataError(f"PTB sample not found: no folder {root} (set --data-dir or REPRO_DATA_DIR)")
    files = _mrg_files(root)
    groups = {}
    for name, (lo, hi) in SAMPLE_SPLIT.items():
        groups[name] = [p for (sec, num), p in sorted(files.items()) if lo <= sec * 100 + num <= hi]
        if not groups[name]:
            raise DataError(f"PTB sample {root}: no wsj_{lo:04d}..wsj_{hi:04d}.mrg files for split '{name}'")
    return groups


def wsj_groups(treebank_dir: str | Path) -> dict[str, list[Path]]:
    """Sections 02-21 / 22 / 23 of a Penn Treebank WSJ directory (any layout holding wsj_SSNN.mrg)."""
    root = Path(treebank_dir)
    if not root.is_dir():
        raise DataError(f"treebank directory {root} not found")
    files = _mrg_files(root)
    groups = {}
    for name, sections in WSJ_SPLIT.items():
        groups[name] = [p for (sec, _), p in sorted(files.items()) if sec in sections]
        missing = sorted(set(sections) - {sec for (sec, _) in files})
        if missing:
            raise DataError(f"treebank {root}: no wsj_SSNN.mrg files for section(s) "
                            f"{', '.join(f'{s:02d}' for s in missing)} of split '{name}'")
    return groups


def _units_of(tree: str) -> str | None:
    """The target units a linearised tree is written in (None for an empty line)."""
    tokens = tree.split()
    if not tokens:
        return None
    return "per-word" if any(is_per_word_token(t) for t in tokens) else "symbols"


def prepare_ptb_sample(data_dir: str | Path, out_dir: str | Path, targets: str = "symbols", *,
                       within: str | Path | None = None) -> dict[str, SplitInfo]:
    """The PTB sample of ``data_dir`` prepared in ``out_dir``; with ``within``, ``out_dir`` is created
    (below that folder) once the sample is found, so a missing sample leaves no folder behind."""
    groups = sample_groups(data_dir)
    if within is not None:
        make_dirs(out_dir, within)
    return prepare(groups, out_dir, f"NLTK PTB sample {Path(data_dir) / SAMPLE_FOLDER}", targets)


def prepare_wsj(treebank_dir: str | Path, out_dir: str | Path, targets: str = "symbols") -> dict[str, SplitInfo]:
    return prepare(wsj_groups(treebank_dir), out_dir, f"Penn Treebank WSJ {treebank_dir}", targets)


def _count_lines(path: Path) -> int:
    """How many lines ``path`` has (a last one without ``\n`` counted), read in chunks: 17M lines."""
    count, last = 0, b"\n"
    with opened(path, "semi-supervised corpus file", error=DataError) as (fh, _):
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            count, last = count + chunk.count(b"\n"), chunk[-1:]
    return count + (last != b"\n")


def prepare_semi(semi_src: str | Path, semi_tgt: str | Path, wsj_prepared: str | Path,
                 out_dir: str | Path) -> dict[str, int]:
    """A ``wsj-parsing-semi`` folder: the user's corpus as train (symlinked), WSJ 22/23 as dev/test (copied).

    The corpus must be parallel sentence / linearised-tree files, one pair per line; only the line
    counts and the target units of the first tree are checked here (17M lines), the training reader
    reports malformed lines. The corpus must be cut into the target units of ``wsj_prepared``
    (``--targets``), whose dev and test splits the folder takes; its manifest records them.
    """
    out_dir = Path(out_dir)
    targets = prepared_targets(wsj_prepared)
    counts = []
    for path in (Path(semi_src), Path(semi_tgt)):
        if not path.is_file():
            raise DataError(f"semi-supervised corpus file {path} not found (it is not shipped; supply your own)")
        counts.append(_count_lines(path))
    if counts[0] != counts[1]:
        raise DataError(f"semi-supervised corpus: {semi_src} has {counts[0]} lines but {semi_tgt} has {counts[1]}")
    held = _units_of(next(iter_lines(semi_tgt, "semi-supervised corpus file", error=DataError), ""))
    if held not in (None, targets):
        raise DataError(f"{semi_tgt}:1: a tree in '{held}' target tokens, but {Path(wsj_prepared) / 'manifest.json'} "
                        f"holds '{targets}' (prepare WSJ with the corpus's --targets)")
    make_dirs(out_dir)
    for path, suffix in ((Path(semi_src), "src"), (Path(semi_tgt), "tgt")):
        atomic_symlink(out_dir / f"train.{suffix}", path.resolve(), within=out_dir)
    for split in ("dev", "test"):
        for suffix in ("src", "tgt", "trees"):
            source = Path(wsj_prepared) / f"{split}.{suffix}"
            if not source.is_file():
                raise DataError(f"{source} not found; prepare WSJ first (--wsj)")
            atomic_write_text(out_dir / f"{split}.{suffix}", read_text(source, "prepared WSJ file", error=DataError))
    manifest = {"source": f"user corpus {semi_src} / {semi_tgt}; dev/test from {wsj_prepared}",
                "targets": targets, "splits": {"train": {"sentences": counts[0]}}}
    atomic_write_text(out_dir / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return {"train": counts[0]}


def split_files(out_dir: str | Path, splits: Iterable[str] = SPLITS) -> dict[str, tuple[Path, Path]]:
    """``{split: (src, tgt)}`` of a prepared directory; a missing file is a :class:`DataError`."""
    out = {}
    for name in splits:
        pair = (Path(out_dir) / f"{name}.src", Path(out_dir) / f"{name}.tgt")
        for path in pair:
            if not path.is_file():
                raise DataError(f"prepared parsing data: {path} not found; run `python -m repro.parsing.prepare`")
        out[name] = pair
    return out


def gold_trees_file(out_dir: str | Path, split: str) -> Path:
    path = Path(out_dir) / f"{split}.trees"
    if not path.is_file():
        raise DataError(f"prepared parsing data: {path} not found; run `python -m repro.parsing.prepare`")
    return path


def register_prepared(out_dir: str | Path, name: str, description: str = "") -> None:
    """Register a prepared directory with :mod:`repro.data.corpora` (absolute paths)."""
    splits = {s: (a.resolve(), b.resolve()) for s, (a, b) in split_files(out_dir).items()}
    register(Dataset(name=name, splits=splits, src_lang="words", tgt_lang="tree", tokenized=True,
                     description=description or f"constituency parsing data prepared in {out_dir}"),
             overwrite=True)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m repro.parsing.prepare", description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--wsj", type=Path, metavar="DIR", help="Penn Treebank WSJ .mrg directory (sections 02-23)")
    parser.add_argument("--data-dir", type=Path, help="shared data directory holding ptb-nltk-sample/")
    parser.add_argument("--semi", nargs=2, type=Path, metavar=("SRC", "TGT"),
                        help="the user's semi-supervised corpus (sentences, linearised trees)")
    parser.add_argument("--wsj-prepared", type=Path, metavar="DIR", help="with --semi: a prepared wsj-parsing folder")
    parser.add_argument("--targets", choices=TARGET_UNITS, default="symbols",
                        help="target tokens: one per tree symbol (Vinyals & Kaiser et al.; default) or one per "
                             "word, each the symbols up to that word's XX joined with '_'")
    args = parser.parse_args(argv)
    try:
        if args.semi:
            if args.wsj_prepared is None:
                parser.error("--semi needs --wsj-prepared (the folder made with --wsj)")
            counts = prepare_semi(args.semi[0], args.semi[1], args.wsj_prepared, args.out_dir)
            print(f"train: {counts['train']} sentences (user corpus); dev/test from {args.wsj_prepared}")
            return 0
        if args.wsj:
            infos = prepare_wsj(args.wsj, args.out_dir, args.targets)
        else:
            infos = prepare_ptb_sample(resolve_data_dir(args.data_dir), args.out_dir, args.targets)
    except ReproError as err:
        print(f"repro: error: {err}", file=sys.stderr)
        return err.exit_code
    for info in infos.values():
        print(f"{info.name}: {info.sentences} sentences from {len(info.files)} files ({info.dropped} dropped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
