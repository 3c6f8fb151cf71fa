"""The audit trails (``service.store.audit``), below HTTP: the order of recording (events of
one millisecond, and a clock that steps back), cursors, the type filter in one round trip, and
the bounds (retention, maximum, the key's expiry) applied by every write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis as redis_sync

from service.domain.audit_events import EventBatch
from service.domain.credentials import new_id
from service.domain.cursors import BadCursor, decode_event_cursor, encode_event_cursor
from service.store.audit import AuditStore
from service.store.keys import RedisKeys
from tests.support.redis import async_client

USER = "usr_0000000000000000000000"
TRAIL = f"fh:{{{USER}}}:audit"
T0 = 1_800_000_000_000
DAY = 86_400_000


@pytest.fixture
async def trail(redis_url: str, redis_mode: str) -> AsyncIterator[AuditStore]:
    client = await async_client(redis_url, redis_mode)
    yield AuditStore(client, RedisKeys("fh"))
    await client.aclose()


def event(at: int, kind: str = "logout", n: int = 0) -> dict[str, Any]:
    return {"id": new_id("evt"), "at": at, "type": kind, "actor": None, "n": n}


def batch(at: int, *events: dict[str, Any], keep: int = 90 * DAY, most: int = 1000) -> EventBatch:
    return EventBatch(at=at, retention_ms=keep, max_events=most, events=events)


async def test_order_is_the_order_of_recording_even_within_a_millisecond_or_backwards(
    trail: AuditStore,
) -> None:
    await trail.record(USER, batch(T0, event(T0, n=1), event(T0, n=2)))
    await trail.record(USER, batch(T0, event(T0, n=3)))
    await trail.record(USER, batch(T0 - 5, event(T0 - 5, n=4)))  # another instance's clock
    await trail.record(USER, batch(T0 + 1, event(T0 + 1, n=5)))

    page = await trail.page(USER, 10, None, None, since=0)

    assert [stored.event["n"] for stored in page.events] == [5, 4, 3, 2, 1]
    seqs = [stored.seq for stored in page.events]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == 5
    assert page.events[-1].seq == T0 * 1000
    assert page.next_cursor is None


async def test_a_cursor_continues_below_its_event_and_new_events_never_reach_later_pages(
    trail: AuditStore,
) -> None:
    for n in range(5):
        await trail.record(USER, batch(T0, event(T0, n=n)))
    first = await trail.page(USER, 2, None, None, since=0)
    assert [s.event["n"] for s in first.events] == [4, 3]
    assert first.next_cursor is not None
    await trail.record(USER, batch(T0, event(T0, n=99)))
    second = await trail.page(USER, 2, decode_event_cursor(first.next_cursor), None, since=0)
    assert [s.event["n"] for s in second.events] == [2, 1]
    assert second.next_cursor is not None
    third = await trail.page(USER, 2, decode_event_cursor(second.next_cursor), None, since=0)
    assert [s.event["n"] for s in third.events] == [0]
    assert third.next_cursor is None


async def test_the_type_filter_reads_past_many_other_events_in_one_call(
    trail: AuditStore,
) -> None:
    await trail.record(USER, batch(T0, event(T0, "key.created", n=1)))
    await trail.record(USER, batch(T0, *(event(T0) for _ in range(700))))
    await trail.record(USER, batch(T0, event(T0, "key.created", n=2)))
    await trail.record(USER, batch(T0, *(event(T0) for _ in range(10))))

    page = await trail.page(USER, 1, None, "key.created", since=0)
    assert [s.event["n"] for s in page.events] == [2]
    rest = await trail.page(USER, 1, decode_event_cursor(page.next_cursor or ""), "key.created", 0)
    assert [s.event["n"] for s in rest.events] == [1]
    assert rest.next_cursor is None
    # A prefix of a type is not that type.
    assert (await trail.page(USER, 10, None, "key", since=0)).events == []


async def test_every_write_drops_events_past_the_retention_and_the_key_expires_with_it(
    trail: AuditStore, redis_client: redis_sync.Redis
) -> None:
    await trail.record(USER, batch(T0, event(T0, n=1), keep=10 * DAY))
    assert redis_client.pexpiretime(TRAIL) == T0 + 10 * DAY
    await trail.record(USER, batch(T0 + 5 * DAY, event(T0 + 5 * DAY, n=2), keep=10 * DAY))
    assert redis_client.zcard(TRAIL) == 2
    later = T0 + 10 * DAY + 1
    await trail.record(USER, batch(later, event(later, n=3), keep=10 * DAY))
    assert redis_client.zcard(TRAIL) == 2
    assert redis_client.pexpiretime(TRAIL) == later + 10 * DAY
    # Reading never shows what is past the retention, even before a write drops it.
    page = await trail.page(USER, 10, None, None, since=T0 + 5 * DAY + 1)
    assert [s.event["n"] for s in page.events] == [3]


async def test_every_write_keeps_at_most_the_maximum_dropping_the_oldest(
    trail: AuditStore, redis_client: redis_sync.Redis
) -> None:
    for n in range(6):
        await trail.record(USER, batch(T0 + n, event(T0 + n, n=n), most=4))
    await trail.record(USER, batch(T0 + 9, *(event(T0 + 9, n=10 + n) for n in range(3)), most=4))
    page = await trail.page(USER, 10, None, None, since=0)
    assert [s.event["n"] for s in page.events] == [12, 11, 10, 5]
    assert redis_client.zcard(TRAIL) == 4


def test_cursors_round_trip_and_anything_else_is_refused() -> None:
    for seq in (1, T0 * 1000, 9_999_999_999_999_999):
        assert decode_event_cursor(encode_event_cursor(seq)) == seq
    for bad in ("", "MA", "MDE", "-1", "MQ==", "MQ=", "x" * 33, "é", "MTIzYQ", "MS4w"):
        with pytest.raises(BadCursor):
            decode_event_cursor(bad)
