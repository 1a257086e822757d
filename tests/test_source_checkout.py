"""repro runs from a source checkout on PYTHONPATH, not installed, from any directory.

A SLURM task or a spawned worker may start in another directory, with the checkout on its path
but no installed package metadata for repro. Run in a fresh interpreter from a temporary
directory, with the metadata of the ``repro`` distribution hidden.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HIDE_METADATA = """
import importlib.metadata as m
_version = m.version
def version(name):
    if name == "repro":
        raise m.PackageNotFoundError(name)
    return _version(name)
m.version = version
import sys
from repro.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run(args: list[str], cwd: Path, repo_root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    return subprocess.run([sys.executable, "-c", HIDE_METADATA, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_paper_bleu_without_installed_metadata(tmp_path: Path, repo_root: Path) -> None:
    (tmp_path / "hyp").write_text("ein Mann geht .\n")
    (tmp_path / "ref").write_text("ein Mann geht nach Hause .\n")
    proc = run(["bleu", "--protocol", "paper", "hyp", "ref"], tmp_path, repo_root)
    assert proc.returncode == 0, proc.stderr
    assert "repro:0." in proc.stdout


def test_claims_and_profiles_are_found_from_another_directory(tmp_path: Path, repo_root: Path) -> None:
    proc = run(["claims", "list", "--json"], tmp_path, repo_root)
    assert proc.returncode == 0, proc.stderr and proc.stdout.startswith("[")
    proc = run(["submit", "smoke", "--cluster", "local", "--dry-run", "--json", "--state-dir", str(tmp_path / "s")],
               tmp_path, repo_root)
    assert proc.returncode == 0, proc.stderr
