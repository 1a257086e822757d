"""JSON parsed strictly: what a user's file or flag says is read whole, or refused naming it and the line.

Python's ``json`` keeps the last of two equal keys (``{"seed": 1, "seed": 2}`` reads as seed 2,
silently) and takes ``NaN`` and ``Infinity``, which are not JSON. Every JSON that comes from a
file or a flag (configs, ``--set`` values, result records, the cluster ledger and job states, a
report's previous files) is read here: a repeated key is refused, and so are ``NaN`` and
``±Infinity`` unless the reader says a measurement may be one (``allow_nan``: a result record's
measured value). Nesting is bounded (:data:`repro.limits.NESTING`): JSON nested 5000 deep is
refused by name, never a RecursionError in the parser or in whatever walks the value later. The
error is a :class:`~repro.errors.ReproError` of the caller's class. Files are read by
:func:`repro.files.reader.read_json`, which parses them here.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from repro.errors import ReproError, UsageError
from repro.limits import NESTING


class _Refused(ValueError):
    """A duplicate key, a non-finite constant or a number no float holds, raised from inside the
    decoder; ``needle``: the text to look for to name its line (``nth``: which occurrence)."""

    def __init__(self, message: str, needle: str, nth: int = 1) -> None:
        super().__init__(message)
        self.needle, self.nth = needle, nth


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"key '{key}' appears twice in one object", f'"{key}"', 2)
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number", name)


def _shown(number: str) -> str:
    return number if len(number) <= 24 else f"{number[:12]}...({len(number)} characters)"


def _finite_float(number: str) -> float:
    """A JSON fraction or exponent as a float; one beyond the largest float (``1e400``, which Python
    reads as infinity) is refused: every number repro reads is finite."""
    value = float(number)
    if not math.isfinite(value):
        raise _Refused(f"{_shown(number)} is beyond the largest number a float holds (about 1.8e308)", number)
    return value


def _float_sized_int(number: str) -> int:
    """A JSON integer, refused when no float holds it (it would overflow where it is compared or averaged)."""
    value = int(number)
    if abs(value) > _LARGEST:
        raise _Refused(f"{_shown(number)} is beyond the largest number a float holds (about 1.8e308)", number)
    return value


_LARGEST = int(sys.float_info.max)


def _line_of(text: str, needle: str, nth: int = 1) -> int | None:
    index = -1
    for _ in range(nth):
        index = text.find(needle, index + 1)
        if index < 0:
            return None
    return text.count("\n", 0, index) + 1 if index >= 0 else None


def loads(text: str, source: str, *, error: type[ReproError] = UsageError, allow_nan: bool = False) -> Any:
    """``text`` as JSON; a syntax error, a repeated key or (unless ``allow_nan``) NaN/Infinity raise
    ``error`` naming ``source`` (a file, or a flag such as ``--set seed``) and the line."""
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_int=_float_sized_int,
                           parse_float=float if allow_nan else _finite_float,
                           parse_constant=None if allow_nan else _no_constant)
    except RecursionError:
        raise error(f"{source}: nested deeper than {NESTING.hard} levels ({NESTING.why})") from None
    except json.JSONDecodeError as err:
        raise error(f"{source}:{err.lineno}: not valid JSON ({err.msg})") from None
    except _Refused as why:
        line = _line_of(text, why.needle, why.nth)
        where = f"{source}:{line}" if line is not None and "\n" in text.strip() else source
        raise error(f"{where}: {why}") from None
    except ValueError as err:   # a number of more than 4300 digits (Python's int conversion limit)
        raise error(f"{source}: not valid JSON ({str(err).splitlines()[0][:200]})") from None
    depth = nesting_depth(value)
    if depth > NESTING.hard:
        raise error(f"{source}: nested {depth} levels deep, more than {NESTING.hard} ({NESTING.why})")
    half = _lone_surrogate(value) if "\\u" in text else None
    if half is not None:   # JSON's \ud800 escape decodes to half a character, which no file name or text holds
        escape = f"\\u{ord(half):04x}"
        line = _line_of(text.lower(), escape)
        where = f"{source}:{line}" if line is not None and "\n" in text.strip() else source
        raise error(f"{where}: {escape} is half of a UTF-16 surrogate pair, not a character")
    return value


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate (U+D800..U+DFFF) in a string or key of ``value``, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            bad = next((c for c in item if "\ud800" <= c <= "\udfff"), None)
            if bad is not None:
                return bad
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (a scalar: 0), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest
