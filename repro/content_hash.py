"""Content hashes (SHA-256) of files and arrays: what an artifact was made from, by content.

Sizes and modification times say nothing about content (a file edited in place within the same
second keeps both; ``.npy`` arrays replaced by other ids of the same shape keep their size), so
the encoded-corpus cache and the checkpoints record these hashes and compare them before reuse.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from repro.errors import DataError
from repro.files.reader import opened

_CHUNK = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the file's bytes (hex), read in chunks (:mod:`repro.files.reader`: a regular
    file, or DataError naming it)."""
    digest = hashlib.sha256()
    with opened(path, "file", error=DataError) as (fh, _):
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def array_sha256(array: np.ndarray) -> str:
    """The SHA-256 (hex) of an array's dtype, shape and elements (C order), read in slices so that a
    memory-mapped array is never copied whole."""
    digest = hashlib.sha256(f"{np.dtype(array.dtype).str}{tuple(array.shape)}".encode())
    flat = array.reshape(-1)
    step = max(1, _CHUNK // max(flat.itemsize, 1))
    for start in range(0, flat.shape[0], step):
        digest.update(np.ascontiguousarray(flat[start:start + step]).tobytes())
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
