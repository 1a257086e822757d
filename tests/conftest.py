"""Shared fixtures. Real data comes from ``../shared/data`` beside the checkout, or ``REPRO_DATA_DIR``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The audit plugin's tests run pytest inline (tests/audit/test_plugin.py).
pytest_plugins = ["pytester"]


def shared_data_dir() -> Path:
    env = os.environ.get("REPRO_DATA_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.fail(f"data directory {path} not found: set REPRO_DATA_DIR or place shared/data beside the checkout")
    return path


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
