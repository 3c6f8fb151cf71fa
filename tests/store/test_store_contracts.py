"""One contract per store protocol (``service.store.protocols``), run on every implementation:
the Redis store on the fixtures' server (a Redis Cluster under ``--redis cluster``) and the
in-memory one the policy's unit tests use (tests/support/memory_stores.py). A policy test on
the in-memory store is worth what this suite proves: that it answers as Redis does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from service.store.protocols import CounterStore
from service.store.stores import open_stores
from tests.support.memory_stores import MemoryCounters
from tests.support.redis import async_client

WINDOW_MS = 60_000


@pytest.fixture(params=["redis", "memory"])
async def counters(request: pytest.FixtureRequest) -> AsyncIterator[CounterStore]:
    if request.param == "memory":
        yield MemoryCounters()
        return
    url, mode = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_mode")
    client = await async_client(url, mode)
    try:
        yield open_stores(client, "contract").counters
    finally:
        await client.aclose()


async def test_a_counter_reserves_up_to_its_limit_then_says_how_long_the_window_has_left(
    counters: CounterStore,
) -> None:
    email = counters.login_failures_by_email("contract-a")
    address = counters.login_failures_by_address("192.0.2.1")
    both = [(email, 2), (address, 3)]

    assert await counters.reserve(both, WINDOW_MS) == [0, 0]
    assert await counters.reserve(both, WINDOW_MS) == [0, 0]
    refused, reserved = await counters.reserve(both, WINDOW_MS)

    assert 0 < refused <= WINDOW_MS and reserved == 0  # the email's refused, the address counted
    assert await counters.reserve_one(address, 3, WINDOW_MS) > 0  # a refusal counted nothing


async def test_a_release_gives_back_one_never_below_zero_and_a_clear_starts_over(
    counters: CounterStore,
) -> None:
    counter = counters.alias_guesses_by_alias("als_contract")
    assert await counters.reserve_one(counter, 2, WINDOW_MS) == 0
    assert await counters.reserve_one(counter, 2, WINDOW_MS) == 0

    await counters.release([counter, counter, counter])  # one more than was reserved

    assert await counters.reserve_one(counter, 2, WINDOW_MS) == 0
    assert await counters.reserve_one(counter, 2, WINDOW_MS) == 0
    assert await counters.reserve_one(counter, 2, WINDOW_MS) > 0
    await counters.clear(counter)
    assert await counters.reserve_one(counter, 2, WINDOW_MS) == 0


async def test_each_kind_of_counter_is_a_counter_of_its_own(counters: CounterStore) -> None:
    names = {
        counters.login_failures_by_email("x"),
        counters.login_failures_by_address("x"),
        counters.leak_reports_by_address("x"),
        counters.alias_guesses_by_alias_address("x", "x"),
        counters.alias_guesses_by_alias("x"),
        counters.alias_guesses_by_address("x"),
    }
    assert len(names) == 6
    for name in names:
        assert await counters.reserve_one(name, 1, WINDOW_MS) == 0


async def test_concurrent_reservations_never_pass_the_limit(counters: CounterStore) -> None:
    counter = counters.leak_reports_by_address("198.51.100.7")
    replies = await asyncio.gather(
        *(counters.reserve_one(counter, 5, WINDOW_MS) for _ in range(40))
    )
    assert replies.count(0) == 5
