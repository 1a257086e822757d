"""The ``pytester`` fixture for the plugin's tests.

``pytest_plugins = ["pytester"]`` is only allowed in the top-level conftest, so the plugin is
registered here when this directory's tests are collected.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
