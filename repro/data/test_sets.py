"""The paper's test sets and the identity of a file that was scored.

Table 2 is scored on newstest2014, the full release of 3003 sentences (tensor2tensor's and
sacreBLEU's ``wmt14/full``, not the filtered 2737), Table 3's rows on newstest2013 (3000), both
EN-DE; Table 2's EN-FR rows on newstest2014 EN-FR. A file's name says little (a filtered copy, a
truncated copy or another year can carry the same name), so every evaluation records the identity
of what it scored (:func:`identity`): its name, its line count, the SHA-256 of its bytes and a
content hash, the SHA-256 of its lines stripped of surrounding white space and sorted. The content
hash is the same for a copy with other line endings or trailing blanks and for the same sentences in
another order (BLEU and perplexity are sums over sentences: the order does not change them); a
line added, dropped or changed changes it. :data:`PAPER_TEST_SETS` holds the content hashes of
the paper's test sets, taken from the copies in the shared data directory (their provenance is in
each folder's SOURCE.md).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.content_hash import file_sha256
from repro.data.text_lines import iter_lines


def content_sha256(lines: list[str]) -> str:
    """The order-free content hash of a text's lines (module docstring)."""
    digest = hashlib.sha256()
    for line in sorted(line.strip() for line in lines):
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a scored file is: its name, path, line count (lines as sacreBLEU and ``wc -l`` count them,
    :mod:`repro.data.text_lines`), SHA-256 and content hash (module docstring)."""
    path = Path(path)
    lines = list(iter_lines(path))
    return {"file": path.name, "path": str(path.resolve()), "lines": len(lines), "sha256": file_sha256(path),
            "content_sha256": content_sha256(lines)}


@dataclass(frozen=True)
class PaperTestSet:
    """One of the paper's test sets: its name, its sentences, the content hashes of both sides."""

    name: str
    lines: int
    source_content: str
    reference_content: str

    def differences(self, scored: dict[str, Any]) -> list[str]:
        """How a scored file pair (``{"source": identity, "reference": identity}``) differs from this set;
        empty when it is this set."""
        out = []
        for side, wanted in (("source", self.source_content), ("reference", self.reference_content)):
            found = scored.get(side) if isinstance(scored, dict) else None
            if not isinstance(found, dict):
                out.append(f"the {side} side's identity is not recorded")
                continue
            if found.get("lines") != self.lines:
                out.append(f"the {side} file {found.get('file')} has {found.get('lines')} lines, {self.name} {self.lines}")
            elif found.get("content_sha256") != wanted:
                out.append(f"the {side} file {found.get('file')} has {self.lines} lines but other content than "
                           f"{self.name} (content hash {str(found.get('content_sha256'))[:12]}, the paper's "
                           f"{wanted[:12]})")
        return out


#: (dataset, split) of the paper's jobs -> the paper's test set that split must be.
PAPER_TEST_SETS: dict[tuple[str, str], PaperTestSet] = {
    ("wmt14-en-de", "test"): PaperTestSet(
        "newstest2014 EN-DE (full, 3003 sentences)", 3003,
        "603239fc539c7dc364771d93aae0469981c899699e5cbe99a2003bc56ace7b2c",
        "4a985a11abe33ac60b00f0e73abc6fbce0c73ccba9133cbdfd6fb58e09474b87"),
    ("wmt14-en-fr", "test"): PaperTestSet(
        "newstest2014 EN-FR (full, 3003 sentences)", 3003,
        "d8944b5e269ecc812d7d338c6d14fa354373c1888aa911aebc72ff011624b189",
        "e7eabff2e6a4f5ae9b9f463a0d789d6b720556fa7ea800bf5ca7f3c5a1cbc34f"),
    ("wmt14-en-de", "dev"): PaperTestSet(
        "newstest2013 EN-DE (3000 sentences)", 3000,
        "741d2e6691889161c3da80a1c6865d2791a26c3ecdbf166e33c788ed6d1bdbba",
        "a8506dd609592437fcbfa2a02acd1ef3ce057965e836ecdf1ede15dfc95bab2b"),
}


def paper_test_set(dataset: str, split: str) -> PaperTestSet | None:
    """The paper's test set a paper job scores on ``split`` of ``dataset`` (None: none is known)."""
    return PAPER_TEST_SETS.get((dataset, split))
