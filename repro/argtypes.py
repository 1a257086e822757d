"""Strict argparse types for the ``repro`` flags: a value is parsed whole or refused by name.

``type=int`` alone takes ``--seed -3`` or ``--max-steps 0``; these types refuse what the
flag cannot mean (argparse then exits 2 naming the flag), so no command starts work on it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer > 0 (steps, beam width, token budgets, lengths)."""
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds, thread counts where 0 means the default, error limits)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (the length penalty alpha of Section 6.1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def existing_file(text: str) -> str:
    """A path to a regular file that exists (checkpoints, tree files, references); kept as the text given."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is a directory, not a file' if path.is_dir() else 'no such file'}")
    return text


def existing_dir(text: str) -> str:
    """A path to a directory that exists (run directories, claims and results directories); kept as given."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'not a directory' if path.exists() else 'no such directory'}")
    return text
