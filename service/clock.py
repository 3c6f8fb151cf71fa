"""Time as the service sees it: injectable, so tests move it forward instead of sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol, overload


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


# The first and last instants RFC 3339 writes (years 0001 to 9999), in ms, whole seconds.
EARLIEST_ISO_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
LATEST_ISO_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z


@overload
def iso(ms: int) -> str: ...
@overload
def iso(ms: None) -> None: ...
def iso(ms: int | None) -> str | None:
    """RFC 3339 UTC with a ``Z`` suffix and second precision (the milliseconds dropped); ``None``
    stays ``None``.

    An instant RFC 3339 cannot write (after 9999-12-31T23:59:59Z, or before year 1) is written
    as the nearest one it can, so an answer always holds a timestamp every client parses. Such
    an instant comes only from a record kept before its field was bounded (an expiry thousands
    of years away), and the last second of 9999 still says what that one meant: not in
    practice. Years below 1000 keep their four digits, as RFC 3339 asks."""
    if ms is None:
        return None
    if ms > LATEST_ISO_MS:
        ms = LATEST_ISO_MS
    elif ms < EARLIEST_ISO_MS:
        ms = EARLIEST_ISO_MS
    at = datetime.fromtimestamp(ms // 1000, UTC)
    return at.isoformat(timespec="seconds").removesuffix("+00:00") + "Z"
