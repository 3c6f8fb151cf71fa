"""The aliases' store (``service.store.aliases``, ``alias_entries``, ``alias_views``), below HTTP:
a slug claimed once across accounts whatever its case, the view script's one atomic check and
count, what makes an entry unusable, giving a view back, the index's pages and a target's
aliases, the kill switch's walk, an account's deletion leaving no entry, and what an alias costs
in Redis's memory.

Each test runs on the fixtures' real Redis (a 3-master cluster under ``--redis cluster``) and on
fakeredis; the real run is the one that counts. The memory test runs on the single server only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import fakeredis
import pytest
from redis.asyncio import Redis

from service.config import Settings
from service.domain.aliases import PASSWORD, UNUSABLE, USABLE, index_member, new_alias_id
from service.domain.credentials import new_id
from service.domain.records import AliasRecord, FileRecord
from service.store.alias_entries import entry_fields
from service.store.pipelined import PipelinedRedis
from service.store.stores import Stores, open_stores
from tests.support.redis import STORE_TIMEOUT_SECONDS

NOW = 1_800_000_000_000
USER = "usr_0000000000000000000000"
OTHER = "usr_1111111111111111111111"


@pytest.fixture(params=["real-redis", "fakeredis"])
async def store(request: pytest.FixtureRequest, redis_mode: str) -> AsyncIterator[Stores]:
    client: Any
    if request.param == "fakeredis":
        client = fakeredis.FakeAsyncRedis(decode_responses=True)
    elif redis_mode == "cluster":
        from service.store.cluster import connect_cluster_client

        url = request.getfixturevalue("redis_url")
        client = connect_cluster_client(
            Settings(
                redis_url=url, redis_mode="cluster", redis_timeout_seconds=STORE_TIMEOUT_SECONDS
            )
        )
    else:
        client = Redis.from_url(request.getfixturevalue("redis_url"), decode_responses=True)
    stores = open_stores(client, "fh")
    for user in (USER, OTHER):
        assert await stores.users.add(user, f"{user}@example.com", "hash", NOW)
    yield stores
    await client.aclose()


async def a_file(store: Stores, user: str = USER) -> FileRecord:
    record = FileRecord(new_id("fil"), "f.txt", 1, "text/plain", "0" * 64, NOW)
    assert await store.files.add(user, record, 10_000)
    return record


def an_alias(target: str, slug: str, at: int = NOW, **fields: Any) -> AliasRecord:
    return AliasRecord(new_alias_id(at), slug, target, at, **fields)


async def made(
    store: Stores, user: str, record: AliasRecord, password_hash: str | None = None
) -> AliasRecord:
    """An alias made as the policy makes one: the account's step, the entry, the last check."""
    outcome, off = await store.aliases.add(user, record, 1000, NOW)
    assert outcome == 1
    assert await store.aliases.claim(user, record, password_hash, off)
    value = index_member(record.target_id, record.slug)
    assert (await store.aliases.confirm(user, value, record.created_at))[0] == 1
    return record


# -- slugs -------------------------------------------------------------------------------------


async def test_of_one_slug_asked_for_at_once_in_any_case_on_two_accounts_one_entry_is_made(
    store: Stores,
) -> None:
    mine, theirs = await a_file(store), await a_file(store, OTHER)
    records = [
        (USER if n % 2 else OTHER, an_alias((mine if n % 2 else theirs).id, spelling))
        for n, spelling in enumerate(["Report", "REPORT", "report", "rePort"] * 4)
    ]
    claimed = await asyncio.gather(
        *(store.aliases.claim(user, record, None, False) for user, record in records)
    )
    assert claimed.count(True) == 1
    assert await store.redis.exists("fh:alias:report") == 1


async def test_the_accounts_step_refuses_a_gone_account_the_bound_and_a_target_not_live(
    store: Stores,
) -> None:
    file = await a_file(store)
    assert (await store.aliases.add(USER, an_alias(file.id, "one"), 1, NOW))[0] == 1
    assert (await store.aliases.add(USER, an_alias(file.id, "two"), 1, NOW))[0] == -2
    missing = new_id("fil")
    assert (await store.aliases.add(USER, an_alias(missing, "three"), 10, NOW))[0] == -3
    assert (await store.aliases.add(USER, an_alias(new_id("fld"), "four"), 10, NOW))[0] == -3
    await store.redis.delete(f"fh:{{{USER}}}:user")
    assert (await store.aliases.add(USER, an_alias(file.id, "five"), 10, NOW))[0] == -1


# -- the public path's script ------------------------------------------------------------------


async def test_of_many_views_at_once_no_more_than_max_views_are_counted(store: Stores) -> None:
    file = await a_file(store)
    await made(store, USER, an_alias(file.id, "limited", max_views=5))
    seen = await asyncio.gather(
        *(store.alias_views.view("limited", NOW, count=True) for _ in range(40))
    )
    assert [view.status for view, _ in seen].count(USABLE) == 5
    assert sorted(view.views for view, _ in seen if view.status == USABLE) == [1, 2, 3, 4, 5]
    assert await store.redis.hget("fh:alias:limited", "v") == "5"


async def test_what_makes_an_entry_unusable_and_what_a_password_needs(store: Stores) -> None:
    file = await a_file(store)
    await made(store, USER, an_alias(file.id, "expiring", expires_at=NOW + 1000))
    await made(store, USER, an_alias(file.id, "off", enabled=False))
    protected = await made(store, USER, an_alias(file.id, "locked"), password_hash="$2b$04$h")
    views = store.alias_views
    assert (await views.view("expiring", NOW + 999, count=False))[0].status == USABLE
    assert (await views.view("expiring", NOW + 1000, count=False))[0].status == UNUSABLE
    assert (await views.view("off", NOW, count=True))[0].status == UNUSABLE
    assert (await views.view("nothing-here", NOW, count=True))[0].status == UNUSABLE
    asked, _ = await views.view("locked", NOW, count=True)
    assert (asked.status, asked.password_hash, asked.alias_id) == (
        PASSWORD,
        "$2b$04$h",
        protected.id,
    )
    assert (await views.view("locked", NOW, count=True, password_hash="other"))[
        0
    ].status == PASSWORD
    right, _ = await views.view("locked", NOW, count=True, password_hash="$2b$04$h")
    assert (right.status, right.views) == (USABLE, 1)
    wrong_alias = await views.view("locked", NOW, count=True, alias_id=new_id("als"))
    assert wrong_alias[0].status == UNUSABLE
    for field in ("k", "z"):  # switched off by the account, moving to another slug
        await store.redis.hset("fh:alias:expiring", field, "1")
        assert (await views.view("expiring", NOW, count=False))[0].status == UNUSABLE
        await store.redis.hdel("fh:alias:expiring", field)


async def test_a_view_given_back_never_goes_below_zero_nor_to_another_alias(store: Stores) -> None:
    file = await a_file(store)
    record = await made(store, USER, an_alias(file.id, "given", max_views=1))
    seen, _ = await store.alias_views.view("given", NOW, count=True)
    assert seen.status == USABLE
    assert (await store.alias_views.view("given", NOW, count=True))[0].status == UNUSABLE
    await store.alias_views.give_back("given", new_id("als"))  # another alias's: nothing
    assert await store.redis.hget("fh:alias:given", "v") == "1"
    await store.alias_views.give_back("given", record.id)
    await store.alias_views.give_back("given", record.id)
    assert await store.redis.hget("fh:alias:given", "v") == "0"
    assert (await store.alias_views.view("given", NOW, count=True))[0].status == USABLE


async def test_an_address_takes_from_its_own_bucket_alone(store: Stores) -> None:
    file = await a_file(store)
    await made(store, USER, an_alias(file.id, "rated"))
    rate = (1_000_000, 2_000_000)  # one a second, bursts of two
    waits = [
        (await store.alias_views.view("rated", NOW, count=False, address="192.0.2.1", rate=rate))[1]
        for _ in range(3)
    ]
    assert waits[:2] == [0, 0] and waits[2] > 0
    other = await store.alias_views.view("rated", NOW, count=False, address="192.0.2.2", rate=rate)
    assert other[1] == 0
    assert not await store.redis.keys("fh:rate:{fh:key:*")  # no credential's bucket touched


async def test_over_a_hot_connection_the_view_and_the_take_go_together_scripts_or_not(
    redis_mode: str, redis_url: str
) -> None:
    if redis_mode == "cluster":
        pytest.skip("a cluster's hot connections send the two keys' scripts to their own nodes")
    client = Redis.from_url(redis_url, decode_responses=True)
    hot = PipelinedRedis(redis_url, 1.0)
    try:
        store = open_stores(client, "fh", hot)
        assert await store.users.add(USER, f"{USER}@example.com", "hash", NOW)
        file = await a_file(store)
        await made(store, USER, an_alias(file.id, "hot-rated", max_views=2))
        rate = (1_000_000, 2_000_000)
        await client.script_flush()  # the first sends find no script and send their source
        seen = [
            await store.alias_views.view(
                "hot-rated", NOW, count=True, address="192.0.2.9", rate=rate
            )
            for _ in range(3)
        ]
        statuses = [(view.status, view.views) for view, _ in seen]
        assert statuses == [(USABLE, 1), (USABLE, 2), (UNUSABLE, 0)]
        assert [wait for _, wait in seen][:2] == [0, 0] and seen[2][1] > 0
    finally:
        await hot.aclose()
        await client.aclose()


# -- the index ---------------------------------------------------------------------------------


async def test_pages_are_newest_first_and_a_cursor_holds_through_ties_and_deletions(
    store: Stores,
) -> None:
    file = await a_file(store)
    records = [
        await made(store, USER, an_alias(file.id, f"slug-{n}", at=NOW + n // 3)) for n in range(9)
    ]
    seen: list[str] = []
    after = None
    while True:
        page, after = await store.aliases.page(USER, 2, after)
        seen += [item.entry.record.id for item in page if item.entry is not None]
        if seen and len(seen) == 4:  # one of the next page's is deleted between pages
            gone = next(r for r in records if r.id not in seen)
            assert await store.aliases.entries.delete(gone.slug, USER, gone.id)
            records.remove(gone)
            await store.aliases.remove_members(
                USER, [(index_member(gone.target_id, gone.slug), gone.created_at)]
            )
        if after is None:
            break
    assert len(seen) == len(set(seen)) == len(records)
    times = [next(r.created_at for r in records if r.id == i) for i in seen]
    assert times == sorted(times, reverse=True)


async def test_an_id_finds_its_alias_and_a_target_its_aliases(store: Stores) -> None:
    first, second = await a_file(store), await a_file(store)
    one = await made(store, USER, an_alias(first.id, "one"))
    two = await made(store, USER, an_alias(first.id, "two"))
    await made(store, USER, an_alias(second.id, "three"))
    found = await store.aliases.find(USER, two.id)
    assert found is not None and found.entry is not None and found.entry.record.slug == "two"
    assert await store.aliases.find(OTHER, two.id) is None
    assert await store.aliases.find(USER, new_alias_id(NOW)) is None
    targets = await store.aliases.members_of(USER, [first.id])
    assert sorted(item.entry.record.id for item in targets if item.entry) == sorted(
        [one.id, two.id]
    )


async def test_the_kill_switch_walk_sets_and_clears_only_the_accounts_entries(
    store: Stores,
) -> None:
    mine, theirs = await a_file(store), await a_file(store, OTHER)
    for n in range(7):
        await made(store, USER, an_alias(mine.id, f"mine-{n}"))
    await made(store, OTHER, an_alias(theirs.id, "theirs"))
    await store.aliases.switch_all(USER, True, batch=3)
    for n in range(7):
        assert (await store.alias_views.view(f"mine-{n}", NOW, count=False))[0].status == UNUSABLE
    assert (await store.alias_views.view("theirs", NOW, count=False))[0].status == USABLE
    await store.aliases.switch_all(USER, False, batch=3)
    assert (await store.alias_views.view("mine-6", NOW, count=False))[0].status == USABLE


async def test_deleting_an_account_leaves_no_alias_entry_nor_index(store: Stores) -> None:
    mine, theirs = await a_file(store), await a_file(store, OTHER)
    for n in range(5):
        await made(store, USER, an_alias(mine.id, f"mine-{n}"))
    await made(store, OTHER, an_alias(theirs.id, "theirs"))
    await store.aliases.expect_switch(USER)
    await store.users.delete(USER, f"{USER}@example.com")
    for n in range(5):
        assert not await store.redis.exists(f"fh:alias:mine-{n}")
    assert await store.redis.exists("fh:alias:theirs")
    assert not await store.redis.exists(f"fh:{{{USER}}}:aliases")
    assert not await store.redis.sismember("fh:alias-switches", USER)


# -- memory ------------------------------------------------------------------------------------

ALIASES = 100_000
PER_ACCOUNT = 1_000


async def settled_memory(client: Redis) -> int:
    """The server's used memory once it has nothing left to free in the background (the previous
    test's flush is freed lazily, later on a busy machine, and would count against these)."""
    deadline = time.monotonic() + 30
    while (memory := await client.info("memory"))["lazyfree_pending_objects"]:
        assert time.monotonic() < deadline, "the server never finished freeing"
        await asyncio.sleep(0.05)
    return int(memory["used_memory"])


async def test_an_alias_costs_less_than_300_bytes_of_redis_memory(
    redis_url: str, redis_mode: str
) -> None:
    """100,000 aliases as the service writes them (an entry with its views counted, a member of
    its account's index), 1,000 per account (so each index is a skiplist, not a listpack): the
    server's used memory grows by less than 300 bytes per alias. The figure is printed."""
    if redis_mode == "cluster":
        pytest.skip("measures one server's memory")
    client = Redis.from_url(redis_url, decode_responses=True)
    stores = open_stores(client, "fh")
    try:
        before = await settled_memory(client)
        for account in range(ALIASES // PER_ACCOUNT):
            user = f"usr_{account:022d}"
            async with client.pipeline(transaction=False) as pipe:
                for n in range(PER_ACCOUNT):
                    record = an_alias(new_id("fil"), new_id("als")[4:16])
                    fields = entry_fields(user, record, None, False)
                    fields["v"] = n % 1000
                    pipe.hset(stores.keys.alias_entry(record.slug.lower()), mapping=fields)
                    pipe.zadd(
                        stores.keys.account_aliases(user),
                        {index_member(record.target_id, record.slug): record.created_at},
                    )
                await pipe.execute()
        after = await settled_memory(client)
    finally:
        await client.aclose()
    per_alias = (after - before) / ALIASES
    print(f"\nRedis memory per alias: {per_alias:.1f} bytes")
    assert per_alias < 300
