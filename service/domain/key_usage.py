"""What a key's use is counted as: a worker's counts of one key between two flushes, the UTC
days they are kept by, and what its owner is shown (the last ``USAGE_DAYS`` days)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

# The days a key's owner sees, today last; the counts are kept a few days longer so that a day
# is never missing from the window for having expired a moment early.
USAGE_DAYS = 30
KEPT_DAYS = 35
KEPT_MS = KEPT_DAYS * 24 * 3600 * 1000


class KeyUseCount(NamedTuple):
    """One key's requests counted by a worker since its last flush: all of them, those of them
    refused, and the address of the last one (None when the worker did not know it)."""

    key_id: str
    requests: int
    refused: int
    address: str | None


class UsageDay(NamedTuple):
    date: str  # YYYY-MM-DD, UTC
    requests: int
    refused: int


@dataclass(frozen=True, slots=True)
class KeyUsageRecord:
    """A key's use as its owner sees it: ``USAGE_DAYS`` days, oldest first, zeros included;
    when and from where it was last used, None when that is not known."""

    days: tuple[UsageDay, ...]
    last_used_at: int | None
    last_used_ip: str | None


def day_of(ms: int) -> str:
    """The UTC day an instant falls on, as ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def days_up_to(ms: int, count: int = USAGE_DAYS) -> list[str]:
    """The ``count`` UTC days that end with the one ``ms`` falls on, oldest first."""
    today = datetime.fromtimestamp(ms / 1000, UTC).date()
    return [(today - timedelta(days=back)).isoformat() for back in range(count - 1, -1, -1)]
