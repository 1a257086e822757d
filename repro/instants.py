"""Dates are instants: a record's date is a moment in time, compared as one, never as text.

``2026-01-31T13:00:00+02:00`` is 11:00 UTC, older than ``2026-01-31T12:00:00Z``; as text it sorts
after it. Every date repro reads from a record (a result's ``provenance.date``, a ledger's
``created``) is parsed here into a timezone-aware :class:`datetime.datetime` (ISO 8601; ``Z`` is
UTC; a date alone is the start of that day in UTC), and every comparison of records by date is a
comparison of these. A date and time without a time zone names no instant (13:00 where?) and is
refused, and so is a date more than :data:`FUTURE_SKEW_S` ahead of this machine's clock: no
measurement was made in the future, and one dated 2099 would otherwise win over every real one.
"""

from __future__ import annotations

import datetime as _dt

#: How far ahead of this machine's clock a record's date may lie (another host's clock runs ahead).
FUTURE_SKEW_S = 300.0


def instant(text: str) -> _dt.datetime:
    """``text`` (ISO 8601) as a timezone-aware datetime; ValueError saying why it is not one."""
    if not isinstance(text, str):
        raise ValueError(f"a date must be text in ISO 8601 (got {text!r})")
    try:   # a date alone: the start of that day, in UTC
        day = _dt.date.fromisoformat(text)
        return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.timezone.utc)
    except ValueError:
        pass
    try:
        value = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"is not an ISO 8601 date (got {text!r})") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"names no time zone (got {text!r}; write it as {text}+00:00 or {text}Z for UTC)")
    return value


def checked_instant(text: str, now: _dt.datetime | None = None) -> _dt.datetime:
    """:func:`instant`, refused also when it lies more than :data:`FUTURE_SKEW_S` in the future."""
    value = instant(text)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    if (value - now).total_seconds() > FUTURE_SKEW_S:
        raise ValueError(f"lies in the future (got {text!r}; this machine's clock says "
                         f"{now.isoformat(timespec='seconds')})")
    return value
