"""How the report prints values: numbers to their meaningful digits, structures compactly."""

from __future__ import annotations

import math
from typing import Any

MISSING = "—"


def show(value: Any) -> str:
    """A value as text for a table cell; ``None`` is the dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={show(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def cell(value: Any) -> str:
    """A table cell: text as it is, a number through :func:`show`, ``None`` or NaN as the dash."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return show(value)


def exponents(value: Any) -> str:
    """Fitted exponents ``{"n": 2.01, "d": 0.99}`` as ``n^2.01 · d^0.99``; a number is n's exponent."""
    if isinstance(value, dict):
        return " · ".join(f"{k}^{v:.2f}" if isinstance(v, (int, float)) else f"{k}^{v}" for k, v in value.items())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"n^{value:.2f}"
    return show(value)
