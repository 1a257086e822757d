"""What pip installs: every package of repro, and the claims and cluster profiles inside it.

The full check (a wheel installed into a fresh virtualenv, run from an empty directory) is
tests/packaging/wheel_check.sh, which .ci/run runs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from repro.shipped import shipped_dir

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package_and_ships_claims_and_profiles():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "repro").rglob("__init__.py")}
    listed = set(setuptools["packages"])
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert setuptools["package-dir"] == {"repro.claims_data": "claims", "repro.slurm_profiles": "slurm"}
    assert listed - found == {"repro.claims_data", "repro.slurm_profiles"}


def test_shipped_folders_resolve_to_the_checkout():
    assert shipped_dir("claims", "claims_data") == ROOT / "claims"
    assert shipped_dir("slurm", "slurm_profiles") == ROOT / "slurm"
