"""Checkers, one module per part of the paper. Importing this package registers them all."""

from repro.checks import attention, layers, metrics, positional, table1, table2, table3, training  # noqa: F401
from repro.checks.registry import CHECKERS, CheckContext, Measurement, NotApplicable, NotRun, checker

__all__ = ["CHECKERS", "CheckContext", "Measurement", "NotApplicable", "NotRun", "checker"]
