"""A worker's key counts (``service.auth.key_usage``) on an in-memory store: what a flush sends,
in one write, grouped by account; nothing when nothing was counted; a failed flush's counts
kept for the next; the owner's read of 30 days, and another account's key not found."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping

import pytest

from service.auth.key_usage import KeyUsage
from service.domain.key_usage import KeyUsageRecord, KeyUseCount, UsageDay, day_of, days_up_to
from service.errors import ApiError
from tests.support.clock import FakeClock


class MemoryKeyUsage:
    """The store's side: each flush's write, and failures on demand."""

    def __init__(self) -> None:
        self.writes: list[tuple[dict[str, list[KeyUseCount]], int]] = []
        self.failing = False
        self.totals: dict[tuple[str, str, str], tuple[int, int]] = {}

    async def add(self, counts: Mapping[str, Iterable[KeyUseCount]], now: int) -> None:
        if self.failing:
            raise ConnectionError("the store is away")
        write = {user_id: list(of_keys) for user_id, of_keys in counts.items()}
        self.writes.append((write, now))
        for user_id, of_keys in write.items():
            for count in of_keys:
                at = (user_id, count.key_id, day_of(now))
                requests, refused = self.totals.get(at, (0, 0))
                self.totals[at] = (requests + count.requests, refused + count.refused)

    async def read(self, user_id: str, key_id: str, days: list[str]) -> KeyUsageRecord | None:
        if user_id != "usr_alice":
            return None
        return KeyUsageRecord(
            tuple(UsageDay(day, *self.totals.get((user_id, key_id, day), (0, 0))) for day in days),
            None,
            None,
        )

    async def forget(self, user_id: str, key_ids: Iterable[str], now: int) -> None:
        raise AssertionError("not the counter's to forget")


ALICE_KEY = "key_" + "a" * 22
BOB_KEY = "key_" + "b" * 22


async def test_a_flush_sends_each_accounts_counts_in_one_write() -> None:
    store, clock = MemoryKeyUsage(), FakeClock()
    usage = KeyUsage(store, clock, flush_seconds=1.0)
    await usage.flush()
    assert store.writes == []  # nothing counted, nothing sent
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        usage.used("usr_alice", ALICE_KEY, address)
    usage.refused("usr_alice", ALICE_KEY)
    usage.used("usr_bob", BOB_KEY, None)
    await usage.flush()
    assert store.writes == [
        (
            {
                "usr_alice": [KeyUseCount(ALICE_KEY, 3, 1, "10.0.0.3")],
                "usr_bob": [KeyUseCount(BOB_KEY, 1, 0, None)],
            },
            clock.now_ms(),
        )
    ]
    await usage.flush()
    assert len(store.writes) == 1  # counted once, sent once


async def test_a_failed_flush_keeps_its_counts_for_the_next() -> None:
    store, clock = MemoryKeyUsage(), FakeClock()
    usage = KeyUsage(store, clock, flush_seconds=1.0)
    usage.used("usr_alice", ALICE_KEY, "10.0.0.1")
    usage.refused("usr_alice", ALICE_KEY)
    store.failing = True
    await usage.flush()  # logged, not raised
    usage.used("usr_alice", ALICE_KEY, "10.0.0.9")
    store.failing = False
    await usage.flush()
    assert store.writes == [
        ({"usr_alice": [KeyUseCount(ALICE_KEY, 2, 1, "10.0.0.9")]}, clock.now_ms())
    ]


async def test_the_owner_reads_thirty_days_and_no_one_else_does() -> None:
    store, clock = MemoryKeyUsage(), FakeClock()
    usage = KeyUsage(store, clock, flush_seconds=1.0)
    usage.used("usr_alice", ALICE_KEY, "10.0.0.1")
    await usage.stop()  # never started: just the last flush
    record = await usage.usage("usr_alice", ALICE_KEY)
    assert [day.date for day in record.days] == days_up_to(clock.now_ms())
    assert len(record.days) == 30 and record.days[-1] == UsageDay(day_of(clock.now_ms()), 1, 0)
    for user_id, key_id in (("usr_bob", ALICE_KEY), ("usr_alice", "not a key id")):
        with pytest.raises(ApiError) as refused:
            await usage.usage(user_id, key_id)
        assert refused.value.code == "key_not_found"


class LosesCancellation(MemoryKeyUsage):
    """A store whose client swallows a cancellation that lands while it writes, as a Redis
    client's timeout may: the write ends as if nothing had happened."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()

    async def add(self, counts: Mapping[str, Iterable[KeyUseCount]], now: int) -> None:
        self.writing.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.2)
        await super().add(counts, now)


async def test_a_stop_ends_the_flushing_even_if_the_store_loses_its_cancellation() -> None:
    store = LosesCancellation()
    usage = KeyUsage(store, FakeClock(), 0.01)  # type: ignore[arg-type]
    usage.start()
    usage.used("usr_alice", ALICE_KEY, None)
    await asyncio.wait_for(store.writing.wait(), 5)
    stopping = asyncio.ensure_future(usage.stop())
    # Waited on, not cancelled (the stop itself would take its cancellation for the flusher's).
    done, _ = await asyncio.wait({stopping}, timeout=5)
    flusher = usage._flusher
    if flusher is not None:  # the loop never ended: end it, to fail with the assertion below
        flusher.cancel()
        await asyncio.gather(stopping, return_exceptions=True)
    assert stopping in done, "stop waited on a flushing loop that never ends"
