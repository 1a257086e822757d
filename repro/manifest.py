"""What repro wrote into a folder it shares with its user, so that it deletes only that.

A run directory (``--out-dir``) may be a folder of the user's own. Before a stage writes into
it, the pipeline *claims* the paths it is about to create, as patterns relative to the folder
(``checkpoints/step_*.pt``, ``vocab.json``; a ``*`` never crosses a ``/``; a trailing ``/``
names a directory), in ``.repro-manifest.json`` beside them. A path that already exists when a
pattern is first claimed is the user's and is recorded as foreign: it is never deleted.
``--fresh`` deletes exactly the claimed paths that exist (directories only when empty), and
nothing else: no ``rmtree``. A claim is written before the files it names, so a run killed
half-way still has its files listed.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from repro.files import reader
from repro.files.writer import atomic_write_text, make_dirs, remove
from repro.errors import UsageError

NAME = ".repro-manifest.json"
FORMAT = "repro-manifest"


def _matches(relative: str, is_dir: bool, pattern: str) -> bool:
    """Whether ``pattern`` names the path: component by component, directories only with a trailing ``/``."""
    if pattern.endswith("/") != is_dir:
        return False
    parts, wanted = relative.split("/"), pattern.rstrip("/").split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted))


@dataclass
class Manifest:
    """The paths repro claimed under ``root`` (patterns), and the paths that were there before."""

    root: Path
    claimed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.root / NAME

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> "Manifest":
        """The manifest of ``root`` (empty when there is none); a malformed one is refused by name."""
        root = Path(root)
        manifest = cls(root)
        if not manifest.path.exists():
            return manifest
        data = reader.read_json(manifest.path, "manifest of the files repro wrote")
        lists = ("claimed", "foreign")
        if (not isinstance(data, dict) or data.get("format") != FORMAT
                or not all(isinstance(data.get(k), list) and all(isinstance(v, str) for v in data[k]) for k in lists)):
            raise UsageError(f"{manifest.path}: not a repro manifest (format '{FORMAT}' with lists "
                             "'claimed' and 'foreign'); remove it, or choose another --out-dir")
        manifest.claimed, manifest.foreign = list(data["claimed"]), list(data["foreign"])
        return manifest

    def _existing(self) -> list[tuple[str, bool]]:
        """Every path under root (relative, ``/``-separated) and whether it is a directory; the
        manifest itself left out. Symbolic links are listed, never followed."""
        found = []
        for folder, dirs, files in os.walk(self.root):
            rel = Path(folder).relative_to(self.root)
            found += [((rel / name).as_posix(), not (Path(folder) / name).is_symlink()) for name in sorted(dirs)]
            found += [((rel / name).as_posix(), False) for name in sorted(files)]
        return [(p, d) for p, d in found if p != NAME]

    def matching(self, patterns: list[str]) -> list[str]:
        """The existing paths under root that one of ``patterns`` names."""
        return [p for p, is_dir in self._existing() if any(_matches(p, is_dir, w) for w in patterns)]

    def claim(self, *patterns: str) -> None:
        """Record ``patterns`` as repro's before anything they name is written; what they already
        name (and repro did not claim earlier) is recorded as foreign."""
        new = [p for p in dict.fromkeys(patterns) if p not in self.claimed]
        if not new and self.path.exists():
            return
        owned = set(self.owned())
        self.foreign = sorted(set(self.foreign) | {p for p in self.matching(new) if p not in owned})
        self.claimed += new
        make_dirs(self.root)
        atomic_write_text(self.path, json.dumps({"format": FORMAT, "claimed": self.claimed, "foreign": self.foreign},
                                                indent=1) + "\n", within=self.root)

    def plans_run_in(self, relative: str) -> bool:
        """Whether the folder ``relative`` (to root) is one of the runs this run's layout holds (its
        checkpoints are claimed: ``seed-*/``, a Table 3 job's folder), not any folder of its own."""
        return any(_matches(f"{relative}/checkpoints/step_00000001.pt", False, p) for p in self.claimed)

    def owned(self) -> list[str]:
        """The existing paths repro wrote: claimed, and not foreign."""
        return [p for p in self.matching(self.claimed) if p not in set(self.foreign)]

    def remove(self) -> list[Path]:
        """Delete what :meth:`owned` lists (files first, then directories left empty); returns them."""
        owned = self.owned()
        removed = []
        for rel in owned:
            path = self.root / rel
            if path.is_symlink() or not path.is_dir():
                remove(path, within=self.root)
                removed.append(path)
        for rel in sorted((r for r in owned if (self.root / r).is_dir()), key=lambda r: -r.count("/")):
            path = self.root / rel
            if not any(path.iterdir()):
                remove(path, within=self.root)
                removed.append(path)
        return removed
