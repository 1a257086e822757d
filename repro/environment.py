"""The environment variables repro reads as numbers (a launcher's ranks and CPU counts, sacreBLEU's
seed): each is parsed here, and a value it cannot mean is refused in one line naming the variable
(exit 2), never a ``ValueError`` traceback from ``int()`` deep inside a run."""

from __future__ import annotations

import os
from collections.abc import Mapping

from repro import numerals
from repro.errors import UsageError


def env_int(name: str, default: int | None = None, *, minimum: int = 0, maximum: int | None = None,
            environ: Mapping[str, str] | None = None, other: str = "") -> int | None:
    """``$name`` as an integer of at least ``minimum`` (and at most ``maximum``); ``default`` when it is
    unset or empty. ``other`` names what else the variable may hold (for the refusal's text)."""
    text = (os.environ if environ is None else environ).get(name, "").strip()
    if not text:
        return default
    value = numerals.integer(text)   # int() would take 1_0 and other scripts' digits
    if value is None:
        raise UsageError(f"environment variable {name}: must be an integer{other} in ASCII digits, got {text[:60]!r}")
    if value < minimum:
        raise UsageError(f"environment variable {name}: must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise UsageError(f"environment variable {name}: must be at most {maximum}, got {value}")
    return value
