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


@overload
def iso(ms: int) -> str: ...
@overload
def iso(ms: None) -> None: ...
def iso(ms: int | None) -> str | None:
    """ISO 8601 UTC with a ``Z`` suffix and second precision; ``None`` stays ``None``."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
