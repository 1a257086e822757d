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
from typing import Any

from repro.errors import ReproError, UsageError
from repro.limits import NESTING


class _Refused(ValueError):
    """A duplicate key or a non-finite constant, raised from inside the decoder."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"key '{key}' appears twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number")


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
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=None if allow_nan else _no_constant)
    except RecursionError:
        raise error(f"{source}: nested deeper than {NESTING.hard} levels ({NESTING.why})") from None
    except json.JSONDecodeError as err:
        raise error(f"{source}:{err.lineno}: not valid JSON ({err.msg})") from None
    except _Refused as why:
        duplicate = str(why).startswith("key '")
        key = str(why).split("'")[1] if duplicate else str(why).split()[0]
        line = _line_of(text, f'"{key}"', 2) if duplicate else _line_of(text, key)
        where = f"{source}:{line}" if line is not None and "\n" in text.strip() else source
        raise error(f"{where}: {why}") from None
    except ValueError as err:   # a number of more than 4300 digits (Python's int conversion limit)
        raise error(f"{source}: not valid JSON ({str(err).splitlines()[0][:200]})") from None
    depth = nesting_depth(value)
    if depth > NESTING.hard:
        raise error(f"{source}: nested {depth} levels deep, more than {NESTING.hard} ({NESTING.why})")
    return value


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
