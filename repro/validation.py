"""The one validator of records read from disk: a JSON schema, and one line saying what is wrong.

Claims (``claims/*.toml``, :mod:`repro.claims.schema`), result records
(:mod:`repro.results.record_schema`) and the cluster ledger (:mod:`repro.cluster.ledger`) are each
described by a JSON schema and checked here, with ``jsonschema``. Beyond the schema: dates
given as ``"format": "date-time"`` must be instants (:mod:`repro.instants`: ISO 8601 with a time
zone, ``2026-01-31T12:00:00+00:00`` or ``2026-01-31``, not in the future), and no number may be
NaN or infinite (TOML takes ``nan`` and ``inf``; a paper value or a tolerance never is one) except
under the fields the caller names.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import jsonschema

from repro.instants import checked_instant

FORMATS = jsonschema.FormatChecker(formats=())

#: JSON Schema counts ``3.0`` an integer; a reader here does not: TOML and JSON write a whole number
#: without a point, and a count of ``512.0`` reaches ``torch.randn`` or ``range`` as a float (a checker's
#: TypeError, not a refusal naming the field). A bool is no integer either (as the schema says).
_STRICT = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)),
)


@FORMATS.checks("date-time", raises=ValueError)
def _instant(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the type keyword speaks for non-strings
    checked_instant(value)
    return True


def describe(error: jsonschema.ValidationError) -> str:
    """One line naming the field (``tolerance.abs``) and what is wrong with it."""
    where = ".".join(str(p) for p in error.absolute_path)
    field = f"field '{where}'" if where else "the record"
    if error.validator == "required":
        missing = error.message.split("'")[1] if error.message.count("'") >= 2 else "?"
        name = f"{where}.{missing}" if where else missing
        return f"lacks field '{name}' ({error.message})"
    if error.validator == "dependentRequired":
        missing = error.message.split("'")[1] if error.message.count("'") >= 2 else "?"
        return f"lacks field '{where + '.' if where else ''}{missing}' ({error.message})"
    if error.validator == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known)) if isinstance(error.instance, dict) else []
        name = f"{where}.{extra[0]}" if where and extra else (extra[0] if extra else "?")
        return f"unknown field '{name}' (known: {', '.join(known)})"
    if error.validator == "minimum" and where.startswith("tolerance."):
        return f"field '{where}' must not be negative (got {error.instance})"
    if error.validator == "anyOf" and not where:
        return "a numeric 'expected' needs a 'tolerance', a 'rounding' or a 'bound'"
    if error.validator == "type":
        return f"{field} must be of type {error.validator_value} (got {error.instance!r})"
    if error.validator == "enum":
        return f"{field} must be one of {', '.join(repr(v) for v in error.validator_value)} (got {error.instance!r})"
    if error.validator == "pattern":
        return f"{field} must match {error.validator_value} (got {error.instance!r})"
    if error.validator == "format":
        why = str(error.cause) if error.cause is not None else f"is not an ISO 8601 date (got {error.instance!r})"
        return f"{field} {why}; it must be an ISO 8601 date with a time zone"
    return f"field '{where or '<record>'}': {error.message}"


def non_finite(value: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite number in ``value``, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "<value>"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def problem(data: Any, schema: dict, *, nan_allowed_in: Collection[str] = ()) -> str | None:
    """What is wrong with ``data`` under ``schema`` (the first error, ordered by field), or None.
    ``nan_allowed_in``: top-level fields whose numbers may be NaN or infinite (a measurement)."""
    validator = _STRICT(schema, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        return describe(errors[0])
    checked = {k: v for k, v in data.items() if k not in nan_allowed_in} if isinstance(data, dict) else data
    where = non_finite(checked)
    if where is not None:
        return f"field '{where}' must be a finite number (NaN and infinity are not values here)"
    return None
