"""A corpus encoded once: (source ids, target ids) pairs in flat arrays, written to disk and shared.

Encoding WMT 2014 (4.5M pairs) with the BPE of Section 5.1 takes minutes and, as Python lists,
gigabytes per process. A data-parallel job encodes it once (rank 0) into :class:`EncodedPairs`:
two flat int32 arrays with offsets, saved as ``.npy`` files (no pickle) that every rank, and every
requeued run of the job, memory-maps: the operating system keeps one copy for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from repro.files.reader import load_array, read_json
from repro.files.writer import atomic_open, atomic_write_text, make_dirs, remove
from repro.content_hash import array_sha256
from repro.errors import DataError

_ARRAYS = ("src", "src_offsets", "tgt", "tgt_offsets")


class EncodedPairs(Sequence):
    """Encoded (source, target) pairs; ``pairs[i]`` is a pair of int32 arrays (views, no copy)."""

    def __init__(self, src: np.ndarray, src_offsets: np.ndarray, tgt: np.ndarray, tgt_offsets: np.ndarray) -> None:
        if len(src_offsets) != len(tgt_offsets) or len(src_offsets) == 0:
            raise DataError("encoded pairs: source and target offsets differ in length (or are empty)")
        self.src, self.src_offsets, self.tgt, self.tgt_offsets = src, src_offsets, tgt, tgt_offsets

    @classmethod
    def from_lists(cls, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> "EncodedPairs":
        src_len = np.fromiter((len(s) for s, _ in pairs), dtype=np.int64, count=len(pairs))
        tgt_len = np.fromiter((len(t) for _, t in pairs), dtype=np.int64, count=len(pairs))
        src = np.fromiter((i for s, _ in pairs for i in s), dtype=np.int32, count=int(src_len.sum()))
        tgt = np.fromiter((i for _, t in pairs for i in t), dtype=np.int32, count=int(tgt_len.sum()))
        return cls(src, np.concatenate([[0], np.cumsum(src_len)]), tgt, np.concatenate([[0], np.cumsum(tgt_len)]))

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @overload
    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[np.ndarray, np.ndarray]]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return (self.src[self.src_offsets[i]:self.src_offsets[i + 1]],
                self.tgt[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return (self[i] for i in range(len(self)))

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Source and target lengths of every pair, without touching the ids."""
        return np.diff(self.src_offsets), np.diff(self.tgt_offsets)

    def take(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The pairs at ``indices``, flat: (source ids one after the other, source lengths, the same
        for the targets), gathered in one indexing per side (no array per pair: a batch's ~1000
        slices of a memory map cost ~30 ms of a 2-core host, the gather well under 1 ms)."""
        indices = np.asarray(indices, dtype=np.int64)
        src, src_len = _gather(self.src, self.src_offsets, indices)
        tgt, tgt_len = _gather(self.tgt, self.tgt_offsets, indices)
        return src, src_len, tgt, tgt_len

    def save(self, folder: Path, manifest: dict, *, within: Path | None = None) -> None:
        """The four arrays as ``.npy`` files and ``manifest`` (what they were encoded from, with the
        SHA-256 of each array) as ``manifest.json``, written last: a folder without a manifest is an
        interrupted write. ``within``: the run's folder that holds ``folder``."""
        within = within if within is not None else folder
        make_dirs(folder, within)
        remove(folder / "manifest.json", within=within)
        for name in _ARRAYS:
            with atomic_open(folder / f"{name}.npy", "wb", within=within) as fh:
                np.save(fh, getattr(self, name), allow_pickle=False)
        arrays = {name: array_sha256(getattr(self, name)) for name in _ARRAYS}
        atomic_write_text(folder / "manifest.json", json.dumps({**manifest, "pairs": len(self), "arrays": arrays},
                                                               indent=2, sort_keys=True), within=within)

    @classmethod
    def load(cls, folder: Path, manifest: dict, why: Callable[[str], None] | None = None) -> "EncodedPairs | None":
        """The pairs saved in ``folder`` if they were encoded from ``manifest`` and every array still
        holds what was saved (its SHA-256), memory-mapped; else None, and ``why(reason)`` is told why
        (when there was a cache to reuse)."""
        why = why or (lambda _: None)
        if not (folder / "manifest.json").exists():
            if any((folder / f"{name}.npy").exists() for name in _ARRAYS):
                why(f"{folder} has arrays but no manifest.json (an interrupted write)")
            return None
        try:
            saved = read_json(folder / "manifest.json", "encoded corpus's manifest", error=DataError)
        except DataError as err:
            why(f"{folder / 'manifest.json'} is unreadable ({err})")
            return None
        if not isinstance(saved, dict):
            why(f"{folder / 'manifest.json'} is not a manifest")
            return None
        changed = sorted(k for k in manifest if saved.get(k) != manifest[k])
        if changed:
            why(f"{folder} was encoded from other inputs ({', '.join(_describe(k, saved.get(k), manifest[k]) for k in changed)})")
            return None
        hashes = saved.get("arrays")
        if not isinstance(hashes, dict):
            why(f"{folder / 'manifest.json'} records no content hash of the arrays (an older repro wrote it)")
            return None
        try:
            arrays = [load_array(folder / f"{name}.npy", "encoded array", error=DataError) for name in _ARRAYS]
        except (OSError, ValueError, DataError) as err:
            why(f"{folder}: an encoded array is unreadable ({err})")
            return None
        for name, array in zip(_ARRAYS, arrays):
            if array.ndim != 1 or array.dtype.kind not in "iu":
                why(f"{folder / (name + '.npy')} is not a flat integer array")
                return None
            if array_sha256(array) != hashes.get(name):
                why(f"{folder / (name + '.npy')} does not hold what was encoded (its SHA-256 differs from the manifest's)")
                return None
        try:
            pairs = cls(*arrays)
        except DataError as err:
            why(f"{folder}: {err}")
            return None
        if len(pairs) != saved.get("pairs"):
            why(f"{folder} holds {len(pairs)} pairs, its manifest says {saved.get('pairs')}")
            return None
        return pairs

    def check_ids(self, folder: Path, vocab_size: int, vocab_file: Path) -> None:
        """Refuse ids outside ``[0, vocab_size)``, naming the array file and the vocabulary."""
        for name in ("src", "tgt"):
            array = getattr(self, name)
            if len(array) and (int(array.min()) < 0 or int(array.max()) >= vocab_size):
                bad = int(array.max()) if int(array.max()) >= vocab_size else int(array.min())
                raise DataError(f"{folder / (name + '.npy')}: holds id {bad}, outside the vocabulary of "
                                f"{vocab_file} ({vocab_size} entries); delete {folder} to encode again")


def _gather(flat: np.ndarray, offsets: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs ``flat[offsets[i]:offsets[i + 1]]`` for ``i`` in ``indices``, concatenated, and their lengths."""
    if (indices < 0).any() or (indices >= len(offsets) - 1).any():
        raise IndexError(f"pair index out of range [0, {len(offsets) - 1})")
    starts = np.asarray(offsets[indices], dtype=np.int64)
    lengths = np.asarray(offsets[indices + 1], dtype=np.int64) - starts
    ends = np.cumsum(lengths)
    positions = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
    return np.asarray(flat[positions], dtype=np.int64), lengths


def _describe(key: str, saved: object, wanted: object) -> str:
    if key == "files" and isinstance(saved, dict) and isinstance(wanted, dict):
        differ = sorted(p for p in set(saved) | set(wanted) if saved.get(p) != wanted.get(p))
        return "content of " + ", ".join(differ)
    return f"{key}"
