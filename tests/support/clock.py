"""The injectable clock the app runs on in tests, and the times the service renders from it."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class FakeClock:
    """Starts at the real time and moves only when a test says so."""

    def __init__(self) -> None:
        self.ms = time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        return self.ms

    def advance(self, *, days: float = 0, hours: float = 0, seconds: float = 0) -> None:
        self.ms += int((days * 86400 + hours * 3600 + seconds) * 1000)

    def catch_up(self) -> int:
        """Move to the real time, for a test whose deadlines Redis also keeps by its own clock:
        a deadline set from a clock left behind by the test's setup is already nearer in real
        time than the test means."""
        self.ms = max(self.ms, time.time_ns() // 1_000_000)
        return self.ms


def parse_iso(value: str) -> datetime:
    assert isinstance(value, str) and value.endswith("Z"), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def at(clock: FakeClock) -> datetime:
    """The clock's current time, truncated to the second as the service renders it."""
    return datetime.fromtimestamp(clock.now_ms() // 1000, UTC)


def iso_of(clock: FakeClock) -> str:
    """The clock's current time as the service renders it (UTC, second precision)."""
    return datetime.fromtimestamp(clock.now_ms() / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
