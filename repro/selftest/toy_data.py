"""Small data folders the acceptance run trains on, cut from the shared data sets, laid out as the
data registry reads a folder: ``{train,dev,test}.{en,de}``."""

from __future__ import annotations

from pathlib import Path

from repro.data.text_lines import read_lines
from repro.errors import DataError
from repro.files.writer import atomic_write_text, make_dirs

#: Multi30k's files behind each split (train, val, test_2016_flickr).
MULTI30K = {"train": ("multi30k/train.en", "multi30k/train.de"), "dev": ("multi30k/val.en", "multi30k/val.de"),
            "test": ("multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de")}
#: The WMT EN-DE sample's (OpenNMT-py's 10k pairs; newstest-based validation and test).
WMT_SAMPLE = {split: (f"opennmt-wmt-ende-sample/src-{name}.txt", f"opennmt-wmt-ende-sample/tgt-{name}.txt")
              for split, name in (("train", "train"), ("dev", "val"), ("test", "test"))}


def _cut(data_dir: Path, out: Path, files: dict[str, tuple[str, str]], sizes: dict[str, int | None]) -> Path:
    make_dirs(out)
    for split, (src, tgt) in files.items():
        n = sizes.get(split)
        for name, lang in ((src, "en"), (tgt, "de")):
            path = data_dir / name
            if not path.is_file():
                raise DataError(f"{path}: not found (the shared data sets: --data-dir or REPRO_DATA_DIR)")
            lines = read_lines(path)
            atomic_write_text(out / f"{split}.{lang}", "\n".join(lines[:n]) + "\n", within=out)
    return out


def toy_translation_data(data_dir: Path, out: Path, sizes: dict[str, int]) -> Path:
    """The first ``sizes[split]`` pairs of Multi30k's train, val and test_2016_flickr."""
    return _cut(data_dir, out, {k: v for k, v in MULTI30K.items() if k in sizes}, sizes)


def wmt_sample_data(data_dir: Path, out: Path, sizes: dict[str, int]) -> Path:
    """The WMT EN-DE sample: all its training pairs, the first ``sizes[split]`` of dev and test."""
    return _cut(data_dir, out, WMT_SAMPLE, sizes)
