"""Files that ship with repro beside its code: the claims (``claims/``) and the cluster profiles
(``slurm/*.toml``).

In a checkout (or an editable install, or the working tree on ``PYTHONPATH``) they are the
folders at the repository's top level; a wheel carries copies inside the package
(``repro/claims_data``, ``repro/slurm_profiles``: ``pyproject.toml`` maps them there).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(checkout_folder: str, packaged_folder: str) -> Path:
    """``checkout_folder`` at the top of the checkout when it exists, else the copy in the package."""
    checkout = _PACKAGE.parent / checkout_folder
    return checkout if checkout.is_dir() else _PACKAGE / packaged_folder
