"""``repro data fetch NAME``: download a recipe's archives, verify them, build its parallel files.

Archives are cached in ``DATA_DIR/.downloads`` and checked against the recipe's sha256/md5 and
size before anything is read from them; a file placed there by hand (on a machine without a
network) is used as is once it verifies. Every output file is written to a temporary file in its
own folder and moved into place (:mod:`repro.files.writer`), so an interrupted fetch never leaves a
half-written corpus; files that already exist are left alone. Training pairs with an empty side
(Europarl has many) are dropped and counted in ``DATA_DIR/<name>/FETCHED.json``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path
from typing import IO

from repro.files import reader
from repro.files.reader import opened
from repro.data.downloads import RECIPES, Archive, Member, Output, Recipe
from repro.errors import DataError
from repro.files.writer import atomic_open, atomic_write_text

Log = Callable[[str], None]


def _digests(chunks: Iterator[bytes], sink: IO[bytes] | None = None) -> tuple[int, dict[str, str]]:
    """The size and the SHA-256 and MD5 of ``chunks``, each also written to ``sink``."""
    hashes, size = {"sha256": hashlib.sha256(), "md5": hashlib.md5()}, 0
    for chunk in chunks:
        size += len(chunk)
        for h in hashes.values():
            h.update(chunk)
        if sink is not None:
            sink.write(chunk)
    return size, {name: h.hexdigest() for name, h in hashes.items()}


def _check(path: Path, archive: Archive, size: int, digests: dict[str, str]) -> None:
    """Raise DataError unless ``size`` and ``digests`` (of ``path``) are the archive's."""
    if archive.sha256 is None and archive.md5 is None:
        raise DataError(f"{archive.url}: the recipe has no checksum for it; refusing to use an unverified download")
    if archive.size is not None and size != archive.size:
        raise DataError(f"{path}: size {size} bytes, expected {archive.size} for {archive.url}")
    for algorithm, expected in (("sha256", archive.sha256), ("md5", archive.md5)):
        if expected is not None and digests[algorithm] != expected:
            raise DataError(f"{path}: {algorithm} {digests[algorithm]} does not match {expected} for {archive.url}")


def verify(path: Path, archive: Archive) -> None:
    """Raise DataError unless ``path`` has the archive's size and checksum(s)."""
    with opened(path, "downloaded archive", error=DataError) as (fh, _):
        _check(path, archive, *_digests(iter(lambda: fh.read(1 << 20), b"")))


def download(archive: Archive, cache_dir: Path, log: Log = print) -> Path:
    """The verified local copy of ``archive``, downloading it into ``cache_dir`` if needed."""
    target = cache_dir / archive.filename
    if target.is_file():
        verify(target, archive)
        log(f"using {target} (checksum ok)")
        return target
    log(f"downloading {archive.url}")
    with atomic_open(target, "wb", within=cache_dir) as out:   # moved into place only when its checksums hold
        try:
            with urllib.request.urlopen(archive.url, timeout=60) as response:
                size, digests = _digests(iter(lambda: response.read(1 << 20), b""), out)
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise DataError(
                f"cannot download {archive.url} ({reason}); without a network, fetch it elsewhere and "
                f"place it at {target}, then run the command again"
            ) from None
        _check(target, archive, size, digests)
    return target


_SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


def _text_lines(stream: IO[bytes], fmt: str, where: str) -> Iterator[str]:
    if fmt == "gz":
        stream = gzip.GzipFile(fileobj=stream)  # type: ignore[assignment]
    reader = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    lineno = 0
    try:
        for line in reader:
            lineno += 1
            if fmt == "sgm":
                # WMT's SGML: one <seg id=..>text</seg> per line; sacreBLEU and Moses strip the text.
                if m := _SEG.search(line):
                    yield m.group(1).strip()
            else:
                yield line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}:{lineno + 1}: not valid UTF-8 ({err.reason})") from None


@contextmanager
def _open_member(local: dict[str, Path], member: Member) -> Iterator[Iterator[str]]:
    archive_path = local[member.archive.url]
    where = f"{archive_path}!{member.path}"
    with opened(archive_path, "archive", error=DataError) as (fh, _):
        try:
            tar = tarfile.TarFile.open(fileobj=fh, mode="r:*")
        except tarfile.TarError as err:
            raise DataError(f"{archive_path}: not a readable tar archive ({err})") from None
        with tar:
            try:
                info = tar.getmember(member.path)
            except KeyError:
                raise DataError(f"{archive_path}: has no member '{member.path}'") from None
            stream = tar.extractfile(info)
            if stream is None:
                raise DataError(f"{where}: not a regular file")
            with stream:
                yield _text_lines(stream, member.fmt, where)


def build_output(out: Output, local: dict[str, Path], data_dir: Path) -> dict[str, int]:
    """Write one (src, tgt) file pair from its archive members; returns kept/dropped counts."""
    kept = dropped = 0
    with atomic_open(data_dir / out.src_file, within=data_dir) as fsrc, \
            atomic_open(data_dir / out.tgt_file, within=data_dir) as ftgt:
        for src_member, tgt_member in out.parts:
            with _open_member(local, src_member) as src_lines, _open_member(local, tgt_member) as tgt_lines:
                for n, (s, t) in enumerate(zip_longest(src_lines, tgt_lines), start=1):
                    if s is None or t is None:
                        raise DataError(
                            f"{src_member.path} and {tgt_member.path} in {src_member.archive.filename} "
                            f"have different numbers of lines (they agree for the first {n - 1})"
                        )
                    s, t = s.strip(), t.strip()
                    if not s or not t:
                        if out.drop_empty:
                            dropped += 1
                            continue
                        raise DataError(f"{src_member.archive.filename}!{src_member.path}:{n}: empty line in a test set")
                    fsrc.write(s + "\n")
                    ftgt.write(t + "\n")
                    kept += 1
    return {"pairs": kept, "dropped_empty": dropped}


def fetch(name: str, data_dir: Path, *, cache_dir: Path | None = None, log: Log = print,
          recipes: dict[str, Recipe] | None = None) -> dict[str, dict[str, int]]:
    """Download and build every missing split of dataset ``name`` under ``data_dir``."""
    recipes = RECIPES if recipes is None else recipes
    if name not in recipes:
        raise DataError(f"no download recipe for '{name}' (recipes exist for: {', '.join(sorted(recipes))}); "
                        "other datasets must be supplied in the data directory")
    recipe = recipes[name]
    todo = {split: out for split, out in recipe.outputs.items()
            if not ((data_dir / out.src_file).is_file() and (data_dir / out.tgt_file).is_file())}
    if not todo:
        log(f"{name}: all splits already present in {data_dir}")
        return {}
    if not os.access(data_dir if data_dir.exists() else data_dir.parent, os.W_OK):
        raise DataError(f"data directory {data_dir} is not writable; pass --data-dir to fetch elsewhere")
    cache = cache_dir or data_dir / ".downloads"
    needed = {p.archive.url: p.archive for out in todo.values() for pair in out.parts for p in pair}
    local = {url: download(archive, cache, log) for url, archive in needed.items()}
    report: dict[str, dict[str, int]] = {}
    for split, out in todo.items():
        log(f"{name}: building {split} -> {out.src_file}, {out.tgt_file}")
        report[split] = build_output(out, local, data_dir)
        log(f"{name}: {split}: {report[split]['pairs']} pairs ({report[split]['dropped_empty']} with an empty side dropped)")
    manifest = data_dir / name / "FETCHED.json"
    previous = reader.read_json(manifest, "fetch manifest", error=DataError) if manifest.is_file() else {}
    previous.update({split: {**counts, "sources": [a.url for a in recipe.archives]} for split, counts in report.items()})
    atomic_write_text(manifest, json.dumps(previous, indent=2) + "\n", within=data_dir)
    return report
