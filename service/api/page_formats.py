"""Sizes and times on the pages the server makes (a shared folder's listing, a link's preview), as
the dashboard's scripts say them (``static/js/bytes.js``'s ``size``, ``static/js/time.js``'s
``when``), so a person reads the same "1.5 KiB" and "3 minutes ago" on both. The public pages
run no script, so the server writes them: how long ago as of the answer, then the date and time
in UTC (the server does not know the reader's zone), the exact instant on hover."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from html import escape

from service.clock import iso

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")
_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_YEAR = 365 * _DAY


def _js_round(value: float) -> int:
    """JavaScript's ``Math.round``: halves go up, also below zero."""
    return math.floor(value + 0.5)


def size_text(size: int) -> str:
    """1536 -> "1.5 KiB", as ``bytes.js``'s ``size``: one decimal below 10, whole above."""
    if size < 1024:
        return f"{size} {'byte' if size == 1 else 'bytes'}"
    value = float(size)
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if value < 10:  # toFixed(1): the nearer tenth of the exact value, a tie upwards
        shown = str(Decimal(value).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    else:
        shown = str(_js_round(value))
    return f"{shown} {_UNITS[unit]}"


def relative(at_ms: int, now_ms: int) -> str:
    """ "3 minutes ago", "in 90 days", "now": ``time.js``'s ``relative`` in English."""
    seconds = (at_ms - now_ms) / 1000
    size = abs(seconds)
    if _js_round(size / _MINUTE) < 1:
        return "now"
    future = seconds > 0
    for unit, length, following in (
        ("minute", _MINUTE, _HOUR),
        ("hour", _HOUR, _DAY),
        ("day", _DAY, _YEAR + _DAY),
    ):
        count = _js_round(size / length)
        if count * length < following:
            return _phrase(count, unit, future)
    return _phrase(_js_round(size / _YEAR), "year", future)


def _phrase(count: int, unit: str, future: bool) -> str:
    units = unit if count == 1 else f"{unit}s"
    return f"in {count} {units}" if future else f"{count} {units} ago"


def utc_text(at_ms: int) -> str:
    """ "2025-01-31 12:34:56 UTC": the exact instant, as ``time.js``'s hover shows it."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def date_text(at_ms: int) -> str:
    """ "31 Jan 2025, 12:34 UTC": a medium date and a short time, as the dashboard writes them."""
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    return f"{at.day} {at.strftime('%b %Y, %H:%M')} UTC"


def when_html(at_ms: int, now_ms: int) -> str:
    """A ``<time>`` as ``time.js``'s ``when`` builds it: how long ago, then the date and time on
    a line of their own; the exact instant in ``datetime`` and the tooltip."""
    return (
        f'<time class="when" datetime="{escape(iso(at_ms) or "")}" title="{utc_text(at_ms)}">'
        f'<span class="ago">{relative(at_ms, now_ms)}</span> '
        f'<span class="local">{date_text(at_ms)}</span></time>'
    )
