"""Sizes and times on the server's public pages say what the dashboard's scripts say
(``static/js/bytes.js``'s ``size``, ``static/js/time.js``'s ``relative`` and hover), figures
taken from the scripts themselves (run in Node)."""

from __future__ import annotations

import pytest

from service.api.page_formats import date_text, relative, size_text, utc_text, when_html

MINUTE_MS = 60_000
DAY_MS = 24 * 60 * MINUTE_MS
NOW = 1_738_326_896_000  # 2025-01-31 12:34:56 UTC


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (1280, "1.3 KiB"),  # toFixed's tie goes up, where Python's format would go to even
        (10239, "10.0 KiB"),
        (10240, "10 KiB"),
        (10752, "11 KiB"),  # Math.round's half goes up
        (1536 * 1024, "1.5 MiB"),
        (5 * 1024**4, "5.0 TiB"),
        (2000 * 1024**4, "2000 TiB"),
    ],
)
def test_a_size_reads_as_the_dashboard_writes_it(size: int, text: str) -> None:
    assert size_text(size) == text


@pytest.mark.parametrize(
    ("offset_ms", "text"),
    [
        (0, "now"),
        (-29_000, "now"),
        (-30_000, "1 minute ago"),
        (-3 * MINUTE_MS, "3 minutes ago"),
        (-90 * MINUTE_MS, "2 hours ago"),
        (-23 * 60 * MINUTE_MS, "23 hours ago"),
        (-36 * 60 * MINUTE_MS, "2 days ago"),
        (90 * DAY_MS, "in 90 days"),
        (-365 * DAY_MS, "365 days ago"),  # days up to a year and a day, as time.js says
        (-400 * DAY_MS, "1 year ago"),
        (-800 * DAY_MS, "2 years ago"),
    ],
)
def test_how_long_ago_reads_as_the_dashboard_says_it(offset_ms: int, text: str) -> None:
    assert relative(NOW + offset_ms, NOW) == text


def test_a_time_is_a_time_element_with_the_exact_instant_on_hover() -> None:
    assert utc_text(NOW) == "2025-01-31 12:34:56 UTC"
    assert date_text(NOW) == "31 Jan 2025, 12:34 UTC"
    assert when_html(NOW - 3 * MINUTE_MS, NOW) == (
        '<time class="when" datetime="2025-01-31T12:31:56Z" title="2025-01-31 12:31:56 UTC">'
        '<span class="ago">3 minutes ago</span> <span class="local">31 Jan 2025, 12:31 UTC</span>'
        "</time>"
    )
