"""The storage layer on its own, without HTTP.

Each test runs twice: on the real Redis server the fixtures start, and on fakeredis. The real run
is the one that counts; the fakeredis run shows the store's contract is plain Redis semantics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import fakeredis
import pytest

from service.domain.outcomes import GONE_LEAKED, GONE_REVOKED, AccountGone, KeyGone
from service.domain.records import RateLimit, RateVerdict
from service.errors import CorruptRecord
from service.store.fields import KEY_EXPIRED_GRACE_MS, KEY_GONE_MS, SESSION_EXPIRED_GRACE_MS
from service.store.keys import RedisKeys
from service.store.slots import key_slot
from service.store.stores import Stores, open_stores
from tests.support.redis import async_client

NOW = 1_800_000_000_000
DAY = 86_400_000
DIGEST = "ab" * 32


@pytest.fixture(params=["real-redis", "fakeredis"])
async def store(request: pytest.FixtureRequest, redis_mode: str) -> AsyncIterator[Stores]:
    client: Any
    if request.param == "real-redis":
        client = await async_client(request.getfixturevalue("redis_url"), redis_mode)
    else:
        client = fakeredis.FakeAsyncRedis(decode_responses=True)
    store = open_stores(client, "t")
    # Sessions and keys are made only for a user that exists.
    for user_id in ("usr_a", "usr_b"):
        assert await store.users.add(user_id, f"{user_id}@example.com", "hash", NOW)
    yield store
    await client.aclose()


async def add_key(
    store: Stores,
    key_id: str,
    *,
    digest: str = DIGEST,
    created: int = NOW,
    expires: int = NOW + 30 * DAY,
    limit: int = 100,
    user: str = "usr_a",
) -> bool:
    return await store.api_keys.add(
        user_id=user,
        key_id=key_id,
        secret_digest=digest,
        name=f"name {key_id}",
        key_prefix="fhk_abcdefgh...",
        permissions=5,
        created_at=created,
        expires_at=expires,
        max_active=limit,
    )


def test_every_account_key_shares_one_cluster_slot() -> None:
    keys = RedisKeys("fh")
    account = [
        keys.user("usr_a"),
        keys.account_keys("usr_a"),
        keys.account_key_expiry("usr_a"),
        keys.account_key_last_used("usr_a"),
        keys.account_sessions("usr_a"),
        keys.account_files("usr_a"),
    ]
    assert all("{usr_a}" in name for name in account)
    assert keys.key_entry(DIGEST) == f"fh:key:{DIGEST}"
    assert keys.session_entry(DIGEST) == f"fh:session:{DIGEST}"


async def test_a_key_is_found_by_digest_with_its_user_permissions_and_expiry(store) -> None:
    assert await add_key(store, "key_1")
    entry = await store.lookup.find_api_key(DIGEST)
    assert entry is not None
    assert (entry.user_id, entry.key_id, entry.permissions) == ("usr_a", "key_1", 5)
    assert entry.expires_at == NOW + 30 * DAY
    assert await store.lookup.find_api_key("cd" * 32) is None


async def test_the_digest_entry_expires_in_redis_a_grace_after_the_key_expiry(store) -> None:
    await add_key(store, "key_1")
    expected = NOW + 30 * DAY + KEY_EXPIRED_GRACE_MS
    assert await store.redis.pexpiretime(store.keys.key_entry(DIGEST)) == expected


async def test_revocation_deletes_the_digest_entry_and_the_listing(store) -> None:
    await add_key(store, "key_1")
    assert await store.api_keys.revoke("usr_a", "key_1", NOW)
    assert await store.redis.exists(store.keys.key_entry(DIGEST)) == 0
    assert await store.api_keys.list("usr_a", NOW) == []
    assert not await store.api_keys.revoke("usr_a", "key_1", NOW)


@pytest.mark.parametrize("reason", [GONE_REVOKED, GONE_LEAKED])
async def test_a_revoked_secret_is_remembered_as_revoked_for_a_bounded_time(
    store: Stores, reason: str
) -> None:
    await add_key(store, "key_1")
    assert await store.api_keys.revoke("usr_a", "key_1", NOW, reason=reason)
    limited = open_stores(store.redis, "t", rate_limit=RateLimit(per_second=1, burst=2))
    for lookup in (store.lookup, limited.lookup):  # a plain read, and the script that takes
        with pytest.raises(KeyGone) as gone:
            await lookup.find_api_key(DIGEST, NOW)
        assert (gone.value.reason, gone.value.at) == (reason, NOW)
    record = store.keys.key_gone(DIGEST)
    assert await store.redis.pexpiretime(record) == NOW + KEY_GONE_MS
    # Nothing is taken for a revoked secret: its bucket is never made.
    bucket = limited.keys.rate_bucket(limited.keys.key_entry(DIGEST))
    assert await store.redis.exists(bucket) == 0
    # Once forgotten, it is any unknown secret.
    await store.redis.delete(record)
    assert await store.lookup.find_api_key(DIGEST, NOW) is None


def test_a_secrets_key_gone_record_is_in_its_entrys_cluster_slot() -> None:
    keys = RedisKeys("fh")
    for digest in (DIGEST, "0" * 64, "f1" * 32):
        record, entry = keys.key_gone(digest), keys.key_entry(digest)
        assert key_slot(record.encode()) == key_slot(entry.encode())
        assert record.startswith("fh:") and digest in record


async def test_an_expired_key_removed_by_its_owner_is_not_remembered_as_revoked(store) -> None:
    await add_key(store, "key_1", expires=NOW + DAY)
    assert not await store.api_keys.revoke("usr_a", "key_1", NOW + 2 * DAY)
    assert await store.redis.exists(store.keys.key_gone(DIGEST)) == 0


@pytest.mark.parametrize("record", ["revoked", "revoked:x", "stolen:1", ":1", "revoked:-1"])
async def test_a_damaged_key_gone_record_fails_closed(store: Stores, record: str) -> None:
    await store.redis.set(store.keys.key_gone(DIGEST), record)
    with pytest.raises(CorruptRecord):
        await store.lookup.find_api_key(DIGEST, NOW)


async def test_another_account_cannot_revoke_a_key(store) -> None:
    await add_key(store, "key_1")
    assert not await store.api_keys.revoke("usr_b", "key_1", NOW)
    assert await store.lookup.find_api_key(DIGEST) is not None


async def test_the_active_key_limit_ignores_expired_keys(store) -> None:
    assert await add_key(store, "key_1", digest="01" * 32, expires=NOW + DAY, limit=2)
    assert await add_key(store, "key_2", digest="02" * 32, limit=2)
    assert not await add_key(store, "key_3", digest="03" * 32, limit=2)
    later = NOW + 2 * DAY
    assert await add_key(
        store, "key_3", digest="03" * 32, created=later, expires=later + DAY, limit=2
    )
    listed = await store.api_keys.list("usr_a", later)
    assert [record.id for record in listed] == ["key_3", "key_2"]


async def test_last_use_is_recorded_only_for_listed_keys(store) -> None:
    await add_key(store, "key_1")
    await store.api_keys.touch("usr_a", "key_1", NOW + 5)
    assert (await store.api_keys.list("usr_a", NOW))[0].last_used_at == NOW + 5
    await store.api_keys.revoke("usr_a", "key_1", NOW)
    await store.api_keys.touch("usr_a", "key_1", NOW + 9)
    assert await store.redis.hgetall(store.keys.account_key_last_used("usr_a")) == {}


async def test_a_damaged_key_entry_is_refused_not_guessed(store) -> None:
    await store.redis.hset(
        store.keys.key_entry(DIGEST), mapping={"u": "usr_a", "k": "key_1", "p": "lots", "e": "1"}
    )
    with pytest.raises(CorruptRecord):
        await store.lookup.find_api_key(DIGEST)
    await store.redis.hset(store.keys.key_entry(DIGEST), mapping={"p": "1"})
    await store.redis.hdel(store.keys.key_entry(DIGEST), "u")
    with pytest.raises(CorruptRecord):
        await store.lookup.find_api_key(DIGEST)


async def damage_field(store: Stores, entry: str, field: str, value: str | None) -> None:
    """Set one field of a stored entry to ``value``, or delete it for None."""
    if value is None:
        await store.redis.hdel(entry, field)
    else:
        await store.redis.hset(entry, field, value)


@pytest.mark.parametrize(
    "damage",
    [{"e": "soon"}, {"e": None}, {"p": None}, {"p": "-1"}, {"p": "4096"}, {"g": "later"}],
)
async def test_a_key_entry_with_a_damaged_number_is_refused(store, damage) -> None:
    entry = {"u": "usr_a", "k": "key_1", "p": "1", "e": str(NOW + DAY)}
    await store.redis.hset(store.keys.key_entry(DIGEST), mapping=entry)
    assert (await store.lookup.find_api_key(DIGEST)).permissions == 1
    for field, value in damage.items():
        await damage_field(store, store.keys.key_entry(DIGEST), field, value)

    with pytest.raises(CorruptRecord):
        await store.lookup.find_api_key(DIGEST)


@pytest.mark.parametrize("field", ["c", "a", "i"])
@pytest.mark.parametrize("value", [None, "", "noon"])
async def test_a_session_entry_with_a_damaged_number_is_refused(store, field, value) -> None:
    await store.sessions.add(DIGEST, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    assert (await store.lookup.find_session(DIGEST)).idle_deadline == NOW + DAY
    await damage_field(store, store.keys.session_entry(DIGEST), field, value)

    with pytest.raises(CorruptRecord):
        await store.lookup.find_session(DIGEST)


async def test_session_renewal_never_revives_a_logged_out_session(store) -> None:
    await store.sessions.add(DIGEST, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    await store.sessions.renew(DIGEST, NOW + 2 * DAY, NOW + 2 * DAY)
    assert (await store.lookup.find_session(DIGEST)).idle_deadline == NOW + 2 * DAY
    await store.sessions.remove(DIGEST, "usr_a")
    await store.sessions.renew(DIGEST, NOW + 3 * DAY, NOW + 3 * DAY)
    assert await store.lookup.find_session(DIGEST) is None
    assert await store.redis.exists(store.keys.session_entry(DIGEST)) == 0


async def test_deleting_a_user_ends_sessions_and_keys_and_frees_the_email(store) -> None:
    assert not await store.users.add("usr_x", "usr_a@example.com", "hash", NOW)
    await add_key(store, "key_1")
    await store.sessions.add("ef" * 32, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    await store.users.delete("usr_a", "usr_a@example.com")
    assert await store.lookup.find_api_key(DIGEST) is None
    assert await store.lookup.find_session("ef" * 32) is None
    assert await store.users.find_id("usr_a@example.com") is None
    assert await store.redis.keys("t:{usr_a}:*") == []
    assert await store.users.add("usr_c", "usr_a@example.com", "hash", NOW)


# -- creation and deletion exclude each other (see "Creating a credential" in store.sessions) -


async def test_no_session_or_key_is_created_for_a_user_that_is_gone(store) -> None:
    await store.users.delete("usr_a", "usr_a@example.com")

    with pytest.raises(AccountGone):
        await store.sessions.add("ef" * 32, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    with pytest.raises(AccountGone):
        await add_key(store, "key_1")

    assert await store.lookup.find_session("ef" * 32) is None
    assert await store.lookup.find_api_key(DIGEST) is None
    assert await store.redis.keys("t:{usr_a}:*") == []  # nothing written at all


@pytest.mark.parametrize("kind", ["session", "key"])
async def test_a_creation_the_deletion_overtakes_after_the_index_is_undone(
    store: Stores, kind: str
) -> None:
    """The deletion runs completely between steps (a) and (b) of a creation: it cannot have
    seen the entry, so step (c) must refuse the creation and remove what it wrote."""
    real_pipeline = store.redis.pipeline
    deleted = False

    def pipeline_that_lets_the_deletion_in_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal deleted
        if kwargs.get("transaction") and not deleted:  # step (b), the entry's MULTI
            deleted = True
            store.redis.pipeline = real_pipeline  # type: ignore[method-assign]
            return _DeletingFirst(store, real_pipeline(*args, **kwargs))
        return real_pipeline(*args, **kwargs)

    store.redis.pipeline = pipeline_that_lets_the_deletion_in_first  # type: ignore[method-assign]
    with pytest.raises(AccountGone):
        if kind == "session":
            await store.sessions.add("ef" * 32, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
        else:
            await add_key(store, "key_1", digest="ef" * 32)

    assert deleted
    assert await store.lookup.find_session("ef" * 32) is None
    assert await store.lookup.find_api_key("ef" * 32) is None
    assert await store.redis.keys("t:{usr_a}:*") == []
    assert await store.redis.keys("t:*:" + "ef" * 32) == []


class _DeletingFirst:
    """A MULTI pipeline that deletes usr_a completely before it runs."""

    def __init__(self, store: Stores, pipe) -> None:  # type: ignore[no-untyped-def]
        self._store = store
        self._pipe = pipe

    async def __aenter__(self):  # type: ignore[no-untyped-def]
        await self._pipe.__aenter__()
        return self

    async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
        return await self._pipe.__aexit__(*exc)

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self._pipe, name)

    async def execute(self):  # type: ignore[no-untyped-def]
        await self._store.users.delete("usr_a", "usr_a@example.com")
        return await self._pipe.execute()


async def test_a_deletion_cut_short_after_the_user_record_can_be_finished(store) -> None:
    await add_key(store, "key_1")
    await store.sessions.add("ef" * 32, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    await store.redis.delete(store.keys.user("usr_a"))  # step (1) done, then the crash

    assert await store.users.find_id("usr_a@example.com") == "usr_a"  # still findable
    await store.users.delete("usr_a", "usr_a@example.com")

    assert await store.lookup.find_api_key(DIGEST) is None
    assert await store.lookup.find_session("ef" * 32) is None
    assert await store.users.find_id("usr_a@example.com") is None
    assert await store.redis.keys("t:{usr_a}:*") == []


async def test_a_late_deletion_never_frees_an_email_another_account_has_taken(store) -> None:
    await store.users.delete("usr_a", "usr_a@example.com")
    assert await store.users.add("usr_c", "usr_a@example.com", "hash", NOW)

    await store.users.delete("usr_a", "usr_a@example.com")  # repeated, or a slow second operator

    assert await store.users.find_id("usr_a@example.com") == "usr_c"


# -- the session index lives as long as its longest-lived session -------------------------------


async def test_a_shorter_session_never_shortens_the_index_of_a_longer_one(store) -> None:
    long_lived, short_lived = "01" * 32, "02" * 32
    await store.sessions.add(long_lived, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    # FILEHOST_SESSION_MAX_SECONDS lowered, then another login.
    await store.sessions.add(short_lived, "usr_a", NOW + 5, NOW + 3_600_000, NOW + 3_600_000)

    index = store.keys.account_sessions("usr_a")
    assert await store.redis.pexpiretime(index) == NOW + 7 * DAY + SESSION_EXPIRED_GRACE_MS
    await store.users.delete("usr_a", "usr_a@example.com")
    assert await store.lookup.find_session(long_lived) is None


async def test_the_index_outlives_an_older_session_after_the_max_lifetime_was_lowered(
    redis_url: str, redis_mode: str
) -> None:
    """In real time: a later session with a one-second lifetime must not make the index
    expire, and with it the only way to find the older session when its user is deleted."""
    client = await async_client(redis_url, redis_mode)
    store = open_stores(client, "t")
    try:
        now = time.time_ns() // 1_000_000
        assert await store.users.add("usr_a", "a@example.com", "hash", now)
        await store.sessions.add("01" * 32, "usr_a", now, now + DAY, now + 7 * DAY)
        await store.sessions.add("02" * 32, "usr_a", now, now + 1000, now + 1000)
        await asyncio.sleep(1.2)  # the short session is past its deadline

        assert await client.exists(store.keys.account_sessions("usr_a")) == 1
        await store.users.delete("usr_a", "a@example.com")
        assert await store.lookup.find_session("01" * 32) is None
    finally:
        await client.aclose()


# -- expired entries are kept a while, so they are answered as expired --------------------------


async def test_entries_are_kept_a_grace_past_their_deadline_then_removed(store) -> None:
    await add_key(store, "key_1", expires=NOW + DAY)
    await store.sessions.add("ef" * 32, "usr_a", NOW, NOW + DAY, NOW + 7 * DAY)
    session = store.keys.session_entry("ef" * 32)

    assert await store.redis.pexpiretime(session) == NOW + DAY + SESSION_EXPIRED_GRACE_MS
    await store.sessions.renew("ef" * 32, NOW + 2 * DAY, NOW + 2 * DAY)
    assert await store.redis.pexpiretime(session) == NOW + 2 * DAY + SESSION_EXPIRED_GRACE_MS
    assert await store.redis.pexpiretime(store.keys.key_entry(DIGEST)) == (
        NOW + DAY + KEY_EXPIRED_GRACE_MS
    )


async def test_a_key_in_its_grace_is_still_listed_for_deletion_but_not_counted(store) -> None:
    assert await add_key(store, "key_1", digest="01" * 32, expires=NOW + DAY, limit=1)
    later = NOW + DAY + 1  # key_1 expired, its entry still kept
    assert await add_key(store, "key_2", digest="02" * 32, created=later, limit=1)
    assert [record.id for record in await store.api_keys.list("usr_a", later)] == ["key_2"]

    await store.users.delete("usr_a", "usr_a@example.com")
    assert await store.redis.exists(store.keys.key_entry("01" * 32)) == 0


async def test_a_limited_lookup_reads_the_entry_and_takes_from_its_bucket_in_one_script(
    store: Stores,
) -> None:
    limited = open_stores(store.redis, "t", rate_limit=RateLimit(per_second=1, burst=2))
    assert await add_key(store, "key_1")

    takes = [await limited.lookup.find_api_key(DIGEST, NOW) for _ in range(3)]

    assert [entry.key_id for entry in takes] == ["key_1"] * 3
    assert [entry.rate for entry in takes] == [
        RateVerdict(allowed=True, remaining=1, wait_us=0, full_in_us=1_000_000),
        RateVerdict(allowed=True, remaining=0, wait_us=0, full_in_us=2_000_000),
        RateVerdict(False, remaining=0, wait_us=1_000_000, full_in_us=2_000_000, taken=0),
    ]
    later = await limited.lookup.find_api_key(DIGEST, NOW + 1000)
    assert later.rate == RateVerdict(True, 0, 0, 2_000_000)
    # No entry, no bucket: unknown digests cost one read and leave nothing behind.
    assert await limited.lookup.find_api_key("cd" * 32, NOW) is None
    assert (
        await store.redis.exists(limited.keys.rate_bucket(limited.keys.key_entry("cd" * 32))) == 0
    )


async def test_a_take_of_several_gets_what_fits_and_given_back_requests_count_again(
    store: Stores,
) -> None:
    limited = open_stores(store.redis, "t", rate_limit=RateLimit(per_second=1, burst=5))
    assert await add_key(store, "key_1")

    first = await limited.lookup.find_api_key(DIGEST, NOW, take=3)
    second = await limited.lookup.find_api_key(DIGEST, NOW, take=3)  # only two fit
    refused = await limited.lookup.find_api_key(DIGEST, NOW, take=3)

    assert first.rate == RateVerdict(True, 2, 0, 3_000_000, taken=3)
    assert second.rate == RateVerdict(True, 0, 0, 5_000_000, taken=2)
    assert refused.rate == RateVerdict(False, 0, 1_000_000, 5_000_000, taken=0)
    # Four unused requests given back: they fit again, and the take that returns them gets one.
    returned = await limited.lookup.find_api_key(DIGEST, NOW, take=1, give_back=4)
    assert returned.rate == RateVerdict(True, 3, 0, 2_000_000, taken=1)
    # Giving back more than was ever taken never fills the bucket past its burst.
    full = await limited.lookup.find_api_key(DIGEST, NOW, take=10, give_back=100)
    assert full.rate == RateVerdict(True, 0, 0, 5_000_000, taken=5)


async def test_a_lookup_that_takes_nothing_reads_the_entry_alone(store: Stores) -> None:
    limited = open_stores(store.redis, "t", rate_limit=RateLimit(per_second=1, burst=1))
    assert await add_key(store, "key_1")

    entries = [await limited.lookup.find_api_key(DIGEST, NOW, take=0) for _ in range(3)]

    assert [(entry.key_id, entry.rate) for entry in entries] == [("key_1", None)] * 3
    bucket = limited.keys.rate_bucket(limited.keys.key_entry(DIGEST))
    assert await store.redis.exists(bucket) == 0  # no script ran: it would have made one


async def test_sessions_are_limited_through_the_same_script(store: Stores) -> None:
    limited = open_stores(store.redis, "t", rate_limit=RateLimit(per_second=10, burst=1))
    await store.sessions.add(DIGEST, "usr_a", NOW, NOW + DAY, NOW + 2 * DAY)

    first = await limited.lookup.find_session(DIGEST, NOW)
    second = await limited.lookup.find_session(DIGEST, NOW)

    assert first.user_id == second.user_id == "usr_a"
    assert first.rate.allowed and not second.rate.allowed
    assert second.rate.wait_us == 100_000


async def test_login_attempts_are_reserved_up_to_the_limit_in_a_window_from_the_first(
    store: Stores,
) -> None:
    email, address = "t:login-failures:email:x", "t:login-failures:ip:192.0.2.1"
    both = [(email, 2), (address, 3)]

    assert await store.counters.reserve(both, 60_000) == [0, 0]
    assert await store.counters.reserve(both, 60_000) == [0, 0]
    refused, reserved = await store.counters.reserve(both, 60_000)

    assert 0 < refused <= 60_000 and reserved == 0  # email over, address counted
    assert await store.redis.get(email) == "2"  # a refusal counts nothing
    assert await store.redis.get(address) == "3"
    assert 0 < await store.redis.pttl(address) <= 60_000
    await store.counters.release([address, address, address, address])
    assert await store.redis.get(address) == "0"  # never below zero
    await store.counters.clear(email)
    assert await store.counters.reserve([(email, 2)], 60_000) == [0]


async def test_concurrent_reservations_never_pass_the_limit(store: Stores) -> None:
    counter = "t:login-failures:email:x"
    replies = await asyncio.gather(
        *(store.counters.reserve([(counter, 10)], 60_000) for _ in range(40))
    )
    assert sum(1 for [wait] in replies if wait == 0) == 10
