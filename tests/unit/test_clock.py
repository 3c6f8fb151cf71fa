"""Timestamps as the API writes them (``service.clock.iso``): RFC 3339 in UTC to the second, for
every instant a record may hold, including one no bound keeps out any more."""

from __future__ import annotations

from datetime import datetime

import pytest

from service.clock import iso


@pytest.mark.parametrize(
    ("ms", "written"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1_738_326_896_999, "2025-01-31T12:34:56Z"),  # the milliseconds are dropped
        (-1, "1969-12-31T23:59:59Z"),  # before the epoch too: down to the second it is in
        (None, None),
    ],
)
def test_an_instant_is_written_in_utc_to_the_second(ms: int | None, written: str | None) -> None:
    assert iso(ms) == written


@pytest.mark.parametrize(
    "ms",
    [
        253_402_300_799_999,  # 9999-12-31T23:59:59.999Z
        253_402_300_800_000,  # the first instant of year 10000
        1_000_000_000_000 * 1000 + 1_738_326_896_000,  # an alias's expiry some 31,700 years on
        10**40,
    ],
)
def test_an_instant_past_year_9999_is_written_as_its_last_second(ms: int) -> None:
    assert iso(ms) == "9999-12-31T23:59:59Z"


@pytest.mark.parametrize(
    ("ms", "written"),
    [
        (-62_135_596_800_000, "0001-01-01T00:00:00Z"),
        (-(10**40), "0001-01-01T00:00:00Z"),  # before year 1: its first second
        (-31_536_000_000_000, "0970-08-31T00:00:00Z"),
    ],
)
def test_a_year_before_1000_keeps_its_four_digits(ms: int, written: str) -> None:
    assert iso(ms) == written
    assert datetime.fromisoformat(written).year < 1000
