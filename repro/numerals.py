"""Numbers written as text (a flag, an environment variable, a field of a CSV log): ASCII only.

Python's ``int`` and ``float`` read more than a user means: ``1_0`` is 10, and the digits of other
scripts (``١٠``, ``１０``, ``²``) are digits to them. A shell script, SLURM, Perl's EVALB and C's
``atoi`` read none of these, so a value repro takes from text is written in ASCII digits (with a
sign, a decimal point and an exponent for a real number), whole or not at all; anything else is no
number, and the reader refuses it by name.
"""

from __future__ import annotations

import math
import re

#: An integer: an optional sign and ASCII digits (no ``_``, no other script's digits).
INTEGER = re.compile(r"[+-]?[0-9]+")
#: A real number as C's ``strtod`` and Python's ``float`` both read it, in ASCII: digits with an
#: optional point and exponent, or ``inf``/``infinity``/``nan`` (a reader decides whether it takes those).
REAL = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)


def integer(text: str) -> int | None:
    """``text`` (surrounding white space aside) as an integer, or None when it is not one in ASCII digits."""
    text = text.strip()
    return int(text) if INTEGER.fullmatch(text) else None


def real(text: str) -> float | None:
    """``text`` (surrounding white space aside) as a float, or None when it is no ASCII number; a
    finite-looking number beyond the largest float (``1e400``) is None too: it would read as infinity."""
    text = text.strip()
    if not REAL.fullmatch(text):
        return None
    value = float(text)
    if math.isinf(value) and "inf" not in text.lower():
        return None
    return value
