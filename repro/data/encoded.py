"""A corpus encoded once: (source ids, target ids) pairs in flat arrays, written to disk and shared.

Encoding WMT 2014 (4.5M pairs) with the BPE of Section 5.1 takes minutes and, as Python lists,
gigabytes per process. A data-parallel job encodes it once (rank 0) into :class:`EncodedPairs`:
two flat int32 arrays with offsets, saved as ``.npy`` files (no pickle) that every rank, and every
requeued run of the job, memory-maps: the operating system keeps one copy for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from repro.atomic import atomic_open, atomic_write_text
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

    def save(self, folder: Path, manifest: dict) -> None:
        """The four arrays as ``.npy`` files and ``manifest`` (what they were encoded from) as
        ``manifest.json``, written last: a folder without a manifest is an interrupted write."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").unlink(missing_ok=True)
        for name in _ARRAYS:
            with atomic_open(folder / f"{name}.npy", "wb") as fh:
                np.save(fh, getattr(self, name), allow_pickle=False)
        atomic_write_text(folder / "manifest.json", json.dumps({**manifest, "pairs": len(self)}, indent=2, sort_keys=True))

    @classmethod
    def load(cls, folder: Path, manifest: dict) -> "EncodedPairs | None":
        """The pairs saved in ``folder`` if they were encoded from ``manifest`` (else None), memory-mapped."""
        try:
            saved = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        if not isinstance(saved, dict) or {k: saved.get(k) for k in manifest} != manifest:
            return None
        try:
            arrays = [np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in _ARRAYS]
        except (OSError, ValueError) as err:
            raise DataError(f"{folder}: encoded corpus unreadable ({err}); delete the folder to encode again") from None
        pairs = cls(*arrays)
        if len(pairs) != saved.get("pairs"):
            raise DataError(f"{folder}: encoded corpus holds {len(pairs)} pairs, its manifest says {saved.get('pairs')}")
        return pairs


def _gather(flat: np.ndarray, offsets: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs ``flat[offsets[i]:offsets[i + 1]]`` for ``i`` in ``indices``, concatenated, and their lengths."""
    if (indices < 0).any() or (indices >= len(offsets) - 1).any():
        raise IndexError(f"pair index out of range [0, {len(offsets) - 1})")
    starts = np.asarray(offsets[indices], dtype=np.int64)
    lengths = np.asarray(offsets[indices + 1], dtype=np.int64) - starts
    ends = np.cumsum(lengths)
    positions = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
    return np.asarray(flat[positions], dtype=np.int64), lengths
